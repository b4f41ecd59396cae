package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/rundir/rundirtest"
	"github.com/goroce/goroce/smcr"
)

// procs is a fixed snapshot of two processes: a server with a listener,
// an SMC-R connection and a fallback; a client with the other end and a
// connection whose peer declined.
func procs() []*smcr.Published {
	ap := netip.MustParseAddrPort
	gid := netip.MustParseAddr
	link := func(local, peer string, lq, pq uint32) []smcr.LinkInfo {
		return []smcr.LinkInfo{{ID: 1, LocalGID: gid(local), PeerGID: gid(peer), LocalQPN: lq, PeerQPN: pq, MTU: 4096}}
	}
	return []*smcr.Published{
		{PID: 4242, UID: 1000, Program: "smcat", Sockets: []smcr.Socket{
			{State: "ACTIVE", Role: "server", Mode: smcr.ModeFallback, Local: ap("127.0.0.1:5000"), Peer: ap("127.0.0.3:40001"), Fallback: 0x03010000, FallbackBy: "local"},
			{State: "ACTIVE", Role: "server", Mode: smcr.ModeSMCRv2, Local: ap("127.0.0.1:5000"), Peer: ap("127.0.0.2:40000"), Device: ap("127.0.0.1:4791"),
				Shutdown: 1, LinkGroup: 0x100, Links: link("127.0.0.1", "127.0.0.2", 0x11, 0x12), Token: 0xa1, RMBSize: 65536, PeerRMBSize: 16384, SendBufSize: 65536,
				BytesSent: 1000, BytesReceived: 2000},
			{State: "LISTEN", Mode: smcr.ModeFallback, Local: ap("127.0.0.1:5000"), Device: ap("127.0.0.1:4791")},
		}},
		{PID: 17, UID: 1000, Program: "smcat", More: 3, Sockets: []smcr.Socket{
			{State: "PEERCLOSEWAIT1", Role: "client", Mode: smcr.ModeSMCRv1, Local: ap("127.0.0.2:40000"), Peer: ap("127.0.0.1:5000"), Device: ap("127.0.0.2:4791"),
				Shutdown: 2, LinkGroup: 0x200, Links: link("::ffff:127.0.0.2", "::ffff:127.0.0.1", 0x12, 0x11), Token: 0xb2, RMBSize: 16384, PeerRMBSize: 65536, SendBufSize: 16384},
			{State: "ACTIVE", Role: "client", Mode: smcr.ModeFallback, Local: ap("[fd00:1234:5678:9abc:def0:1234:5678:9abc]:40002"), Peer: ap("[fd00::1]:5000"),
				Fallback: 0x05000000, FallbackBy: "peer", PeerDiagnosis: 0x03030008},
			{State: "\x1b[2J", Role: "client", Mode: smcr.ModeSMCRv2, Local: ap("127.0.0.2:40003"), Peer: ap("127.0.0.1:5000")},
		}},
	}
}

// -R with a group of several links: the row is the connection's own link
// (the one in use, on its device), and each other link of the group
// follows on a line of its own with its state (what another process says
// of it made safe to print).
func TestFormatLinks(t *testing.T) {
	ap := netip.MustParseAddrPort
	gid := netip.MustParseAddr
	ps := []*smcr.Published{{PID: 17, UID: 1000, Program: "smcat", Sockets: []smcr.Socket{
		{State: "ACTIVE", Role: "client", Mode: smcr.ModeSMCRv2, Local: ap("127.0.0.2:40004"), Peer: ap("127.0.0.1:5000"), Device: ap("127.0.0.2:4791"),
			LinkGroup: 0x300, Links: []smcr.LinkInfo{
				{ID: 1, LocalGID: gid("127.0.0.2"), PeerGID: gid("127.0.0.1"), LocalQPN: 0x31, PeerQPN: 0x32, State: "INACTIVE", Device: ap("127.0.0.2:4791")},
				{ID: 2, LocalGID: gid("127.0.0.4"), PeerGID: gid("127.0.0.3"), LocalQPN: 0x41, PeerQPN: 0x42, State: "ACTIVE", Device: ap("127.0.0.4:4791"), InUse: true},
				{ID: 3, LocalGID: gid("127.0.0.2"), PeerGID: gid("127.0.0.1"), LocalQPN: 0x51, PeerQPN: 0x52, State: "\x1b[2J", Device: ap("127.0.0.2:4791")}}},
	}}}
	want := `
State          UID   PID     Local Address           Peer Address            Mode   Role Device                Linkid LGR      QPN    Peer-QPN GID                     Peer-GID
ACTIVE         01000 17      127.0.0.2:40004         127.0.0.1:5000          SMCRv2 CLNT 127.0.0.4:4791        02     00000300 000041 000042   127.0.0.4               127.0.0.3
                                                                                    +    127.0.0.2:4791        01     00000300 000031 000032   127.0.0.2               127.0.0.1 INACTIVE
                                                                                    +    127.0.0.2:4791        03     00000300 000051 000052   127.0.0.2               127.0.0.1 ?
`
	assert.Equal(t, strings.TrimPrefix(want, "\n"), format(ps, &options{smcr: true}))
}

// The table for every option smcss takes, against a fixed snapshot.
func TestFormat(t *testing.T) {
	tests := []struct {
		name string
		opts options
		want string
	}{
		{"connected sockets", options{}, `
State          UID   PID     Local Address           Peer Address            Mode
PEERCLOSEWAIT1 01000 17      127.0.0.2:40000         127.0.0.1:5000          SMCRv1
?              01000 17      127.0.0.2:40003         127.0.0.1:5000          SMCRv2
ACTIVE         01000 17      fd00:1234:5678:..:40002 fd00::1:5000            TCP 0x05000000/0x03030008 (peer declined during handshake: no UEID)
ACTIVE         01000 4242    127.0.0.1:5000          127.0.0.2:40000         SMCRv2
ACTIVE         01000 4242    127.0.0.1:5000          127.0.0.3:40001         TCP 0x03010000 (peer did not indicate SMC)
(process 17 has 3 more sockets than it lists)
`},
		{"-a: listeners too", options{all: true}, `
State          UID   PID     Local Address           Peer Address            Mode
PEERCLOSEWAIT1 01000 17      127.0.0.2:40000         127.0.0.1:5000          SMCRv1
?              01000 17      127.0.0.2:40003         127.0.0.1:5000          SMCRv2
ACTIVE         01000 17      fd00:1234:5678:..:40002 fd00::1:5000            TCP 0x05000000/0x03030008 (peer declined during handshake: no UEID)
LISTEN         01000 4242    127.0.0.1:5000
ACTIVE         01000 4242    127.0.0.1:5000          127.0.0.2:40000         SMCRv2
ACTIVE         01000 4242    127.0.0.1:5000          127.0.0.3:40001         TCP 0x03010000 (peer did not indicate SMC)
(process 17 has 3 more sockets than it lists)
`},
		{"-l: listeners only", options{listening: true}, `
State          UID   PID     Local Address
LISTEN         01000 4242    127.0.0.1:5000
(process 17 has 3 more sockets than it lists)
`},
		{"-W: whole addresses", options{wide: true, smcr: false}, `
State          UID   PID     Local Address           Peer Address            Mode
PEERCLOSEWAIT1 01000 17      127.0.0.2:40000         127.0.0.1:5000          SMCRv1
?              01000 17      127.0.0.2:40003         127.0.0.1:5000          SMCRv2
ACTIVE         01000 17      fd00:1234:5678:9abc:def0:1234:5678:9abc:40002 fd00::1:5000            TCP 0x05000000/0x03030008 (peer declined during handshake: no UEID)
ACTIVE         01000 4242    127.0.0.1:5000          127.0.0.2:40000         SMCRv2
ACTIVE         01000 4242    127.0.0.1:5000          127.0.0.3:40001         TCP 0x03010000 (peer did not indicate SMC)
(process 17 has 3 more sockets than it lists)
`},
		{"-e: buffers and counters", options{extended: true}, `
State          UID   PID     Local Address           Peer Address            Mode   Shutd Token    Sndbuf   Rcvbuf   Peerbuf  Tx-Bytes     Rx-Bytes
PEERCLOSEWAIT1 01000 17      127.0.0.2:40000         127.0.0.1:5000          SMCRv1  <-W  000000b2 00004000 00004000 00010000 0            0
?              01000 17      127.0.0.2:40003         127.0.0.1:5000          SMCRv2  <->  00000000 00000000 00000000 00000000 0            0
ACTIVE         01000 17      fd00:1234:5678:..:40002 fd00::1:5000            TCP 0x05000000/0x03030008 (peer declined during handshake: no UEID)
ACTIVE         01000 4242    127.0.0.1:5000          127.0.0.2:40000         SMCRv2  R->  000000a1 00010000 00010000 00004000 1000         2000
ACTIVE         01000 4242    127.0.0.1:5000          127.0.0.3:40001         TCP 0x03010000 (peer did not indicate SMC)
(process 17 has 3 more sockets than it lists)
`},
		{"-R: SMC-R with links", options{smcr: true}, `
State          UID   PID     Local Address           Peer Address            Mode   Role Device                Linkid LGR      QPN    Peer-QPN GID                     Peer-GID
PEERCLOSEWAIT1 01000 17      127.0.0.2:40000         127.0.0.1:5000          SMCRv1 CLNT 127.0.0.2:4791        01     00000200 000012 000011   127.0.0.2               127.0.0.1
?              01000 17      127.0.0.2:40003         127.0.0.1:5000          SMCRv2 CLNT invalid AddrPort      00     00000000 000000 000000   -                       -
ACTIVE         01000 4242    127.0.0.1:5000          127.0.0.2:40000         SMCRv2 SERV 127.0.0.1:4791        01     00000100 000011 000012   127.0.0.1               127.0.0.2
(process 17 has 3 more sockets than it lists)
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := procs()
			// gather sorts the processes by PID.
			ps[0], ps[1] = ps[1], ps[0]
			assert.Equal(t, strings.TrimPrefix(tt.want, "\n"), format(ps, &tt.opts))
		})
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"-l", "-e"}, 2, "--listening together with --extended is not supported"},
		{[]string{"-l", "-d"}, 2, "--listening together with --extended is not supported"},
		{[]string{"-la"}, 2, "--listening together with --all is not supported"},
		{[]string{"-l", "--smcr"}, 2, "--listening together with --smcr is not supported"},
		{[]string{"-D", "-R"}, 2, "--smcd together with --smcr is not supported"},
		{[]string{"-x"}, 2, "smcss: invalid option -- 'x'"},
		{[]string{"--bogus"}, 2, "unrecognized option"},
		{[]string{"x"}, 2, `unexpected operand "x"`},
		// smc-tools' own spellings, which smcss took for errors before.
		{[]string{"-aR"}, 0, ""},
		{[]string{"-a", "-R"}, 0, ""},
		{[]string{"--all", "--smcr"}, 0, ""},
		{[]string{"--sm", "--all"}, 2, "ambiguous"},
		{[]string{"-d"}, 0, ""},
		{[]string{"--debug", "-W", "-D"}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			assert.Equal(t, tt.code, run(append(tt.args, "--run-dir", t.TempDir()), &out, &errOut))
			if tt.err == "" {
				assert.Empty(t, errOut.String())
				assert.True(t, strings.HasPrefix(out.String(), "State "), out.String())
			} else {
				assert.Contains(t, errOut.String(), tt.err)
			}
		})
	}
	var out bytes.Buffer
	assert.Equal(t, 0, run([]string{"-h"}, &out, io.Discard))
	assert.Contains(t, out.String(), "Usage: smcss [ OPTIONS ]")
	assert.Contains(t, out.String(), "-d, --debug")
	out.Reset()
	assert.Equal(t, 0, run([]string{"-V"}, &out, io.Discard))
	assert.Contains(t, out.String(), "smcss utility")
}

// smcss against this process's own SMC-R and fallback connections,
// published into a run directory of the test's own; a process that died
// (its socket left behind) is skipped, one that answers garbage is
// reported and skipped.
func TestLive(t *testing.T) {
	dir := t.TempDir()
	pub, err := smcr.Publish(dir)
	require.NoError(t, err)
	defer pub.Close()

	n := rand.IntN(100*256) + 1
	srv := netip.AddrFrom4([4]byte{127, byte(100 + n/256), byte(n % 256), 1})
	cli := netip.AddrFrom4([4]byte{127, byte(100 + n/256), byte(n % 256), 2})
	cfg := smcr.Config{Signalling: smcr.SignalConfigured, PeerSpeaksSMC: true, UEIDs: []string{"SMCSS-TEST"}, LinkGroupLinger: 10 * time.Millisecond}
	ln, err := smcr.Listen("tcp", netip.AddrPortFrom(srv, 0).String(), &cfg)
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	d := smcr.Dialer{Config: cfg, LocalAddr: cli}
	c, err := d.DialContext(context.Background(), "tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	s := <-accepted
	require.NotNil(t, s)
	defer s.Close()

	// A fallback: no SMC said to a plain TCP server.
	tl, err := net.Listen("tcp", netip.AddrPortFrom(srv, 0).String())
	require.NoError(t, err)
	defer tl.Close()
	cfg.PeerSpeaksSMC = false
	d = smcr.Dialer{Config: cfg, LocalAddr: cli}
	fc, err := d.DialContext(context.Background(), "tcp", tl.Addr().String())
	require.NoError(t, err)
	defer fc.Close()

	// A dead process's socket, and a publisher that speaks nonsense.
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrUnix{Name: smcr.PublishPath(dir, 999999)}))
	syscall.Close(fd)
	rundirtest.Serve(t, smcr.PublishPath(dir, 999998), "goroce-smc 2\n{\"sockets\":1}\n\x1b[31m{not json\n")

	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"-a", "--run-dir", dir}, &out, &errOut))
	got := out.String()
	pid := strconvItoa(os.Getpid())
	for _, want := range []string{
		"LISTEN         " + uidText() + " " + pad(pid) + ln.Addr().String() + "\n",
		"ACTIVE         " + uidText() + " " + pad(pid) + col23(c.LocalAddr().String()) + col23(c.RemoteAddr().String()) + "SMCRv2\n",
		"ACTIVE         " + uidText() + " " + pad(pid) + col23(s.LocalAddr().String()) + col23(s.RemoteAddr().String()) + "SMCRv2\n",
		"ACTIVE         " + uidText() + " " + pad(pid) + col23(fc.LocalAddr().String()) + col23(fc.RemoteAddr().String()) + "TCP 0x03010000 (peer did not indicate SMC)\n",
	} {
		assert.Contains(t, got, want)
	}
	assert.Contains(t, errOut.String(), filepath.Base(smcr.PublishPath(dir, 999998)))
	assert.Contains(t, errOut.String(), "socket 1 of 1")
	assert.NotContains(t, errOut.String(), "999999", "a dead process is skipped quietly")
	assert.NoFileExists(t, smcr.PublishPath(dir, 999999), "and its socket removed")
	assert.NotContains(t, errOut.String(), "\x1b", "nothing from a publisher reaches the terminal raw")

	out.Reset()
	require.Equal(t, 0, run([]string{"-R", "--run-dir", dir}, &out, io.Discard))
	ci, _ := smcr.Info(c)
	assert.Contains(t, out.String(), "CLNT "+col21(netip.AddrPortFrom(cli, 4791).String())+"01     "+
		hex8(ci.LinkGroup)+" "+hex6(ci.Links[0].LocalQPN)+" "+hex6(ci.Links[0].PeerQPN)+"   "+col23(cli.String())+srv.String()+"\n")
	assert.NotContains(t, out.String(), "TCP 0x", "-R shows only SMC-R")
}

func uidText() string { return padZero(os.Getuid()) }

func strconvItoa(n int) string { return fmt.Sprint(n) }
func padZero(n int) string     { return fmt.Sprintf("%05d", n) }
func pad(s string) string      { return fmt.Sprintf("%-7s ", s) }
func col23(s string) string    { return fmt.Sprintf("%-23s ", s) }
func col21(s string) string    { return fmt.Sprintf("%-21s ", s) }
func hex8(n uint32) string     { return fmt.Sprintf("%08x", n) }
func hex6(n uint32) string     { return fmt.Sprintf("%06x", n) }

// fakeListing is what a socket that is not a goroce process of the user's
// answers: a process smcss must never list.
const fakeListing = "goroce-smc 2\n{\"pid\":31337,\"uid\":0,\"program\":\"fake\",\"sockets\":1}\n{\"state\":\"LISTEN\",\"local\":\"192.0.2.1:1\"}\n"

// A run directory that others may write to is refused (status 1, and
// what to do); a socket there that another user serves is reported and
// not listed.
func TestUntrustedRunDir(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o777))
	var out, errOut bytes.Buffer
	assert.Equal(t, 1, run([]string{"-a", "--run-dir", dir}, &out, &errOut))
	assert.Contains(t, errOut.String(), "smcss: read the run directory: run directory "+dir+" has mode 0777")
	assert.Contains(t, errOut.String(), "chmod go-w it, or set GOROCE_RUN_DIR")
	assert.Empty(t, out.String())

	t.Run("a socket another user serves", func(t *testing.T) {
		dir := t.TempDir()
		path := smcr.PublishPath(dir, 31337)
		rundirtest.ForeignSocket(t, path, fakeListing)
		var out, errOut bytes.Buffer
		assert.Equal(t, 0, run([]string{"-a", "--run-dir", dir}, &out, &errOut))
		assert.NotContains(t, out.String(), "31337")
		assert.Contains(t, errOut.String(), "socket "+path+" is served by uid 65534, not by you")
	})
}

// As root smcss lists every user's processes, as smc-tools' smcss lists
// every user's sockets for root: a user's run directory at the default
// place, believed as that user's (root only: it runs a publisher as
// nobody).
func TestRootListsEveryUser(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("GOROCE_RUN_DIR", t.TempDir())
	listing := "goroce-smc 2\n{\"pid\":31337,\"uid\":65534,\"program\":\"smcat\",\"sockets\":1}\n{\"state\":\"LISTEN\",\"local\":\"192.0.2.1:1\"}\n"
	rundirtest.ForeignPublisher(t, tmp, filepath.Base(smcr.PublishPath("", 31337)), listing)
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"-a"}, &out, &errOut))
	assert.Empty(t, errOut.String())
	assert.Contains(t, out.String(), "LISTEN         65534 31337   192.0.2.1:1\n")

	// --run-dir reads that directory alone.
	out.Reset()
	require.Equal(t, 0, run([]string{"-a", "--run-dir", os.Getenv("GOROCE_RUN_DIR")}, &out, &errOut))
	assert.NotContains(t, out.String(), "31337")
}
