package tcpopt

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/goroce/goroce/smcr/smcwire"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

type controlFunc = func(network, address string, c syscall.RawConn) error

// wantTail is how a Signaller's option ends the options of a SYN or
// SYN-ACK: the option, then the kernel's NOP padding.
var wantTail = []byte{0xFE, 0x06, 0xE2, 0xD4, 0xC3, 0xD9, 0x01, 0x01}

// openSignaller opens a Signaller closed at the end of the test, or skips
// the test when the process may not load BPF programs.
func openSignaller(t *testing.T) *Signaller {
	t.Helper()
	s, err := Open()
	if errors.Is(err, ErrNotPermitted) {
		t.Skipf("skipping: loading BPF is not permitted (run the tests as root): %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// needRoot skips tests that capture packets (CAP_NET_RAW).
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: capturing on lo needs root")
	}
}

// listen listens on 127.0.0.1 without MPTCP; ctl may be nil.
func listen(t *testing.T, ctl controlFunc) *net.TCPListener {
	t.Helper()
	return listenOn(t, "tcp4", "127.0.0.1:0", ctl)
}

func listenOn(t *testing.T, network, addr string, ctl controlFunc) *net.TCPListener {
	t.Helper()
	lc := net.ListenConfig{Control: ctl}
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), network, addr)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	// Accept follows a finished Dial, so it never waits; the deadline
	// only bounds a failure.
	require.NoError(t, ln.(*net.TCPListener).SetDeadline(time.Now().Add(30*time.Second)))
	return ln.(*net.TCPListener)
}

// dial connects without MPTCP; ctl may be nil. The timeout only bounds a
// failure.
func dial(t *testing.T, ctl controlFunc, addr net.Addr) *net.TCPConn {
	t.Helper()
	d := net.Dialer{Control: ctl, Timeout: 10 * time.Second}
	d.SetMultipathTCP(false)
	c, err := d.Dial(addr.Network(), addr.String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

func accept(t *testing.T, ln *net.TCPListener) *net.TCPConn {
	t.Helper()
	c, err := ln.AcceptTCP()
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func portOf(a net.Addr) uint16 { return uint16(a.(*net.TCPAddr).Port) }

// smcOptions counts the SMC options in a TCP options area.
func smcOptions(opts []byte) int {
	n := 0
	for i := 0; i < len(opts); {
		switch opts[i] {
		case 0:
			return n
		case 1:
			i++
			continue
		}
		if i+1 >= len(opts) || opts[i+1] < 2 || int(opts[i+1]) > len(opts)-i {
			return n
		}
		if smcwire.HasSMCOption(opts[i : i+int(opts[i+1])]) {
			n++
		}
		i += int(opts[i+1])
	}
	return n
}

// requireOption checks the exact bytes: the option once, at the end,
// followed by the padding; or no SMC option at all.
func requireOption(t *testing.T, what string, opts []byte, want bool) {
	t.Helper()
	if want {
		require.True(t, bytes.HasSuffix(opts, wantTail), "%s options % x should end with % x", what, opts, wantTail)
		require.Equal(t, 1, smcOptions(opts), "%s options % x", what, opts)
		return
	}
	require.Zero(t, smcOptions(opts), "%s options % x should not carry the SMC option", what, opts)
	require.NotContains(t, string(opts), string(wantTail[:2]), "%s options % x", what, opts)
}

// answer is an expected PeerSignalled result.
type answer int

const (
	no answer = iota
	yes
	untracked // ErrNotTracked
)

func requireAnswer(t *testing.T, what string, got bool, err error, want answer) {
	t.Helper()
	switch want {
	case untracked:
		require.ErrorIs(t, err, ErrNotTracked, what)
		require.False(t, got, what)
	default:
		require.NoError(t, err, what)
		require.Equal(t, want == yes, got, what)
	}
}

// TestHandshakes is the matrix of opted-in and plain dialers and
// listeners, checked on the wire and through PeerSignalled, which is
// asked right after Dial and Accept return.
func TestHandshakes(t *testing.T) {
	needRoot(t)
	s := openSignaller(t)
	cases := []struct {
		name                 string
		dialer, listener     bool // opted in
		synOpt, synackOpt    bool
		dialerAns, acceptAns answer
	}{
		{"opted-in dialer to opted-in listener", true, true, true, true, yes, yes},
		{"opted-in dialer to plain listener", true, false, true, false, no, untracked},
		{"plain dialer to opted-in listener", false, true, false, false, untracked, no},
		{"plain dialer to plain listener", false, false, false, false, untracked, untracked},
	}
	ctl := func(on bool) controlFunc {
		if on {
			return s.Control
		}
		return nil
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ln := listen(t, ctl(tc.listener))
			cp := startCapture(t, portOf(ln.Addr()))
			c := dial(t, ctl(tc.dialer), ln.Addr())
			got, err := s.PeerSignalled(c)
			requireAnswer(t, "dialer", got, err, tc.dialerAns)
			a := accept(t, ln)
			got, err = s.PeerSignalled(a)
			requireAnswer(t, "accepted", got, err, tc.acceptAns)

			h := cp.handshake(t)
			requireOption(t, "SYN", h.syn, tc.synOpt)
			requireOption(t, "SYN-ACK", h.synack, tc.synackOpt)

			// Asking again gives the same answer.
			got, err = s.PeerSignalled(c)
			requireAnswer(t, "dialer, again", got, err, tc.dialerAns)
			got, err = s.PeerSignalled(a)
			requireAnswer(t, "accepted, again", got, err, tc.acceptAns)
		})
	}
}

// TestNoOptionAfterEstablishment: once the handshake is over, segments
// carry no option and do not call the program (the callback flag is
// cleared): the program runs a bounded number of times for many
// segments.
func TestNoOptionAfterEstablishment(t *testing.T) {
	needRoot(t)
	s := openSignaller(t)
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Skipf("skipping: BPF run statistics unavailable: %v", err)
	}
	defer stats.Close()

	ln := listen(t, s.Control)
	c := dial(t, s.Control, ln.Addr())
	a := accept(t, ln)
	runs := func() uint64 {
		st, err := s.progs[1].Stats()
		require.NoError(t, err)
		return st.RunCount
	}
	before := runs()
	const rounds = 1000 // each round: two data segments, and their ACKs
	buf := make([]byte, 1)
	for range rounds {
		_, err := c.Write([]byte{1})
		require.NoError(t, err)
		_, err = a.Read(buf)
		require.NoError(t, err)
		_, err = a.Write(buf)
		require.NoError(t, err)
		_, err = c.Read(buf)
		require.NoError(t, err)
	}
	// With the flag left on, each segment would run the program twice
	// (HDR_OPT_LEN and WRITE_HDR_OPT): at least 2*2*rounds runs. The
	// program also runs for other sockets of the cgroup, hence a margin
	// rather than zero.
	require.Less(t, runs()-before, uint64(rounds), "the program ran for established segments")
}

// TestOtherSocketsUntouched: while a Signaller has opted-in sockets, the
// process's other sockets, and an MPTCP-free plain listener on the same
// cgroup, never carry the option, in either direction.
func TestOtherSocketsUntouched(t *testing.T) {
	needRoot(t)
	s := openSignaller(t)
	opted := listen(t, s.Control)
	_ = dial(t, s.Control, opted.Addr()) // an opted-in connection exists
	_ = accept(t, opted)

	plain := listen(t, nil)
	cp := startCapture(t, portOf(plain.Addr()))
	c := dial(t, nil, plain.Addr())
	_ = accept(t, plain)
	h := cp.handshake(t)
	requireOption(t, "SYN", h.syn, false)
	requireOption(t, "SYN-ACK", h.synack, false)
	_, err := s.PeerSignalled(c)
	require.ErrorIs(t, err, ErrNotTracked)
}

// progIDs returns the IDs of the Signaller's programs.
func progIDs(t *testing.T, s *Signaller) []ebpf.ProgramID {
	t.Helper()
	var ids []ebpf.ProgramID
	for _, p := range s.progs {
		info, err := p.Info()
		require.NoError(t, err)
		id, ok := info.ID()
		require.True(t, ok)
		ids = append(ids, id)
	}
	return ids
}

// attached returns the IDs of the programs attached to the cgroup for
// the Signaller's two attach types.
func attached(t *testing.T, cgroup string) []ebpf.ProgramID {
	t.Helper()
	dir, err := os.Open(cgroup)
	require.NoError(t, err)
	defer dir.Close()
	var ids []ebpf.ProgramID
	for _, at := range []ebpf.AttachType{ebpf.AttachCgroupInetSockRelease, ebpf.AttachCGroupSockOps} {
		res, err := link.QueryPrograms(link.QueryOptions{Target: int(dir.Fd()), Attach: at})
		require.NoError(t, err)
		for _, p := range res.Programs {
			ids = append(ids, p.ID)
		}
	}
	return ids
}

// TestCloseDetaches: Close detaches both programs; a socket opted in just
// before Close and connected just after gets no option; Close is
// idempotent and the methods say ErrClosed.
func TestCloseDetaches(t *testing.T) {
	needRoot(t)
	s, err := Open()
	if errors.Is(err, ErrNotPermitted) {
		t.Skipf("skipping: %v", err)
	}
	require.NoError(t, err)
	defer s.Close()
	ids := progIDs(t, s)
	cgroup := s.cgroup
	for _, id := range ids {
		require.Contains(t, attached(t, cgroup), id)
	}

	ln := listen(t, nil)
	cp := startCapture(t, portOf(ln.Addr()))
	c := dial(t, func(network, address string, rc syscall.RawConn) error {
		if err := s.Control(network, address, rc); err != nil {
			return err
		}
		return s.Close() // between socket() and connect()
	}, ln.Addr())
	_ = accept(t, ln)
	h := cp.handshake(t)
	requireOption(t, "SYN after Close", h.syn, false)
	for _, id := range ids {
		require.NotContains(t, attached(t, cgroup), id)
	}

	require.NoError(t, s.Close())
	_, err = s.PeerSignalled(c)
	require.ErrorIs(t, err, ErrClosed)
	rc, err := c.SyscallConn()
	require.NoError(t, err)
	require.ErrorIs(t, s.Control("tcp4", "", rc), ErrClosed)
	s.Forget(c) // no panic, no effect
}

// TestTwoSignallers: two Signallers attached at once each handle their
// own sockets: every handshake carries the option exactly once, and each
// answers only for its own connections.
func TestTwoSignallers(t *testing.T) {
	needRoot(t)
	s1, s2 := openSignaller(t), openSignaller(t)
	for _, tc := range []struct {
		name          string
		dialer, owner *Signaller
	}{
		{"1 dials 2", s1, s2},
		{"2 dials 1", s2, s1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln := listen(t, tc.owner.Control)
			cp := startCapture(t, portOf(ln.Addr()))
			c := dial(t, tc.dialer.Control, ln.Addr())
			a := accept(t, ln)
			h := cp.handshake(t)
			requireOption(t, "SYN", h.syn, true)
			requireOption(t, "SYN-ACK", h.synack, true)

			got, err := tc.dialer.PeerSignalled(c)
			requireAnswer(t, "dialer, own Signaller", got, err, yes)
			got, err = tc.owner.PeerSignalled(a)
			requireAnswer(t, "accepted, own Signaller", got, err, yes)
			got, err = tc.owner.PeerSignalled(c)
			requireAnswer(t, "dialer, other Signaller", got, err, untracked)
			got, err = tc.dialer.PeerSignalled(a)
			requireAnswer(t, "accepted, other Signaller", got, err, untracked)
		})
	}
}

// entries returns the socks map's entries.
func entries(t *testing.T, s *Signaller) map[uint64]sockState {
	t.Helper()
	out := map[uint64]sockState{}
	var k uint64
	var v sockState
	it := s.socks.Iterate()
	for it.Next(&k, &v) {
		out[k] = v
	}
	require.NoError(t, it.Err())
	return out
}

func portCount(t *testing.T, s *Signaller, port uint16) uint32 {
	t.Helper()
	var n uint32
	require.NoError(t, s.ports.Lookup(uint32(port), &n))
	return n
}

func cookieOf(t *testing.T, c interface {
	SyscallConn() (syscall.RawConn, error)
}) uint64 {
	t.Helper()
	rc, err := c.SyscallConn()
	require.NoError(t, err)
	var cookie uint64
	var inner error
	require.NoError(t, rc.Control(func(fd uintptr) {
		cookie, inner = unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE)
	}))
	require.NoError(t, inner)
	return cookie
}

// TestForget: the listener, the dialer and the accepted child each have
// an entry; Forget removes a connection's; closing the listener removes
// its entry and port count.
func TestForget(t *testing.T) {
	s := openSignaller(t)
	ln := listen(t, s.Control)
	port := portOf(ln.Addr())
	c := dial(t, s.Control, ln.Addr())
	a := accept(t, ln)

	e := entries(t, s)
	require.Len(t, e, 3)
	require.Equal(t, sockState{State: stOptedIn | stListener, Port: uint32(port)}, e[cookieOf(t, ln)])
	require.Equal(t, sockState{State: stOptedIn | stDone | stPeer}, e[cookieOf(t, c)])
	require.Equal(t, sockState{State: stDone | stPassive | stPeer}, e[cookieOf(t, a)])
	require.EqualValues(t, 1, portCount(t, s, port))

	s.Forget(c)
	_, err := s.PeerSignalled(c)
	require.ErrorIs(t, err, ErrNotTracked)
	s.Forget(a)
	s.Forget(a) // twice is fine
	require.Len(t, entries(t, s), 1)

	require.NoError(t, ln.Close())
	require.Empty(t, entries(t, s))
	require.Zero(t, portCount(t, s, port))
}

// TestMapsStayBounded: 1000 connections, Forget called on half of them
// and none on the rest, leave the map as it was: entries go at Forget or
// at close.
func TestMapsStayBounded(t *testing.T) {
	s := openSignaller(t)
	ln := listen(t, s.Control)
	require.Len(t, entries(t, s), 1)
	d := net.Dialer{Control: s.Control, Timeout: 10 * time.Second}
	d.SetMultipathTCP(false)
	for i := range 1000 {
		conn, err := d.Dial("tcp4", ln.Addr().String())
		require.NoError(t, err)
		c := conn.(*net.TCPConn)
		a, err := ln.AcceptTCP()
		require.NoError(t, err)
		for _, x := range []*net.TCPConn{c, a} {
			got, err := s.PeerSignalled(x)
			require.NoError(t, err)
			require.True(t, got)
		}
		if i%2 == 0 {
			s.Forget(c)
			s.Forget(a)
		}
		require.NoError(t, c.Close())
		require.NoError(t, a.Close())
	}
	require.Len(t, entries(t, s), 1, "only the listener's entry is left")
	require.EqualValues(t, 1, portCount(t, s, portOf(ln.Addr())))
}

// TestFailedDialsLeaveNothing: a dial refused by the peer returns no
// connection to Forget; the release program drops its entry.
func TestFailedDialsLeaveNothing(t *testing.T) {
	s := openSignaller(t)
	ln := listen(t, nil)
	addr := ln.Addr()
	require.NoError(t, ln.Close()) // nobody listens there now
	d := net.Dialer{Control: s.Control, Timeout: 10 * time.Second}
	d.SetMultipathTCP(false)
	for range 20 {
		_, err := d.Dial("tcp4", addr.String())
		require.ErrorIs(t, err, syscall.ECONNREFUSED)
	}
	require.Empty(t, entries(t, s))
}

// TestUnacceptedChildrenLeaveNothing: children still in the accept queue
// when their listener closes never get a file; the program drops their
// entries when the kernel closes them.
func TestUnacceptedChildrenLeaveNothing(t *testing.T) {
	s := openSignaller(t)
	ln := listen(t, s.Control)
	const n = 8
	var conns []*net.TCPConn
	for range n {
		conns = append(conns, dial(t, s.Control, ln.Addr()))
	}
	// The children appear when the server side has taken the final ACKs,
	// which Dial does not wait for; the bound only limits a failure.
	waitFor(t, func() bool { return len(entries(t, s)) == 1+2*n }, "%d entries", 1+2*n)
	require.NoError(t, ln.Close())
	require.Len(t, entries(t, s), n, "the dialers' entries are left")
	for _, c := range conns {
		require.NoError(t, c.Close())
	}
	require.Empty(t, entries(t, s))
}

// waitFor polls cond without sleeping until it holds, failing after 10s.
func waitFor(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			require.FailNowf(t, "condition not met within 10s", format, args...)
		}
		runtime.Gosched()
	}
}

// TestFullMap: when the socket map is full, Control lets the dial go on
// unsignalled and PeerSignalled says why.
func TestFullMap(t *testing.T) {
	s := openSignaller(t)
	// Fill the map with fake cookies (real cookies count up from 1).
	keys := make([]uint64, maxSockets)
	vals := make([]sockState, maxSockets)
	for i := range keys {
		keys[i] = 1<<63 + uint64(i)
	}
	n, err := s.socks.BatchUpdate(keys, vals, nil)
	if errors.Is(err, ebpf.ErrNotSupported) {
		for _, k := range keys {
			require.NoError(t, s.socks.Put(k, sockState{}))
		}
		n = len(keys)
	} else {
		require.NoError(t, err)
	}
	require.Equal(t, maxSockets, n)

	ln := listen(t, nil)
	c := dial(t, s.Control, ln.Addr())
	_, err = s.PeerSignalled(c)
	require.ErrorIs(t, err, ErrNotTracked)
	require.ErrorContains(t, err, "full")
	require.EqualValues(t, 1, s.refused.Load())
}

// TestMPTCP: Control and SaveSYN refuse an MPTCP socket with advice.
// Go retries a dial or listen that failed on an MPTCP socket with plain
// TCP, so a caller that forgot SetMultipathTCP(false) still ends up with
// an opted-in TCP socket, at the cost of a socket thrown away.
func TestMPTCP(t *testing.T) {
	s := openSignaller(t)
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_MPTCP)
	if err != nil {
		t.Skipf("skipping: no MPTCP socket here (net.mptcp.enabled=0?): %v", err)
	}
	f := os.NewFile(uintptr(fd), "mptcp")
	defer f.Close()
	rc, err := f.SyscallConn()
	require.NoError(t, err)
	for name, ctl := range map[string]controlFunc{"Control": s.Control, "SaveSYN": SaveSYN} {
		err := ctl("tcp4", "127.0.0.1:0", rc)
		require.ErrorIs(t, err, ErrMPTCP, name)
		require.ErrorContains(t, err, "SetMultipathTCP(false)", name)
	}
	require.Empty(t, entries(t, s), "nothing entered for the MPTCP socket")

	var errs []error
	ctl := func(network, address string, c syscall.RawConn) error {
		err := s.Control(network, address, c)
		errs = append(errs, err)
		return err
	}
	lc := net.ListenConfig{Control: ctl}
	lc.SetMultipathTCP(true)
	ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	require.Len(t, errs, 2)
	require.ErrorIs(t, errs[0], ErrMPTCP)
	require.NoError(t, errs[1])

	errs = nil
	d := net.Dialer{Control: ctl}
	d.SetMultipathTCP(true)
	c, err := d.Dial("tcp4", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	require.Len(t, errs, 2)
	require.ErrorIs(t, errs[0], ErrMPTCP)
	require.NoError(t, errs[1])
	a, err := ln.Accept()
	require.NoError(t, err)
	defer a.Close()
	for what, x := range map[string]net.Conn{"dialer": c, "accepted": a} {
		got, err := s.PeerSignalled(x.(*net.TCPConn))
		requireAnswer(t, what, got, err, yes)
	}
}

// TestNotTCP: Control refuses other networks before touching the socket.
func TestNotTCP(t *testing.T) {
	s := openSignaller(t)
	for _, network := range []string{"udp", "udp4", "unix", "ip4:1"} {
		require.ErrorContains(t, s.Control(network, "", nil), "not TCP")
		require.ErrorContains(t, SaveSYN(network, "", nil), "not TCP")
	}
}

// fdCount counts the process's open file descriptors.
func fdCount(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// TestNoLeaks: Open, a connection, Forget and Close leave no goroutine and
// no file descriptor behind.
func TestNoLeaks(t *testing.T) {
	// A first round warms up what is opened once per process (cilium's
	// feature probes, the runtime's netpoller).
	round := func() {
		s, err := Open()
		if errors.Is(err, ErrNotPermitted) {
			t.Skipf("skipping: %v", err)
		}
		require.NoError(t, err)
		lc := net.ListenConfig{Control: s.Control}
		lc.SetMultipathTCP(false)
		ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
		require.NoError(t, err)
		d := net.Dialer{Control: s.Control}
		d.SetMultipathTCP(false)
		c, err := d.Dial("tcp4", ln.Addr().String())
		require.NoError(t, err)
		a, err := ln.Accept()
		require.NoError(t, err)
		got, err := s.PeerSignalled(a.(*net.TCPConn))
		require.NoError(t, err)
		require.True(t, got)
		s.Forget(c.(*net.TCPConn))
		require.NoError(t, c.Close())
		require.NoError(t, a.Close())
		require.NoError(t, ln.Close())
		require.NoError(t, s.Close())
	}
	round()
	fds, goroutines := fdCount(t), runtime.NumGoroutine()
	for range 3 {
		round()
	}
	require.Equal(t, fds, fdCount(t), "file descriptors")
	waitFor(t, func() bool { return runtime.NumGoroutine() <= goroutines }, "goroutines: %d, had %d", runtime.NumGoroutine(), goroutines)
}

// TestIPv6: the same over ::1, when the host has it.
func TestIPv6(t *testing.T) {
	if !haveIPv6Loopback() {
		t.Skip("skipping: no ::1 here")
	}
	s := openSignaller(t)
	ln := listenOn(t, "tcp6", "[::1]:0", s.Control)
	c := dial(t, s.Control, ln.Addr())
	a := accept(t, ln)
	for what, x := range map[string]*net.TCPConn{"dialer": c, "accepted": a} {
		got, err := s.PeerSignalled(x)
		requireAnswer(t, what, got, err, yes)
	}
	// The Signaller's listener saves SYNs: SYNHasOption sees the option
	// in the IPv6 SYN, and PeerSignalled did not use it up.
	got, err := SYNHasOption(a)
	require.NoError(t, err)
	require.True(t, got)
}

func haveIPv6Loopback() bool {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// TestExitDetaches: a process killed without Close leaves nothing
// attached: the bpf_links go with its file descriptors.
func TestExitDetaches(t *testing.T) {
	if os.Getenv("TCPOPT_TEST_CHILD") == "1" {
		s, err := Open()
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		for _, id := range progIDs(t, s) {
			fmt.Println(id)
		}
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin) // until killed
		os.Exit(0)
	}
	needRoot(t)
	_ = openSignaller(t) // skips when not permitted
	cgroup, err := ownCgroup()
	require.NoError(t, err)

	cmd := exec.Command(os.Args[0], "-test.run=^TestExitDetaches$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TCPOPT_TEST_CHILD=1")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()

	var ids []ebpf.ProgramID
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && sc.Text() != "ready" {
		id, err := strconv.ParseUint(sc.Text(), 10, 32)
		require.NoError(t, err, "child said %q", sc.Text())
		ids = append(ids, ebpf.ProgramID(id))
	}
	require.Len(t, ids, 2)
	for _, id := range ids {
		require.Contains(t, attached(t, cgroup), id)
	}

	require.NoError(t, cmd.Process.Kill()) // SIGKILL: no Close, no deferred calls
	_ = cmd.Wait()
	killed = true
	for _, id := range ids {
		require.NotContains(t, attached(t, cgroup), id)
	}
}

// TestCapabilities: Open needs CAP_BPF and CAP_NET_ADMIN (CAP_SYS_ADMIN
// stands in for either), and without them fails with ErrNotPermitted and
// says what to do. Capabilities are per thread: each case drops them on
// a thread of its own, which dies with its goroutine (it never unlocks),
// so the rest of the process keeps them.
func TestCapabilities(t *testing.T) {
	needRoot(t)
	cases := []struct {
		name string
		drop []uint
		ok   bool
	}{
		{"CAP_BPF and CAP_NET_ADMIN suffice", []uint{unix.CAP_SYS_ADMIN, unix.CAP_PERFMON}, true},
		{"no CAP_BPF", []uint{unix.CAP_SYS_ADMIN, unix.CAP_BPF}, false},
		{"no CAP_NET_ADMIN", []uint{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN}, false},
		{"none", []uint{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_BPF, unix.CAP_PERFMON}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
				hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
				var data [2]unix.CapUserData
				if err := unix.Capget(&hdr, &data[0]); err != nil {
					done <- err
					return
				}
				for _, c := range tc.drop {
					data[c/32].Effective &^= 1 << (c % 32)
				}
				if err := unix.Capset(&hdr, &data[0]); err != nil {
					done <- err
					return
				}
				s, err := Open()
				if err == nil {
					err = s.Close()
				}
				done <- err
			}()
			err := <-done
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrNotPermitted)
			require.ErrorContains(t, err, "run as root")
		})
	}
}
