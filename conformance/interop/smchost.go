//go:build linux

package main

// goroce's SMC-R side of the SMC cases is smcat (cmd/smcat): `smcat -l
// -k --echo -n N ADDR PORT` is the echo server; `smcat -s SRCADDR ADDR
// PORT` is one client connection, stdin → connection → stdout, fed and
// checked by the harness; `smcat -P N -pattern BYTES -s SRCADDR ADDR PORT`
// is N clients at once in one process (one device per address, so one
// link group), each sending smcat's own generated stream and checking the
// echo itself, with a line per connection on stdout (parsed by
// parsePatternLines). -v prints the mode on stderr, -ueid NAME offers
// SMC-Rv2, --end shut|close|abort says how a connection ends (a client at
// stdin's EOF, an echo server at the peer's EOF), --peer-abort accepts
// the peer's abort, --linger D is the link group's linger once it has no
// connections (the kernel's is fixed at 10 minutes). A listener prints a
// line containing smcatListenLine once it listens. Until bin/smcat exists
// every case that needs it is skipped ("host SMC-R not built yet").

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	smcatProg       = "smcat"
	smcatListenLine = "listening"
	relayProg       = "smc-relay"
	relayListenLine = "relaying"
)

// smcatCommand returns goroce's command line for the case: its echo
// server (one process for every connection) when goroce serves, else its
// client (one process per connection; the harness writes the data to its
// stdin and checks what comes back on its stdout).
func smcatCommand(c *testCase, e endpoints, port int) []string {
	s := c.smc
	a := append([]string{smcatProg, "-v", "-ueid", InteropUEID}, c.backendArgs(e)...)
	if s.failover {
		// The first device carries the first link, the one cut. A Linux
		// whose links share its one device cannot move them when it finds
		// one dead itself (it ends the group): goroce must find out first,
		// from a send, and TEST_LINK an idle link soon (the kernel after
		// 30 s).
		a = append(a, "-dev", failoverAddr, "-dev", e.goroceAddr, "-testlink", failoverTestLink.String())
	}
	if s.lgrEnd {
		a = append(a, "--linger", smcLinger.String())
	}
	if c.server == goroceServer {
		a = append(a, "-l", "-k", "--echo", "-n", strconv.Itoa(s.conns))
		if s.serverEnd != endShut {
			a = append(a, "--end", s.serverEnd)
		}
		if s.clientEnd != endShut {
			// The kernel's close with the echo unread is an abort.
			a = append(a, "--peer-abort")
		}
		return append(a, e.goroceAddr, strconv.Itoa(port))
	}
	a = append(a, "-s", e.goroceAddr)
	if s.clientEnd != endShut {
		a = append(a, "--end", s.clientEnd)
	}
	if s.serverEnd == endAbort {
		a = append(a, "--peer-abort")
	}
	if s.parallel {
		var total int
		for _, z := range s.sizes {
			total += z
		}
		a = append(a, "-P", strconv.Itoa(s.conns), "-pattern", strconv.Itoa(total))
	}
	return append(a, e.peerAddr, strconv.Itoa(port))
}

// hostSMCBuilt reports whether goroce's SMC-R program is there.
func (h *harness) hostSMCBuilt() bool {
	_, err := os.Stat(filepath.Join(h.opts.bin, smcatProg))
	return err == nil
}

// hostConn is what one host-side client connection did.
type hostConn struct {
	rc       int
	sent     int64
	echoed   int64 // bytes back that matched what was sent
	mismatch string
	out      string // the program's stderr
}

// echoStream is the data of host-side connection conn: a seeded stream,
// the same for the writer and the checker.
func echoStream(conn int) *rand.ChaCha8 {
	var seed [32]byte
	copy(seed[:], fmt.Sprintf("goroce-interop-smc-conn-%d", conn))
	return rand.NewChaCha8(seed)
}

// driveClient runs one host-side client program (cmd, not yet started):
// it writes sum(sizes) bytes of the connection's stream to its stdin,
// keeps the connection idle for idle, closes stdin (with waitEcho, only
// once the whole echo is back: smcat's --end close closes the connection
// at stdin's EOF, and what was still on its way would be lost), and checks
// what comes back on stdout against the stream, until the program exits
// or the deadline passes (then it is stopped). With hold, the writer
// stops at its points while hold does what it does there.
func driveClient(ctx context.Context, start func(*exec.Cmd) (*proc, error), cmd *exec.Cmd, conn int, sizes []int, idle time.Duration, waitEcho bool, hold *streamHold, deadline time.Time) hostConn {
	r := hostConn{rc: -1}
	// Pipes of our own, not cmd's: procs waits for the program at once,
	// and Wait closes the pipes it made, maybe before all is read.
	inR, stdin, err := os.Pipe()
	if err != nil {
		r.mismatch = err.Error()
		return r
	}
	stdout, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		stdin.Close()
		r.mismatch = err.Error()
		return r
	}
	defer stdout.Close()
	var stderr lockedBuffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, &stderr
	p, err := start(cmd)
	inR.Close()
	outW.Close()
	if err != nil {
		stdin.Close()
		r.mismatch = err.Error()
		return r
	}
	var total int64
	for _, s := range sizes {
		total += int64(s)
	}
	echoedAll := make(chan struct{}) // closed by the checker once the whole echo is back
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the writer
		defer wg.Done()
		defer stdin.Close()
		src := echoStream(conn)
		buf := make([]byte, 64<<10)
		for next := 0; ; {
			for hold != nil && next < len(hold.at) && hold.at[next] == r.sent {
				hold.do(next, stderr.String)
				next++
			}
			if r.sent >= total {
				break
			}
			n := hold.until(next, r.sent, int(min(int64(len(buf)), total-r.sent)))
			src.Read(buf[:n])
			if _, err := stdin.Write(buf[:n]); err != nil {
				return // the program exited: its status says why
			}
			r.sent += int64(n)
		}
		// An idle connection, for the link's keepalive (TEST_LINK).
		select {
		case <-time.After(idle):
		case <-ctx.Done():
		}
		if waitEcho {
			select {
			case <-echoedAll:
			case <-p.done:
			case <-ctx.Done():
			}
		}
	}()
	checked := make(chan struct{})
	go func() { // the checker
		defer close(checked)
		want := echoStream(conn)
		rd := bufio.NewReaderSize(stdout, 64<<10)
		got := make([]byte, 64<<10)
		exp := make([]byte, 64<<10)
		for {
			n, err := rd.Read(got)
			if n > 0 {
				want.Read(exp[:n])
				for i := range n {
					if got[i] != exp[i] && r.mismatch == "" {
						r.mismatch = fmt.Sprintf("echo differs at byte %d: got 0x%02x, want 0x%02x", r.echoed+int64(i), got[i], exp[i])
					}
				}
				if r.mismatch == "" {
					r.echoed += int64(n)
					if r.echoed == total {
						close(echoedAll)
					}
				}
			}
			if err != nil {
				return
			}
		}
	}()
	timedOut := false
	select {
	case <-p.done:
	case <-time.After(time.Until(deadline)):
		timedOut = true
		p.stop(3 * time.Second)
	case <-ctx.Done():
		p.stop(3 * time.Second)
	}
	<-p.done
	<-checked
	wg.Wait()
	if timedOut && r.mismatch == "" {
		r.mismatch = fmt.Sprintf("still running at the case's time limit: stopped (%d of %d bytes sent, %d echoed)", r.sent, total, r.echoed)
	}
	r.rc = p.exitCode()
	r.out = stderr.String()
	return r
}

// lockedBuffer collects a program's output from its copying goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitListen waits until the host-side server prints its listen line.
func waitListen(ctx context.Context, p *proc, out *lockedBuffer, d time.Duration) error {
	deadline := time.Now().Add(d)
	for !strings.Contains(out.String(), smcatListenLine) {
		if p.exited() {
			return fmt.Errorf("exited (status %d) before printing %q: %s", p.exitCode(), smcatListenLine, tail(out.String(), 5))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("printed no %q in %v", smcatListenLine, d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// relayCommands are the relay case's host side: smc-relay on goroce's
// address, relaying each of the kernel client's SMC-R connections to a
// plain TCP echo server (smcguest server -tcp, on port+1 of the same
// address), which sees only TCP.
func relayCommands(c *testCase, e endpoints, port int) (relay, server []string) {
	s := c.smc
	n := strconv.Itoa(s.conns)
	// A short linger: the relay ends its link group (DELETE_LINK) and exits
	// soon after its last connection, as the harness expects a server to.
	relay = []string{relayProg, "-v", "-ueid", InteropUEID, "-n", n, "-linger", "2s",
		"-listen", "smc:" + net.JoinHostPort(e.goroceAddr, strconv.Itoa(port)),
		"-dial", "tcp:" + net.JoinHostPort(e.goroceAddr, strconv.Itoa(port+1))}
	server = []string{"smcguest", "server", strconv.Itoa(port + 1), "-tcp", "-n", n, "-timeout", strconv.Itoa(c.smcTimeout()) + "s"}
	return relay, server
}
