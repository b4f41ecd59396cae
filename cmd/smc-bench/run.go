package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/goroce/goroce/smcr"
)

// The workloads of the experiment.
const (
	wlSet   = "redis-set"
	wlGet   = "redis-get"
	wlUperf = "uperf"
)

var allWorkloads = []string{wlSet, wlGet, wlUperf}

// result is one measurement: one workload, clients value, mode and
// repetition.
type result struct {
	Workload string
	Clients  int
	Mode     string
	Rep      int

	Requests        int64
	Seconds         float64
	RPS             float64
	P50, P99, Max   float64 // microseconds
	LoadCPU, SrvCPU procCPU // CPU and context switches of each process during the run
	// CompsPerWakeup is over both processes' SMC-R devices of the mode
	// (0 for TCP).
	Comps, Wakeups uint64
	// What the connections speak, as each side saw it.
	ClientConns modeCounts
	ServerConns map[string]int
	LinkGroups  int // the link groups the client's connections use
	Err         string
}

// CPUPerReq is both processes' CPU time per request, in microseconds.
func (r *result) CPUPerReq() float64 {
	return r.perReq(r.LoadCPU.UserS + r.LoadCPU.SysS + r.SrvCPU.UserS + r.SrvCPU.SysS)
}

// UserPerReq and SysPerReq split it into user and system time.
func (r *result) UserPerReq() float64 { return r.perReq(r.LoadCPU.UserS + r.SrvCPU.UserS) }
func (r *result) SysPerReq() float64  { return r.perReq(r.LoadCPU.SysS + r.SrvCPU.SysS) }

func (r *result) perReq(s float64) float64 {
	if r.Requests == 0 {
		return 0
	}
	return s * 1e6 / float64(r.Requests)
}

// CtxswPerReq is both processes' context switches per request.
func (r *result) CtxswPerReq() float64 {
	if r.Requests == 0 {
		return 0
	}
	return float64(r.LoadCPU.Vol+r.LoadCPU.Nonvol+r.SrvCPU.Vol+r.SrvCPU.Nonvol) / float64(r.Requests)
}

// CompsPerWakeup is the completions handled per CQ poller wake-up.
func (r *result) CompsPerWakeup() float64 {
	if r.Wakeups == 0 {
		return 0
	}
	return float64(r.Comps) / float64(r.Wakeups)
}

// bench is the load generator's state: its settings and the server.
type bench struct {
	set       smcSettings
	srv       *serverProc
	n         int64
	duration  time.Duration
	pipe      int
	deadlines bool
	profile   string // directory for CPU profiles, or ""
}

// hangGrace is how long past its deadline a measurement may take before it
// is declared hung: its connections are closed and the point fails.
const hangGrace = 20 * time.Second

// cqCounters returns the completions and wake-ups of the client's device of
// an SMC-R mode.
func (b *bench) cqCounters(mode string) (comps, wakeups uint64) {
	if mode == modeTCP {
		return 0, 0
	}
	st, ok := smcr.StatsOfDevice(clientAddr, b.set.devPort(mode))
	if !ok {
		return 0, 0
	}
	return st.CQ.Completions, st.CQ.Wakeups
}

// counterDelta is after-before for counters that restart from zero when a
// device closes and is opened again.
func counterDelta(after, before uint64) uint64 {
	if after < before {
		return after
	}
	return after - before
}

// measure runs one workload on connections already set up. run must end
// by itself once the bound is exhausted; abort unblocks it if it hangs.
func (b *bench) measure(r *result, run func(*bound, *hist) (int64, error), abort func()) error {
	s0, err := b.srv.stats()
	if err != nil {
		return err
	}
	lc0, lw0 := b.cqCounters(r.Mode)
	profName := fmt.Sprintf("%s-c%d-%s-rep%d", r.Workload, r.Clients, r.Mode, r.Rep+1)
	if b.profile != "" {
		if err := b.srv.profile(true, profName+"-server.pprof"); err != nil {
			return err
		}
		if err := startProfile(b.profile, profName+"-loadgen.pprof"); err != nil {
			return err
		}
	}
	p0, err := readProc(os.Getpid())
	if err != nil {
		return err
	}
	q0, err := readProc(b.srv.pid())
	if err != nil {
		return err
	}
	var h hist
	bd := &bound{n: b.n, deadline: time.Now().Add(b.duration)}
	t0 := time.Now()
	type out struct {
		n   int64
		err error
	}
	done := make(chan out, 1)
	go func() {
		n, err := run(bd, &h)
		done <- out{n, err}
	}()
	var o out
	select {
	case o = <-done:
	case <-time.After(b.duration + hangGrace):
		abort()
		select {
		case o = <-done:
		case <-time.After(hangGrace):
			return fmt.Errorf("%s c=%d %s: hung, and closing its connections did not end it", r.Workload, r.Clients, r.Mode)
		}
		o.err = fmt.Errorf("hung: no progress %v after the deadline; connections closed (%v)", hangGrace, o.err)
	}
	r.Seconds = time.Since(t0).Seconds()
	p1, _ := readProc(os.Getpid())
	q1, _ := readProc(b.srv.pid())
	if b.profile != "" {
		stopProfile()
		if err := b.srv.profile(false, ""); err != nil {
			return err
		}
	}
	lc1, lw1 := b.cqCounters(r.Mode)
	s1, err := b.srv.stats()
	if err != nil {
		return err
	}
	r.Requests = o.n
	r.RPS = float64(o.n) / r.Seconds
	r.P50, r.P99, r.Max = h.quantile(0.50), h.quantile(0.99), h.maxUs()
	r.LoadCPU, r.SrvCPU = p1.sub(p0), q1.sub(q0)
	if r.Mode != modeTCP {
		sc0, sc1 := s0.CQ[r.Mode], s1.CQ[r.Mode]
		r.Comps = counterDelta(lc1, lc0) + counterDelta(sc1.CQ.Completions, sc0.CQ.Completions)
		r.Wakeups = counterDelta(lw1, lw0) + counterDelta(sc1.CQ.Wakeups, sc0.CQ.Wakeups)
	}
	if o.err != nil {
		r.Err = o.err.Error()
	}
	return nil
}

// serverDelta is how many connections the server accepted on a mode's
// listeners between two readings, by what they speak.
func serverDelta(before, after ctlResp, mode string) map[string]int {
	d := map[string]int{}
	a, b := after.Accepted[mode], before.Accepted[mode]
	if a == nil {
		return d
	}
	for k, v := range a.ByMode {
		prev := 0
		if b != nil {
			prev = b.ByMode[k]
		}
		if v-prev != 0 {
			d[k] = v - prev
		}
	}
	return d
}

// checkServer says what is wrong with the server's view of n connections
// of mode: each one must speak the mode.
func checkServer(d map[string]int, mode string, n int) error {
	m := modeCounts{ByMode: d}
	if err := m.check(mode, n); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// runPoint measures every selected workload of one clients value and mode:
// the redis ones on one set of go-redis clients (SET first, so that GET
// finds its key), then uperf on connections of its own.
func (b *bench) runPoint(workloads []string, clients int, mode string, rep int, report func(*result)) error {
	dial, err := b.set.dialFunc(mode)
	if err != nil {
		return err
	}
	var redisWL, uperfWL []string
	for _, w := range workloads {
		if w == wlUperf {
			uperfWL = append(uperfWL, w)
		} else {
			redisWL = append(redisWL, w)
		}
	}
	if len(redisWL) > 0 {
		s0, err := b.srv.stats()
		if err != nil {
			return err
		}
		cs := &conns{mode: mode, dial: dial}
		addr := net.JoinHostPort(serverAddr.String(), strconv.Itoa(b.srv.hello.Redis[mode]))
		rc, err := newRedisClients(cs, addr, clients, b.pipe, b.deadlines)
		if err != nil {
			for _, w := range redisWL {
				report(&result{Workload: w, Clients: clients, Mode: mode, Rep: rep, Err: err.Error()})
			}
			// and the uperf workload still runs
		} else if err := b.runRedis(redisWL, clients, mode, rep, cs, rc, s0, report); err != nil {
			return err
		}
	}
	if len(uperfWL) > 0 {
		s0, err := b.srv.stats()
		if err != nil {
			return err
		}
		cs := &conns{mode: mode, dial: dial}
		addr := net.JoinHostPort(serverAddr.String(), strconv.Itoa(b.srv.hello.Uperf[mode]))
		uc, err := newUperfClients(cs, addr, clients)
		if err != nil {
			report(&result{Workload: wlUperf, Clients: clients, Mode: mode, Rep: rep, Err: err.Error()})
			return nil
		}
		// The server counts a connection once it accepted it, which may
		// come after the client's dial returned: wait for all of them.
		s1, err := b.srv.waitAccepted(mode, s0, clients)
		if err != nil {
			uc.close()
			return err
		}
		connErr := connCheck(cs, mode, clients, serverDelta(s0, s1, mode))
		r := &result{Workload: wlUperf, Clients: clients, Mode: mode, Rep: rep}
		if err := b.measure(r, uc.run, uc.close); err != nil {
			uc.close()
			return err
		}
		b.fill(r, cs, serverDelta(s0, s1, mode), connErr)
		report(r)
		uc.close()
	}
	return nil
}

// connCheck checks both sides' view of the connections of a point.
func connCheck(cs *conns, mode string, n int, srv map[string]int) error {
	if err := cs.counts.check(mode, n); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	return checkServer(srv, mode, n)
}

func (b *bench) fill(r *result, cs *conns, srv map[string]int, connErr error) {
	r.ClientConns = cs.counts
	r.ServerConns = srv
	r.LinkGroups = len(cs.counts.LinkGroups)
	if connErr != nil {
		r.addErr(connErr.Error())
	}
}

func (r *result) addErr(s string) {
	if r.Err != "" {
		r.Err += "; "
	}
	r.Err += s
}

// runAll runs every repetition of every point, the modes interleaved per
// clients value (their order rotating, so that no mode always runs first
// after a change of clients value).
func (b *bench) runAll(workloads []string, clients []int, modes []string, reps int, progress func(done, total int, r *result)) ([]*result, error) {
	var all []*result
	total := reps * len(clients) * len(modes) * len(workloads)
	for rep := range reps {
		for ci, c := range clients {
			for k := range modes {
				mode := modes[(k+rep+ci)%len(modes)]
				err := b.runPoint(workloads, c, mode, rep, func(r *result) {
					all = append(all, r)
					progress(len(all), total, r)
				})
				if err != nil {
					return all, fmt.Errorf("c=%d %s: %w", c, mode, err)
				}
			}
		}
	}
	return all, nil
}

// runRedis measures the redis workloads on the connected clients rc and
// closes them.
func (b *bench) runRedis(redisWL []string, clients int, mode string, rep int, cs *conns, rc *redisClients, s0 ctlResp, report func(*result)) error {
	s1, err := b.srv.stats()
	if err != nil {
		rc.close()
		return err
	}
	connErr := connCheck(cs, mode, clients, serverDelta(s0, s1, mode))
	for _, w := range redisWL {
		r := &result{Workload: w, Clients: clients, Mode: mode, Rep: rep}
		set := w == wlSet
		err := b.measure(r, func(bd *bound, h *hist) (int64, error) { return rc.run(bd, set, h) }, rc.close)
		if err != nil {
			rc.close()
			return err
		}
		b.fill(r, cs, serverDelta(s0, s1, mode), connErr)
		if cs.dials != clients {
			r.addErr(fmt.Sprintf("%d connections dialed for %d clients (a client reconnected)", cs.dials, clients))
		}
		report(r)
	}
	rc.close()
	return nil
}
