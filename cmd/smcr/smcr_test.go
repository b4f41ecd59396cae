package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/smcr"
	"github.com/goroce/goroce/smcr/smcwire"
)

// smc-tools' number abbreviation: at most six characters.
func TestAbbreviated(t *testing.T) {
	for _, tc := range []struct {
		n    uint64
		want string
	}{
		{0, "0"}, {999, "999"}, {1000, "1.000K"}, {12345, "12.35K"}, {123456, "123.5K"},
		{999999, "1000K"}, {1234567, "1.235M"}, {1 << 30, "1.074G"}, {123456789012, "123.5G"},
	} {
		got := abbreviated(tc.n, 6)
		assert.Equal(t, strings.TrimSpace(tc.want), strings.TrimSpace(got), "%d", tc.n)
		assert.LessOrEqual(t, len(got), 6, "%d: %q", tc.n, got)
	}
}

func fixed() []*smcr.Published {
	a := &smcr.Stats{ClientV1: 1, ClientV2: 2, ServerV2: 3, ServerHandshakeErrors: 1, ClientFallbacks: 2,
		FallbackReasons: []smcr.FallbackCount{{Code: smcwire.DiagPeerNoSMC, Count: 2}},
		RxBytes:         123456, TxBytes: 1000, RxCalls: 10, TxCalls: 20,
		RMB:     smcr.BufStats{Alloc: 6, Sizes: [9]uint64{3: 6}, Full: 5},
		SendBuf: smcr.BufStats{Alloc: 6, Sizes: [9]uint64{3: 6}, FullPeer: 2, SizeSmall: 1},
		CDCSent: 40, CDCReceived: 41, LLCSent: 7, LLCReceived: 8}
	a.RxPayload[3], a.TxPayload[8] = 10, 20
	b := &smcr.Stats{ServerFallbacks: 1, FallbackReasons: []smcr.FallbackCount{{Server: true, Code: smcwire.DiagNoUEID, Count: 1}}}
	ap := netip.MustParseAddrPort
	gid := netip.MustParseAddr
	pa := &smcr.Published{PID: 10, Program: "smcat"}
	pa.Stats = a
	pa.Groups = []smcr.LinkGroupInfo{{ID: 0x100, Role: "server", Type: "SINGLE", Version: 2, Conns: 3, Device: ap("192.0.2.1:4791"),
		Links: []smcr.GroupLink{{LinkInfo: smcr.LinkInfo{ID: 1, LocalGID: gid("192.0.2.1"), PeerGID: gid("192.0.2.2"), LocalQPN: 0x11, PeerQPN: 0x22, MTU: 1024},
			State: "LINK_ACTIVE", Conns: 3, UID: 0x101}}}}
	pb := &smcr.Published{PID: 20, Program: "smc-relay"}
	pb.Stats = b
	pb.Groups = []smcr.LinkGroupInfo{{ID: 0x200, Role: "client", Type: "SYM", Version: 2, Conns: 1, Device: ap("192.0.2.2:4791"),
		Links: []smcr.GroupLink{
			{LinkInfo: smcr.LinkInfo{ID: 1, LocalGID: gid("192.0.2.2"), PeerGID: gid("192.0.2.1"), LocalQPN: 0x22, PeerQPN: 0x11}, State: "LINK_ACTIVE", Conns: 1, UID: 0x201},
			{LinkInfo: smcr.LinkInfo{ID: 2, LocalGID: gid("192.0.2.3"), PeerGID: gid("192.0.2.4"), LocalQPN: 0x33, PeerQPN: 0x44}, State: "LINK_ACTIVATING", UID: 0x202},
		}}}
	return []*smcr.Published{pa, pb}
}

// smcr stats: smc-tools' layout, the processes summed.
func TestStatsLayout(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, stats(&options{}, fixed(), nil, &out))
	assert.Equal(t, `SMC-R Connections Summary
  Total connections handled            10
  SMC connections                       6
  Handshake errors                      1
  Avg requests per SMC conn             5.0
  TCP fallback                          3

RX Stats
  Data transmitted (Bytes)         123456 (123.5K)
  Total requests                       10
  Buffer full                           5 (50.00%)
            8KB    16KB    32KB    64KB   128KB   256KB   512KB  >512KB
  Bufs        0       0       0       6       0       0       0       0
  Reqs        0       0       0      10       0       0       0       0

TX Stats
  Data transmitted (Bytes)           1000 (1.000K)
  Total requests                       20
  Buffer full                           0 (0.00%)
  Buffer full (remote)                  2 (10.00%)
  Buffer too small                      1 (5.00%)
  Buffer too small (remote)             0 (0.00%)
            8KB    16KB    32KB    64KB   128KB   256KB   512KB  >512KB
  Bufs        0       0       0       6       0       0       0       0
  Reqs        0       0       0       0       0       0       0      20

Extras
  Special socket calls                  0
  CDC messages sent                    40
  CDC messages received                41
  LLC messages sent                     7
  LLC messages received                 8
`, out.String())

	out.Reset()
	require.NoError(t, stats(&options{detail: 1}, fixed(), []string{"show"}, &out))
	for _, want := range []string{
		"  SMC connections                       6 (client 3, server 3)\n    v1                                  1\n    v2                                  5\n",
		"  Handshake errors                      1 (client 0, server 1)\n",
		"  TCP fallback                          3 (client 2, server 1)\n    Server\n     NOUEID                             1\n    Client\n     PEER_NO_SMC                        2\n",
		"  Buffer downgrades                     0\n  Buffer reuses                         0\n",
		"    cork                                0\n",
		"Processes summed: 2: 10 (smcat), 20 (smc-relay)\n",
	} {
		assert.Contains(t, out.String(), want)
	}

	out.Reset()
	require.NoError(t, stats(&options{}, fixed(), []string{"json"}, &out))
	var j map[string]map[string]uint64
	require.NoError(t, json.Unmarshal(out.Bytes(), &j), out.String())
	assert.Len(t, j["SMCR"], 63, "smc-tools' 63 counters")
	assert.Equal(t, uint64(2), j["SMCR"]["SMC_CLNT_V2_SUCC_CNT"])
	assert.Equal(t, uint64(123456), j["SMCR"]["SMC_RX_BYTES"])
	assert.Equal(t, uint64(20), j["SMCR"]["SMC_USR_TX_BUF_G_1024K"])
	assert.True(t, strings.HasPrefix(out.String(), `{"SMCR": {"SMC_INT_TX_BUF_8K":0,`), out.String())

	assert.ErrorContains(t, stats(&options{}, fixed(), []string{"reset"}, &out), "not supported")
}

// smcr linkgroup show and link-show: a line per group, and per link (a
// group of two links has two lines).
func TestLinkGroupLayout(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, linkGroups(&options{}, fixed(), nil, &out))
	assert.Equal(t, "LG-ID    LG-Role  LG-Type  VLAN  #Conns  PNET-ID          PID     Device\n"+
		"00000100 SERV     SINGLE      0       3                   10      192.0.2.1:4791\n"+
		"00000200 CLNT     SYM         0       1                   20      192.0.2.2:4791\n", out.String())
	out.Reset()
	require.NoError(t, linkGroups(&options{}, fixed(), []string{"show", "200"}, &out))
	assert.NotContains(t, out.String(), "00000100")
	assert.Contains(t, out.String(), "00000200")
	out.Reset()
	require.NoError(t, linkGroups(&options{detail: 2}, fixed(), []string{"link-show", "all"}, &out))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 4, out.String())
	assert.True(t, strings.HasPrefix(lines[0], "LG-ID    LG-Role  LG-Type  Net-Dev         Link-State      #Conns  Link-UID  Peer-UID  Device"), lines[0])
	assert.Regexp(t, `^00000200 CLNT     SYM      \S*\s+LINK_ACTIVATING      0  00000202  00000000  192.0.2.2:4791           1  192.0.2.3 +192.0.2.4 +000033 000044  20$`, lines[3])
	assert.ErrorContains(t, linkGroups(&options{}, fixed(), []string{"xyz"}, &out), "want all or a link group id")
}

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"-x", "stats"}, 2, `Error: Option "-x" is unknown`},
		{[]string{"nosuch"}, 2, `Error: Object "nosuch" is unknown`},
		{[]string{"-v"}, 0, "smcr utility"},
		{[]string{"help"}, 0, "Usage: smcr"},
		{[]string{"--pid", "x", "stats"}, 2, `--pid "x": want a process id`},
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, tc.code, run(append([]string{"--run-dir", t.TempDir()}, tc.args...), &out, &errOut), tc.args)
		assert.Contains(t, out.String()+errOut.String(), tc.out, tc.args)
	}
}

// Against this process's own connections, published into a run
// directory of the test's own.
func TestLive(t *testing.T) {
	dir := t.TempDir()
	pub, err := smcr.Publish(dir)
	require.NoError(t, err)
	defer pub.Close()
	n := rand.IntN(100*256) + 1
	srv := netip.AddrFrom4([4]byte{127, byte(100 + n/256), byte(n % 256), 1})
	cli := netip.AddrFrom4([4]byte{127, byte(100 + n/256), byte(n % 256), 2})
	cfg := smcr.Config{Signalling: smcr.SignalConfigured, PeerSpeaksSMC: true, UEIDs: []string{"SMCR-TEST"}, LinkGroupLinger: 10 * time.Millisecond}
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
	_, err = c.Write([]byte("hello"))
	require.NoError(t, err)
	buf := make([]byte, 5)
	_, err = s.Read(buf)
	require.NoError(t, err)

	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"--run-dir", dir, "-d", "stats"}, &out, &errOut), errOut.String())
	assert.Regexp(t, `SMC connections +\d+ \(client [1-9]\d*, server [1-9]\d*\)`, out.String())
	assert.Contains(t, out.String(), fmt.Sprintf("Processes summed: 1: %d (", os.Getpid()))
	out.Reset()
	require.Equal(t, 0, run([]string{"--run-dir", dir, "--pid", fmt.Sprint(os.Getpid()), "linkgroup", "link-show"}, &out, &errOut), errOut.String())
	ci := c.(*smcr.Conn).Info()
	assert.Contains(t, out.String(), fmt.Sprintf("%08x CLNT     SINGLE   ", ci.LinkGroup))
	assert.Contains(t, out.String(), "LINK_ACTIVE")
	out.Reset()
	assert.Equal(t, 1, run([]string{"--run-dir", dir, "--pid", "999999999", "stats"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "no goroce process 999999999 publishes")
}
