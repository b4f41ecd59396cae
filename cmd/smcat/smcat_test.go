package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/tcptest"
	"github.com/goroce/goroce/pcap"
	"github.com/goroce/goroce/smcr"
)

// hostPair returns two loopback addresses of the test's own: a random
// 127.N.M.0/24, so that tests, and the same tests in other processes,
// do not share goroce devices (UDP port 4791 on each address).
func hostPair(t *testing.T) (server, client netip.Addr) {
	t.Helper()
	n := mrand.IntN(100*256) + 1
	b := [4]byte{127, byte(100 + n/256), byte(n % 256), 1}
	server = netip.AddrFrom4(b)
	b[3] = 2
	return server, netip.AddrFrom4(b)
}

// waitWait bounds every wait for an instance: a hang guard, not a timing
// assertion.
const waitWait = 60 * time.Second

// watchBuffer is a concurrency-safe buffer that can wait for a pattern.
type watchBuffer struct {
	mu  sync.Mutex
	b   bytes.Buffer
	grw chan struct{} // closed and replaced on every write
}

func newWatchBuffer() *watchBuffer { return &watchBuffer{grw: make(chan struct{})} }

func (w *watchBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.grw)
	w.grw = make(chan struct{})
	return w.b.Write(p)
}

func (w *watchBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// waitMatch waits until re matches, and returns the submatches.
func (w *watchBuffer) waitMatch(t *testing.T, re *regexp.Regexp, done <-chan int) []string {
	t.Helper()
	deadline := time.After(waitWait)
	for {
		w.mu.Lock()
		m := re.FindStringSubmatch(w.b.String())
		ch := w.grw
		w.mu.Unlock()
		if m != nil {
			return m
		}
		select {
		case <-ch:
		case code := <-done:
			t.Fatalf("exited (%d) before printing %v:\n%s", code, re, w.String())
		case <-deadline:
			t.Fatalf("no %v in %v:\n%s", re, waitWait, w.String())
		}
	}
}

// waitLen waits until n bytes were written.
func (w *watchBuffer) waitLen(t *testing.T, n int, done <-chan int) {
	t.Helper()
	deadline := time.After(waitWait)
	for {
		w.mu.Lock()
		got, ch := w.b.Len(), w.grw
		w.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case code := <-done:
			t.Fatalf("exited (%d) after %d of %d bytes", code, got, n)
		case <-deadline:
			t.Fatalf("%d of %d bytes in %v", got, n, waitWait)
		}
	}
}

// instance is smcat run in this process.
type instance struct {
	stdout, stderr *watchBuffer
	done           chan int
	code           int
	stdinW         *io.PipeWriter // nil when stdin was given
}

// start runs smcat with args; stdin nil gives it a pipe to write to.
func start(t *testing.T, ctx context.Context, stdin io.Reader, args ...string) *instance {
	t.Helper()
	in := &instance{stdout: newWatchBuffer(), stderr: newWatchBuffer(), done: make(chan int, 1)}
	if stdin == nil {
		r, w := io.Pipe()
		stdin, in.stdinW = r, w
	}
	go func() { in.done <- run(ctx, args, stdin, in.stdout, in.stderr) }()
	return in
}

// wait returns the exit status.
func (in *instance) wait(t *testing.T) int {
	t.Helper()
	select {
	case in.code = <-in.done:
		in.done <- in.code // for a second wait
		return in.code
	case <-time.After(waitWait):
		t.Fatalf("smcat did not exit in %v:\n%s", waitWait, in.stderr.String())
	}
	return -1
}

var listenRE = regexp.MustCompile(`listening on [0-9.]+:([0-9]+)`)

// listen starts a server and returns it with its port.
func listen(t *testing.T, ctx context.Context, stdin io.Reader, args ...string) (*instance, string) {
	t.Helper()
	srv := start(t, ctx, stdin, args...)
	m := srv.stderr.waitMatch(t, listenRE, srv.done)
	return srv, m[1]
}

// unprivileged are the flags every test passes: SMC without the TCP
// option, so that the tests run without root too.
var unprivileged = []string{"-peer-speaks-smc", "-ueid", "GOROCE-SMCAT-TEST", "--linger", "50ms"}

func args(extra ...string) []string { return append(append([]string(nil), unprivileged...), extra...) }

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

func setRunDir(t *testing.T) string {
	dir := t.TempDir()
	t.Setenv("GOROCE_RUN_DIR", dir)
	return dir
}

// An echo server with -k -n serves connections at once and exits after
// them; every client gets back exactly what it sent, at sizes around the
// 64 KiB RMB, and says SMC-R v2 with its link.
func TestEchoOverSMCR(t *testing.T) {
	setRunDir(t)
	ctx := context.Background()
	sa, ca := hostPair(t)
	sizes := []int{0, 1, 64<<10 - 1, 64 << 10, 64<<10 + 1, 3 << 20}
	srv, port := listen(t, ctx, nil, args("-v", "-l", "-k", "--echo", "-n", fmt.Sprint(len(sizes)), sa.String(), "0")...)
	var wg sync.WaitGroup
	for i, size := range sizes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := randomBytes(t, size)
			cli := start(t, ctx, bytes.NewReader(data), args("-v", "-s", ca.String(), sa.String(), port)...)
			if !assert.Equal(t, 0, cli.wait(t), "client %d: %s", i, cli.stderr) {
				return
			}
			assert.True(t, bytes.Equal(data, []byte(cli.stdout.String())), "client %d (%d bytes): the echo differs", i, size)
			assert.Contains(t, cli.stderr.String(), "SMC-R v2 (unprivileged: no TCP option, -peer-speaks-smc)")
			assert.Regexp(t, `link 1: GID `+regexp.QuoteMeta(ca.String())+` QPN 0x[0-9a-f]+ <-> peer GID `+regexp.QuoteMeta(sa.String()), cli.stderr.String())
			assert.Contains(t, cli.stderr.String(), fmt.Sprintf("ended (shut): %d bytes sent, %d received", size, size))
		}()
	}
	wg.Wait()
	require.Equal(t, 0, srv.wait(t), srv.stderr.String())
	assert.Equal(t, len(sizes), strings.Count(srv.stderr.String(), "connection from "))
	assert.Contains(t, srv.stderr.String(), "link groups ended")
}

// With two devices on each side (-dev), the server adds a second link
// after the first contact: -v says each link as it comes, both sides list
// two links of a symmetric group, and the echo is intact.
func TestTwoDevices(t *testing.T) {
	setRunDir(t)
	ctx := context.Background()
	sa, ca := hostPair(t)
	sa2, ca2 := sa.Next().Next(), ca.Next().Next()
	srv, port := listen(t, ctx, nil, args("-v", "-l", "--echo", "-dev", sa.String(), "-dev", sa2.String(), sa.String(), "0")...)
	data := randomBytes(t, 1<<20)
	cli := start(t, ctx, bytes.NewReader(data), args("-v", "-s", ca.String(), "-dev", ca.String(), "-dev", ca2.String(), sa.String(), port)...)
	require.Equal(t, 0, cli.wait(t), cli.stderr.String())
	require.True(t, bytes.Equal(data, []byte(cli.stdout.String())), "the echo differs")
	require.Equal(t, 0, srv.wait(t), srv.stderr.String())
	for _, side := range []string{srv.stderr.String(), cli.stderr.String()} {
		assert.Regexp(t, `link group 0x[0-9a-f]+ \((client|server), SINGLE\): link 1 up`, side)
		assert.Regexp(t, `link group 0x[0-9a-f]+ \((client|server), SYMMETRIC\): link 2 up`, side)
	}
	assert.Regexp(t, `link 2: GID `+regexp.QuoteMeta(ca2.String())+` QPN 0x[0-9a-f]+ <-> peer GID `+regexp.QuoteMeta(sa2.String()), cli.stderr.String())
}

// Without --echo a listener and a client are two netcats: each one's
// stdin comes out of the other's stdout, and both exit when both are done.
func TestStdioBothWays(t *testing.T) {
	setRunDir(t)
	ctx := context.Background()
	sa, ca := hostPair(t)
	toClient, toServer := randomBytes(t, 200000), randomBytes(t, 300000)
	srv, port := listen(t, ctx, bytes.NewReader(toClient), args("-v", "-l", sa.String(), "0")...)
	cli := start(t, ctx, bytes.NewReader(toServer), args("-s", ca.String(), sa.String(), port)...)
	require.Equal(t, 0, cli.wait(t), cli.stderr.String())
	require.Equal(t, 0, srv.wait(t), srv.stderr.String())
	assert.True(t, bytes.Equal(toClient, []byte(cli.stdout.String())), "the server's stdin reached the client")
	assert.True(t, bytes.Equal(toServer, []byte(srv.stdout.String())), "the client's stdin reached the server")
}

// A plain TCP client of an unprivileged server (-peer-speaks-smc: its
// clients are taken to speak SMC) whose first bytes are no CLC is closed,
// as Linux closes a peer that signalled SMC and does not speak it: nothing
// is echoed, and the server goes on to serve an SMC client.
func TestPlainTCPClientRefused(t *testing.T) {
	setRunDir(t)
	ctx := context.Background()
	sa, ca := hostPair(t)
	srv, port := listen(t, ctx, nil, args("-v", "-l", "--echo", sa.String(), "0")...)
	c, err := net.DialTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(ca, 0)),
		net.TCPAddrFromAddrPort(netip.AddrPortFrom(sa, mustPort(t, port))))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(waitWait))) // hang guard
	got, err := io.ReadAll(c)
	require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the server did not close the connection")
	assert.Empty(t, got, "nothing echoed")

	data := randomBytes(t, 1000)
	cli := start(t, ctx, bytes.NewReader(data), args("-s", ca.String(), sa.String(), port)...)
	require.Equal(t, 0, cli.wait(t), cli.stderr.String())
	assert.Equal(t, data, []byte(cli.stdout.String()))
	require.Equal(t, 0, srv.wait(t), srv.stderr.String())
	assert.Equal(t, 1, strings.Count(srv.stderr.String(), "connection from "), "only the SMC client was handed out")
}

// An unprivileged client (-peer-speaks-smc) of a plain TCP server that
// answers the Proposal (an HTTP server's 400, or a few bytes and then
// silence) fails, and says that the peer does not speak SMC and what to
// do (that it fails at once, not after the CLC timeout, smcr's
// TestNonCLCReplyEndsTheDialAtOnce shows).
func TestPeerNotSMC(t *testing.T) {
	setRunDir(t)
	for _, answer := range []string{"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", "400\r\n"} {
		t.Run(fmt.Sprintf("%q", answer), func(t *testing.T) {
			sa, ca := hostPair(t)
			ln := tcptest.Server(t, sa, func(c net.Conn) {
				c.Read(make([]byte, 64))
				c.Write([]byte(answer))
				io.Copy(io.Discard, c) // and wait, as a server that wants a request does
			})
			host, port, _ := net.SplitHostPort(ln.Addr().String())
			cli := start(t, context.Background(), strings.NewReader("x"), args("-s", ca.String(), host, port)...)
			assert.Equal(t, exitConn, cli.wait(t))
			assert.Contains(t, cli.stderr.String(), "the peer does not speak SMC")
			assert.Contains(t, cli.stderr.String(), "run smcat as root without it")
		})
	}
}

// Without -peer-speaks-smc smcat signals SMC with the TCP option: as root
// (with BPF) a plain TCP server makes it fall back, and -v says so;
// otherwise it refuses to start and names the flag.
func TestTCPOptionOrFlag(t *testing.T) {
	setRunDir(t)
	sa, ca := hostPair(t)
	ln := tcptest.Server(t, sa, func(c net.Conn) { io.Copy(c, c) })
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	cli := start(t, context.Background(), strings.NewReader("plain"), "-v", "-s", ca.String(), host, port)
	code := cli.wait(t)
	t.Logf("exit %d", code)
	switch code {
	case exitOK:
		assert.Equal(t, "plain", cli.stdout.String())
		assert.Contains(t, cli.stderr.String(), "TCP fallback, reason 0x03010000 (peer did not indicate SMC), decided by this side (SMC signalled by the TCP option)")
		assert.Contains(t, cli.stderr.String(), "the peer's handshake carried no SMC option")
	case exitSetup:
		assert.Contains(t, cli.stderr.String(), "smcat: cannot send the SMC TCP option")
		assert.Contains(t, cli.stderr.String(), "pass -peer-speaks-smc on both sides")
	default:
		t.Fatalf("exit %d: %s", code, cli.stderr)
	}
}

func mustPort(t *testing.T, s string) uint16 {
	var p uint16
	_, err := fmt.Sscan(s, &p)
	require.NoError(t, err)
	return p
}

// --end close and abort: the client closes at stdin's EOF without waiting
// for the echo; --end abort on an echo server reads one byte and closes
// with the rest unread. A side told to expect the peer's abort
// (--peer-abort) exits 0; one not told fails with 1: an aborted connection
// is a failed one.
func TestEnds(t *testing.T) {
	setRunDir(t)
	ctx := context.Background()
	tests := []struct {
		name             string
		srvEnd           string
		srvArgs          []string
		cliArgs          []string
		data             int
		wantEchoFull     bool
		srvExit, cliExit int
	}{
		{"client shuts down", "shut", nil, nil, 100000, true, 0, 0},
		{"client closes", "shut", []string{"--peer-abort"}, []string{"--end", "close"}, 1000, false, 0, 0},
		{"client aborts", "shut", []string{"--peer-abort"}, []string{"--end", "abort"}, 100000, false, 0, 0},
		{"client aborts unexpectedly", "shut", nil, []string{"--end", "abort"}, 100000, false, exitConn, 0},
		{"server closes", "close", nil, nil, 100000, true, 0, 0},
		{"server aborts", "abort", nil, []string{"--peer-abort"}, 200000, false, 0, 0},
		{"server aborts unexpectedly", "abort", nil, nil, 200000, false, 0, exitConn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sa, ca := hostPair(t)
			srv, port := listen(t, ctx, nil, args(append(tt.srvArgs, "-v", "-l", "--echo", "--end", tt.srvEnd, sa.String(), "0")...)...)
			data := randomBytes(t, tt.data)
			cli := start(t, ctx, bytes.NewReader(data), args(append(tt.cliArgs, "-v", "-s", ca.String(), sa.String(), port)...)...)
			require.Equal(t, tt.cliExit, cli.wait(t), cli.stderr.String())
			require.Equal(t, tt.srvExit, srv.wait(t), srv.stderr.String())
			if tt.srvExit != 0 {
				assert.Contains(t, srv.stderr.String(), "connection reset: the peer aborted it")
			}
			if tt.cliExit != 0 {
				assert.Contains(t, cli.stderr.String(), "connection reset: the peer aborted it")
			}
			got := []byte(cli.stdout.String())
			if tt.wantEchoFull {
				assert.True(t, bytes.Equal(data, got), "the whole echo")
			} else {
				assert.True(t, bytes.HasPrefix(data, got), "a prefix of the echo (%d of %d bytes)", len(got), len(data))
			}
		})
	}
}

// -P with -pattern: the connections share one link group, each checks its
// own echo, and each has its line on stdout, for every way to end.
func TestPattern(t *testing.T) {
	setRunDir(t)
	ctx := context.Background()
	tests := []struct {
		end, srvEnd string
		extra       []string
		want        string // per connection line, after "conn N: "
	}{
		{"shut", "shut", nil, "300000 bytes sent, 300000 echoed and checked, ended (shut)"},
		{"close", "shut", nil, "300000 bytes sent, 300000 echoed and checked, ended (close)"},
		{"shut", "abort", []string{"--peer-abort"}, "the peer aborted as expected"},
	}
	for _, tt := range tests {
		t.Run(tt.end+"/"+tt.srvEnd, func(t *testing.T) {
			sa, ca := hostPair(t)
			srv, port := listen(t, ctx, nil, args("-v", "-l", "-k", "-n", "4", "--echo", "--end", tt.srvEnd, sa.String(), "0")...)
			cli := start(t, ctx, strings.NewReader(""), args(append(tt.extra, "-v", "-P", "4", "-pattern", "300000", "--end", tt.end, "-s", ca.String(), sa.String(), port)...)...)
			require.Equal(t, 0, cli.wait(t), "%s\n%s", cli.stdout, cli.stderr)
			require.Equal(t, 0, srv.wait(t), srv.stderr.String())
			for i := range 4 {
				assert.Regexp(t, fmt.Sprintf(`(?m)^conn %d: .*%s`, i, regexp.QuoteMeta(tt.want)), cli.stdout.String())
			}
			// One link group: the first connection's contact is the only first one.
			assert.Equal(t, 1, strings.Count(srv.stderr.String(), "first contact"), srv.stderr.String())
		})
	}
	// A peer that is not an echo: the first differing byte is named.
	sa, ca := hostPair(t)
	srv, port := listen(t, ctx, strings.NewReader("not the pattern"), args("-v", "-l", sa.String(), "0")...)
	cli := start(t, ctx, strings.NewReader(""), args("-pattern", "1000", "-s", ca.String(), sa.String(), port)...)
	assert.Equal(t, exitConn, cli.wait(t))
	// How much was sent when the mismatch closed the connection depends
	// on which of the client's reader and sender ran first.
	assert.Regexp(t, `^conn 0: [0-9]+ bytes sent, 0 echoed and checked, the echo differs at byte 0\n$`, cli.stdout.String())
	srv.wait(t)
}

// A client that closes (--end close) only after its whole echo is back
// closes without unread data: the peer sees an orderly close, no abort.
func TestCloseAfterEcho(t *testing.T) {
	setRunDir(t)
	ctx := context.Background()
	for _, size := range []int{1, 1025, 66561} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			sa, ca := hostPair(t)
			srv, port := listen(t, ctx, nil, args("-v", "-l", "--echo", sa.String(), "0")...)
			data := randomBytes(t, size)
			cli := start(t, ctx, nil, args("-v", "--end", "close", "-s", ca.String(), sa.String(), port)...)
			_, err := cli.stdinW.Write(data)
			require.NoError(t, err)
			cli.stdout.waitLen(t, size, cli.done)
			cli.stdinW.Close()
			require.Equal(t, 0, cli.wait(t), cli.stderr.String())
			require.Equal(t, 0, srv.wait(t), srv.stderr.String())
			assert.Contains(t, cli.stderr.String(), fmt.Sprintf("ended (close): %d bytes sent, %d received", size, size))
			assert.True(t, bytes.Equal(data, []byte(cli.stdout.String())), "the whole echo")
		})
	}
}

// A client whose peer aborts without --peer-abort fails with exit 1 and
// says so.
func TestReportReset(t *testing.T) {
	var b bytes.Buffer
	log := &logger{Prog: "smcat", W: &b}
	sa, ca := hostPair(t)
	c := fakeConn(t, sa, ca)
	assert.Equal(t, exitConn, report(result{reset: true, sent: 5}, c, &options{}, log))
	assert.Contains(t, b.String(), "connection reset: the peer aborted it (5 bytes sent, 0 received)")
	b.Reset()
	assert.Equal(t, exitOK, report(result{reset: true}, c, &options{peerAbort: true}, log))
	assert.Empty(t, b.String(), "quiet without -v")
}

// fakeConn is a fallback smcr.Conn over a loopback TCP connection.
func fakeConn(t *testing.T, sa, ca netip.Addr) *smcr.Conn {
	ln, err := net.Listen("tcp", netip.AddrPortFrom(sa, 0).String())
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			t.Cleanup(func() { c.Close() })
		}
	}()
	d := smcr.Dialer{Config: smcr.Config{Signalling: smcr.SignalConfigured}, LocalAddr: ca}
	nc, err := d.DialContext(context.Background(), "tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return nc.(*smcr.Conn)
}

// -capture records the device's packets: a valid pcapng with the LLC and
// CDC messages and the WRITEs.
func TestCapture(t *testing.T) {
	setRunDir(t)
	ctx := context.Background()
	sa, ca := hostPair(t)
	file := t.TempDir() + "/smc.pcapng"
	srv, port := listen(t, ctx, nil, args("-v", "-l", "--echo", sa.String(), "0")...)
	cli := start(t, ctx, strings.NewReader("hello over SMC-R"), args("-capture", file, "-s", ca.String(), sa.String(), port)...)
	require.Equal(t, 0, cli.wait(t), cli.stderr.String())
	require.Equal(t, 0, srv.wait(t), srv.stderr.String())
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	r, err := pcap.NewReader(f)
	require.NoError(t, err)
	n := 0
	for {
		if _, err := r.Next(); err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
		n++
	}
	// CONFIRM_LINK and its response, a WRITE and CDC each way, the close
	// CDCs, DELETE_RKEY / DELETE_LINK, and the ACKs: well over 10.
	assert.Greater(t, n, 10, "packets in the capture")
}

// A signal (ctx) stops a listener with no connection: exit status 0 is
// not claimed, the listener closes.
func TestStopListening(t *testing.T) {
	setRunDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	sa, _ := hostPair(t)
	srv, _ := listen(t, ctx, nil, args("-v", "-l", "-k", sa.String(), "0")...)
	cancel()
	assert.Equal(t, 0, srv.wait(t), "a stopped listener that served nobody failed nothing: %s", srv.stderr)
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "want ADDR and PORT, got 0 operand(s)"},
		{[]string{"127.0.0.1"}, "want ADDR and PORT, got 1"},
		{[]string{"127.0.0.1", "80", "x"}, "got 3"},
		{[]string{"127.0.0.1", "0"}, `bad port "0"`},
		{[]string{"127.0.0.1", "http"}, `bad port "http"`},
		{[]string{"-k", "127.0.0.1", "80"}, "-k, --echo and -n go with -l"},
		{[]string{"--echo", "127.0.0.1", "80"}, "-k, --echo and -n go with -l"},
		{[]string{"-l", "-s", "127.0.0.2", "127.0.0.1", "80"}, "-s goes with dialing"},
		{[]string{"-s", "localhost", "127.0.0.1", "80"}, "not an IP address"},
		{[]string{"--end", "reset", "127.0.0.1", "80"}, "want shut, close or abort"},
		{[]string{"-l", "-n", "-1", "127.0.0.1", "80"}, "want a count"},
		{[]string{"-x", "127.0.0.1", "80"}, "flag provided but not defined: -x"},
		{[]string{"--linger", "-1s", "127.0.0.1", "80"}, "must not be negative"},
		{[]string{"-testlink", "-1s", "127.0.0.1", "80"}, "must not be negative"},
		{[]string{"-P", "2", "127.0.0.1", "80"}, "-P 2 needs -pattern"},
		{[]string{"-P", "0", "-pattern", "10", "127.0.0.1", "80"}, "want 1 to 255 connections"},
		{[]string{"-pattern", "-5", "127.0.0.1", "80"}, "want a byte count"},
		{[]string{"-backend", "shmem", "127.0.0.1", "80"}, "want udp, afpacket, shm or auto"},
		{[]string{"-i", "eth0", "127.0.0.1", "80"}, "-i goes with -backend afpacket"},
		{[]string{"-l", "-pattern", "5", "127.0.0.1", "80"}, "-P and -pattern go with dialing"},
		{[]string{"-dev", "0.0.0.0", "127.0.0.1", "80"}, "a device needs a specific address"},
		{[]string{"-dev", "127.0.0.3", "-dev", "127.0.0.3", "127.0.0.1", "80"}, "-dev 127.0.0.3 given twice"},
		{[]string{"-dev", "eth0", "127.0.0.1", "80"}, "not an IP address"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tt.args, strings.NewReader(""), &out, &errOut)
			assert.Equal(t, exitSetup, code)
			assert.Contains(t, errOut.String(), tt.want)
			assert.Empty(t, out.String())
		})
	}
	var out bytes.Buffer
	assert.Equal(t, 0, run(context.Background(), []string{"-h"}, nil, &out, io.Discard))
	assert.Contains(t, out.String(), "usage: smcat")
}

// Flags and operands in any order, clusters of boolean flags, "--".
func TestParseArgs(t *testing.T) {
	tests := []struct {
		args []string
		want options
	}{
		{[]string{"-lkv", "127.0.0.1", "5000"}, options{parallel: 1, backend: "udp", listen: true, keep: true, verbose: true, end: "shut", linger: defaultLinger, addr: "127.0.0.1", port: "5000"}},
		{[]string{"127.0.0.1", "-l", "5000", "--echo"}, options{parallel: 1, backend: "udp", listen: true, echo: true, conns: 1, end: "shut", linger: defaultLinger, addr: "127.0.0.1", port: "5000"}},
		{[]string{"-v", "-ueid", "A", "-ueid", "B", "-s", "::ffff:127.0.0.2", "--linger", "0", "127.0.0.1", "5000"},
			options{parallel: 1, backend: "udp", verbose: true, ueids: []string{"A", "B"}, src: netip.MustParseAddr("127.0.0.2"), end: "shut", addr: "127.0.0.1", port: "5000"}},
		{[]string{"-v", "-ueid", "GOROCE-INTEROP-UEID", "-l", "-k", "--echo", "-n", "8", "198.18.0.1", "20000"},
			options{parallel: 1, backend: "udp", verbose: true, ueids: []string{"GOROCE-INTEROP-UEID"}, listen: true, keep: true, echo: true, conns: 8, end: "shut", linger: defaultLinger, addr: "198.18.0.1", port: "20000"}},
		{[]string{"-v", "-ueid", "U", "--linger", "3s", "-s", "198.18.0.1", "--end", "abort", "198.18.0.11", "20000"},
			options{parallel: 1, backend: "udp", verbose: true, ueids: []string{"U"}, linger: 3 * time.Second, src: netip.MustParseAddr("198.18.0.1"), end: "abort", addr: "198.18.0.11", port: "20000"}},
		{[]string{"-testlink", "2s", "-l", "198.18.0.1", "20000"},
			options{parallel: 1, backend: "udp", testLink: 2 * time.Second, listen: true, conns: 1, end: "shut", linger: defaultLinger, addr: "198.18.0.1", port: "20000"}},
		{[]string{"-l", "--", "127.0.0.1", "5000"}, options{parallel: 1, backend: "udp", listen: true, conns: 1, end: "shut", linger: defaultLinger, addr: "127.0.0.1", port: "5000"}},
		{[]string{"-dev", "198.18.0.2", "-s", "198.18.0.1", "-dev", "198.18.0.3", "198.18.0.11", "20000"},
			options{parallel: 1, backend: "udp", src: netip.MustParseAddr("198.18.0.1"), devs: []netip.Addr{netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("198.18.0.3")},
				end: "shut", linger: defaultLinger, addr: "198.18.0.11", port: "20000"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := parseArgs(tt.args)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
