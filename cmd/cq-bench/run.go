package main

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// clientAddr is the client process's loopback address.
var clientAddr = netip.MustParseAddr("127.0.0.1")

// result is one measurement.
type result struct {
	TPS      float64
	Comps    uint64  // completions handled, both processes
	Wakeups  uint64  // poller wake-ups, both processes
	CPU      float64 // CPU seconds, both processes
	P50, P99 float64 // microseconds
	Err      string  // why the point is not trustworthy (work requests failed)
}

// CompsPerWakeup is completions per poller wake-up over both processes.
func (r result) CompsPerWakeup() float64 {
	if r.Wakeups == 0 {
		return 0
	}
	return float64(r.Comps) / float64(r.Wakeups)
}

// WakeupsPer1k is poller wake-ups per thousand completions.
func (r result) WakeupsPer1k() float64 {
	if r.Comps == 0 {
		return 0
	}
	return 1000 * float64(r.Wakeups) / float64(r.Comps)
}

// CPUPerMComp is CPU seconds (both processes) per million completions.
func (r result) CPUPerMComp() float64 {
	if r.Comps == 0 {
		return 0
	}
	return r.CPU * 1e6 / float64(r.Comps)
}

// measure runs one test against the server for d.
func measure(c *ctl, t test, d time.Duration) (result, error) {
	if err := c.send(msg{Kind: "test", Test: &t}); err != nil {
		return result{}, err
	}
	var h hist
	var r result
	cpu0 := cpuSeconds()
	if t.Mode == "tcp" {
		m, err := c.recv("endpoint")
		if err != nil {
			return r, err
		}
		addr := net.JoinHostPort(serverAddr.String(), strconv.Itoa(int(m.Port)))
		n, err := tcpClient(addr, t.Clients, t.Req, t.Resp, d, &h)
		if err != nil {
			return r, err
		}
		r.TPS = float64(n) / d.Seconds()
	} else {
		peer, err := c.recv("endpoint")
		if err != nil {
			return r, err
		}
		ep, err := openEndpoint(clientAddr, t, t.Req, t.Resp)
		if err != nil {
			return r, err
		}
		defer ep.close()
		if err := ep.connect(peer); err != nil {
			return r, err
		}
		if err := c.send(ep.endpointMsg()); err != nil {
			return r, err
		}
		if _, err := c.recv("ready"); err != nil {
			return r, err
		}
		n := ep.runClient(d, &h)
		if err := ep.err(); err != nil {
			r.Err = "client: " + err.Error()
		}
		st := ep.cqs.Stats()
		r.TPS = float64(n) / d.Seconds()
		r.Comps, r.Wakeups = st.Completions, st.Wakeups
	}
	r.CPU = cpuSeconds() - cpu0
	if err := c.send(msg{Kind: "stop"}); err != nil {
		return r, err
	}
	m, err := c.recv("stats")
	if err != nil {
		return r, err
	}
	if m.Err != "" && r.Err == "" {
		r.Err = "server: " + m.Err
	}
	r.CPU += m.CPU
	r.Comps += m.Comps
	r.Wakeups += m.Wakeups
	r.P50, r.P99 = h.quantile(0.50), h.quantile(0.99)
	return r, nil
}

// row is one table row: every mode at one connection count.
type row struct {
	Shape   string
	Clients int
	Res     map[string]result
}

// runAll measures every shape, connection count and mode in turn.
func runAll(c *ctl, shapes []shape, clients []int, modes []string, d time.Duration, progress func(string)) ([]row, error) {
	var rows []row
	for _, s := range shapes {
		for _, n := range clients {
			rw := row{Shape: s.name, Clients: n, Res: map[string]result{}}
			for _, mode := range modes {
				r, err := measure(c, test{Mode: mode, Clients: n, Req: s.req, Resp: s.resp}, d)
				if err != nil {
					return rows, fmt.Errorf("%s, %d clients, %s: %w", s.name, n, mode, err)
				}
				rw.Res[mode] = r
				line := fmt.Sprintf("%s c=%d %s: %.0f tps", s.name, n, mode, r.TPS)
				if r.Err != "" {
					line += " (FAILED: " + r.Err + ")"
				}
				progress(line)
			}
			rows = append(rows, rw)
		}
	}
	return rows, nil
}
