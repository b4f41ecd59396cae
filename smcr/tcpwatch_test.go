package smcr_test

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/smcr"
)

// noTestLink is a configuration in which only the TCP connection can tell
// that a peer went away: TEST_LINK never runs.
func noTestLink(c *smcr.Config) { c.TestLinkInterval = -1 }

// requireReset waits (a hang guard only) for c's Read to fail as a reset.
func requireReset(t *testing.T, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Second)))
	_, err := io.ReadAll(c)
	require.ErrorIs(t, err, syscall.ECONNRESET, "the peer's end was not noticed")
}

// A peer's TCP connection that goes away under a live SMC-R connection,
// before the peer closed SMC-R, aborts that connection at once, and only
// that one: its link group serves the others on. The TCP connection is
// reset (a killed process's, see TestKilledPeerNoticedAtOnce), ends (a
// FIN: the peer, alive, answers the TEST_LINK that checks whether its SMC
// close was under way), or carries bytes (the peer no longer speaks SMC-R
// on it). Before, only TEST_LINK noticed, 30 s later.
func TestPeerTCPEndNoticedAtOnce(t *testing.T) {
	tests := []struct {
		name string
		do   func(*net.TCPConn) error
	}{
		{"reset", func(tc *net.TCPConn) error {
			_ = tc.SetLinger(0)
			return tc.Close()
		}},
		{"end of stream", func(tc *net.TCPConn) error { return tc.CloseWrite() }},
		{"bytes", func(tc *net.TCPConn) error { _, err := tc.Write([]byte("x")); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noLeaks(t)
			p := newPair(t, noTestLink)
			c1, s1 := p.dial(t)
			c2, s2 := p.dial(t)
			require.Equal(t, info(c1).LinkGroup, info(c2).LinkGroup)
			require.NoError(t, tt.do(smcr.TCPOf(c1)))
			requireReset(t, s1)
			exchange(t, c2, s2, 10000)
			if tt.name == "bytes" {
				require.Equal(t, uint64(1), smcr.StatsOf(s1.(*smcr.Conn)).TCPBytes)
			}
		})
	}
}

// helperEnv names the server a TestKilledPeerHelper process dials.
const helperEnv = "GOROCE_SMCR_KILLED_PEER"

// A peer process killed (SIGKILL) under a live SMC-R connection is noticed
// at once: the kernel closes its TCP connection, which it had made reset
// on close for that, and the connection is aborted, with TEST_LINK off.
// (The issue saw 28 to 33 s, TEST_LINK's.)
func TestKilledPeerNoticedAtOnce(t *testing.T) {
	noLeaks(t)
	p := newPair(t, noTestLink)
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledPeerHelper$")
	cmd.Env = append(os.Environ(), helperEnv+"="+p.ln.Addr().String()+" "+p.d.LocalAddr.String())
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	var s net.Conn
	select {
	case a, ok := <-p.accepted():
		require.True(t, ok)
		s = a.c
	case <-time.After(30 * time.Second): // hang guard
		t.Fatal("the helper did not connect")
	}
	defer s.Close()
	requireMode(t, s, smcr.ModeSMCRv2)
	got := make([]byte, 5)
	require.NoError(t, s.SetReadDeadline(time.Now().Add(30*time.Second)))
	_, err := io.ReadFull(s, got)
	require.NoError(t, err)
	require.Equal(t, "ready", string(got))

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	requireReset(t, s)
}

// TestKilledPeerHelper is the process TestKilledPeerNoticedAtOnce kills:
// it dials, says "ready" over SMC-R, and waits to be killed.
func TestKilledPeerHelper(t *testing.T) {
	env := os.Getenv(helperEnv)
	if env == "" {
		t.Skip("the process TestKilledPeerNoticedAtOnce starts")
	}
	addr, src, _ := strings.Cut(env, " ")
	cfg := testConfig()
	cfg.TestLinkInterval = -1
	d := smcr.Dialer{Config: cfg, LocalAddr: netip.MustParseAddr(src)}
	c, err := d.DialContext(context.Background(), "tcp", addr)
	require.NoError(t, err)
	_, err = c.Write([]byte("ready"))
	require.NoError(t, err)
	<-time.After(2 * time.Minute) // killed long before, unless the test is gone
}
