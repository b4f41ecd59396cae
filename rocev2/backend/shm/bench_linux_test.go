package shm_test

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/shm"
	"github.com/goroce/goroce/rocev2/backend/udp"
)

// Benchmarks between two processes (the test binary runs itself as the
// peer): a ping-pong of 64-byte packets and a bulk stream of 4 KiB packets,
// over the shared-memory backend, over the UDP backend, and (ping-pong) over
// plain UDP sockets, the floor of what the kernel's UDP costs. Each reports
// the round trip (or the rate) and the CPU time both processes spent per
// round trip (packet), from getrusage.

// link is one end of a benchmark's connection: send one batch, receive at
// least one packet.
type link struct {
	send    func(pkts []backend.Outgoing) error
	receive func(pkts []backend.Incoming) (int, error)
	local   netip.AddrPort
	close   func()
}

// openLink opens the kind of link ("shm", "udp", "raw") on addr.
func openLink(tb testing.TB, kind, dir string, addr netip.AddrPort) link {
	tb.Helper()
	switch kind {
	case "shm", "shm-spin5us", "shm-spin20us", "shm-spin50us":
		var spin time.Duration // none, the default
		if _, s, ok := strings.Cut(kind, "-spin"); ok {
			spin, _ = time.ParseDuration(s)
		}
		be, err := shm.Open(shm.Config{Dir: dir, Addr: addr, Spin: spin})
		require.NoError(tb, err)
		return link{be.Send, be.Receive, be.LocalAddr(), func() { be.Close() }}
	case "udp":
		be, err := udp.Open(udp.Config{Addr: netip.AddrPortFrom(addr.Addr(), 0)})
		require.NoError(tb, err)
		return link{be.Send, be.Receive, be.LocalAddr(), func() { be.Close() }}
	}
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr.Addr(), 0)))
	require.NoError(tb, err)
	buf := make([]byte, 65536)
	return link{
		send: func(pkts []backend.Outgoing) error {
			for _, d := range pkts {
				if _, err := c.WriteToUDPAddrPort(d.Buf, d.Dst); err != nil {
					return err
				}
			}
			return nil
		},
		receive: func(pkts []backend.Incoming) (int, error) {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return 0, err
			}
			pkts[0] = backend.Incoming{Buf: buf[:n], Src: from}
			return 1, nil
		},
		local: c.LocalAddr().(*net.UDPAddr).AddrPort(),
		close: func() { c.Close() },
	}
}

// cpuTime is the user and system CPU time the process used so far.
func cpuTime() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// childEcho is the benchmarks' peer: "echo-KIND" answers every packet with
// itself, "sink-KIND" answers every 64th with a small packet. Between
// START and STOP on stdin it measures its own CPU time.
func childEcho(t *testing.T, role, dir string, in *bufio.Scanner) {
	kind, sink := strings.CutPrefix(role, "sink-")
	if !sink {
		kind = strings.TrimPrefix(role, "echo-")
	}
	l := openLink(t, kind, dir, netip.MustParseAddrPort(childAddr))
	defer l.close()
	go func() {
		rx := make([]backend.Incoming, 64)
		echo := make([]backend.Outgoing, 64)
		ack := []backend.Outgoing{{Buf: make([]byte, 64)}}
		got := 0
		for {
			n, err := l.receive(rx)
			if err != nil {
				return
			}
			if !sink {
				for i, d := range rx[:n] {
					echo[i] = backend.Outgoing{Buf: d.Buf, Dst: d.Src}
				}
				if l.send(echo[:n]) != nil {
					return
				}
				continue
			}
			for got += n; got >= 64; got -= 64 {
				ack[0].Dst = rx[0].Src
				if l.send(ack) != nil {
					return
				}
			}
		}
	}()
	fmt.Printf("READY %d\n", l.local.Port())
	var start time.Duration
	for in.Scan() {
		switch in.Text() {
		case "START":
			start = cpuTime()
			fmt.Println("STARTED")
		case "STOP":
			fmt.Printf("CPU %d\n", cpuTime()-start)
		}
	}
}

// benchPeer starts the peer process and opens our end.
func benchPeer(b *testing.B, role, kind string) (c *child, l link, peer netip.AddrPort) {
	dir := runDir(b)
	c = startChild(b, role, dir, nil, "")
	port, err := strconv.Atoi(strings.TrimPrefix(c.line(b, "READY "), "READY "))
	require.NoError(b, err)
	peer = netip.AddrPortFrom(netip.MustParseAddrPort(childAddr).Addr(), uint16(port))
	l = openLink(b, kind, dir, netip.MustParseAddrPort(parentAddr))
	b.Cleanup(l.close)
	watchdog := time.AfterFunc(5*time.Minute, l.close) // a lost packet must not hang the run
	b.Cleanup(func() { watchdog.Stop() })
	return c, l, peer
}

// measure runs the timed loop between the peer's START and STOP and
// reports CPU time per op for both processes.
func measure(b *testing.B, c *child, loop func()) {
	c.say(b, "START")
	c.line(b, "STARTED")
	cpu0 := cpuTime()
	b.ResetTimer()
	loop()
	b.StopTimer()
	cpu := cpuTime() - cpu0
	c.say(b, "STOP")
	peerCPU, err := strconv.ParseInt(strings.TrimPrefix(c.line(b, "CPU "), "CPU "), 10, 64)
	require.NoError(b, err)
	n := float64(b.N)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n/1e3, "µs/op")
	b.ReportMetric(float64(cpu.Nanoseconds())/n/1e3, "cpu-µs/op-self")
	b.ReportMetric(float64(peerCPU)/n/1e3, "cpu-µs/op-peer")
	b.ReportMetric(float64(cpu.Nanoseconds()+peerCPU)/n/1e3, "cpu-µs/op")
}

// BenchmarkPingPong: one op is a round trip of a 64-byte packet.
func BenchmarkPingPong(b *testing.B) {
	for _, kind := range []string{"shm", "shm-spin5us", "shm-spin20us", "shm-spin50us", "udp", "raw"} {
		b.Run(kind, func(b *testing.B) {
			c, l, peer := benchPeer(b, "echo-"+kind, kind)
			ping := []backend.Outgoing{{Buf: make([]byte, 64), Dst: peer}}
			rx := make([]backend.Incoming, 64)
			rtt := func() {
				require.NoError(b, l.send(ping))
				_, err := l.receive(rx)
				require.NoError(b, err)
			}
			for range 1000 {
				rtt()
			}
			measure(b, c, func() {
				for range b.N {
					rtt()
				}
			})
		})
	}
}

// BenchmarkBulk: one op is a 4 KiB packet, sent in batches of 64, each
// answered by the peer with a small packet when it has received them all.
func BenchmarkBulk(b *testing.B) {
	for _, kind := range []string{"shm", "shm-spin20us", "udp"} {
		b.Run(kind, func(b *testing.B) {
			c, l, peer := benchPeer(b, "sink-"+kind, kind)
			batch := make([]backend.Outgoing, 64)
			for i := range batch {
				batch[i] = backend.Outgoing{Buf: make([]byte, 4096), Dst: peer}
			}
			rx := make([]backend.Incoming, 64)
			round := func() {
				require.NoError(b, l.send(batch))
				_, err := l.receive(rx)
				require.NoError(b, err)
			}
			for range 20 {
				round()
			}
			b.SetBytes(4096)
			measure(b, c, func() {
				for range (b.N + 63) / 64 {
					round()
				}
			})
		})
	}
}
