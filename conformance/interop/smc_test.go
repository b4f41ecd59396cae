//go:build linux

package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSMCCases(t *testing.T) {
	var smc []testCase
	seen := map[string]bool{}
	for _, c := range cases() {
		if c.smc == nil {
			assert.Equal(t, rcGuest, c.guest)
			continue
		}
		assert.Equal(t, smcGuest, c.guest)
		s := c.slug()
		assert.False(t, seen[s], "duplicate case %s", s)
		seen[s] = true
		assert.NotContains(t, s, " ")
		assert.NotContains(t, s, ",")
		smc = append(smc, c)
	}
	// What the brief asks for, each from both sides.
	has := func(what string, f func(c testCase) bool) {
		t.Helper()
		dirs := map[side]bool{}
		for _, c := range smc {
			if !c.smc.hostTCP && f(c) {
				dirs[c.server] = true
			}
		}
		assert.True(t, dirs[guestServer] && dirs[goroceServer], "%s: both directions", what)
	}
	has("1 B to 16 MiB", func(c testCase) bool { return sizeList(c.smc.sizes) == "1,1k,64k,1m,16m" })
	has("8 connections at once", func(c testCase) bool { return c.smc.conns == 8 && c.smc.parallel })
	for _, end := range []string{endShut, endClose, endAbort} {
		has("client end "+end, func(c testCase) bool { return c.smc.clientEnd == end })
	}
	for _, end := range []string{endClose, endAbort} {
		has("server end "+end, func(c testCase) bool { return c.smc.serverEnd == end })
	}
	has("link group end", func(c testCase) bool { return c.smc.lgrEnd })
	has("ADD_LINK", func(c testCase) bool { return c.smc.addLink })
	has("TEST_LINK", func(c testCase) bool {
		return c.smc.testlink > 0 && c.smc.idle > time.Duration(c.smc.testlink)*time.Second
	})
	has("5% loss, 16 MiB", func(c testCase) bool { return c.loss == 5 && sizeList(c.smc.sizes) == "16m" })
	has("failover, 16 MiB", func(c testCase) bool { return c.smc.failover && sizeList(c.smc.sizes) == "16m" })
	assert.True(t, smc[0].smc.hostTCP, "the fallback proof comes first")
	assert.Equal(t, "kernel srv ← host TCP cli", smc[0].direction())
}

func TestSMCCommands(t *testing.T) {
	c := testCase{guest: smcGuest, server: goroceServer, smc: &smcSpec{conns: 8, parallel: true, sizes: []int{1, 1 << 20}, clientEnd: endAbort, serverEnd: endShut}}
	assert.Equal(t, "smcguest client 198.18.0.1 20000 -conns 8 -sizes 1,1m -end abort -timeout 38s -parallel",
		strings.Join(c.guestSMCCommand(20000, guestEnds), " "))
	assert.Equal(t, "smcat -v -ueid GOROCE-INTEROP-UEID -l -k --echo -n 8 --peer-abort 198.18.0.1 20000",
		strings.Join(smcatCommand(&c, guestEnds, 20000), " "))
	c.server = guestServer
	assert.Equal(t, "smcguest server 20000 -n 8 -timeout 38s -peer-abort", strings.Join(c.guestSMCCommand(20000, guestEnds), " "))
	assert.Equal(t, "smcat -v -ueid GOROCE-INTEROP-UEID -s 198.18.0.1 --end abort -P 8 -pattern 1048577 198.18.0.11 20000",
		strings.Join(smcatCommand(&c, guestEnds, 20000), " "), "connections at once: one process, one link group")
	c.smc = &smcSpec{conns: 1, sizes: []int{1}, clientEnd: endShut, serverEnd: endAbort, lgrEnd: true}
	assert.Equal(t, "smcguest server 20000 -n 1 -timeout 30s -abort", strings.Join(c.guestSMCCommand(20000, guestEnds), " "))
	assert.Contains(t, strings.Join(smcatCommand(&c, guestEnds, 20000), " "), "--linger 3s")
	assert.Contains(t, strings.Join(smcatCommand(&c, guestEnds, 20000), " "), "--peer-abort", "the kernel server aborts")
	assert.Equal(t, "1,1k,64k,1m,16m,1000,1025", sizeList([]int{1, 1024, 65536, 1 << 20, 16 << 20, 1000, 1025}))
}

func TestExpectedBytes(t *testing.T) {
	c := testCase{server: goroceServer, smc: &smcSpec{conns: 2, sizes: []int{100, 1 << 20}, clientEnd: endShut, serverEnd: endShut}}
	tx, rx := c.expectedBytes()
	assert.Equal(t, int64(2*(100+1<<20)), tx)
	assert.Equal(t, tx, rx)
	c.smc.clientEnd = endAbort // the kernel client leaves 32 KiB of each last echo
	tx, rx = c.expectedBytes()
	assert.Equal(t, tx-2*32768, rx)
	c.server = guestServer // goroce's client aborts wherever the echo is
	tx, rx = c.expectedBytes()
	assert.Equal(t, int64(0), tx)
	assert.Equal(t, int64(0), rx)
	c.smc.clientEnd, c.smc.serverEnd = endShut, endAbort
	tx, rx = c.expectedBytes()
	assert.Equal(t, int64(0), tx)
	assert.Equal(t, int64(2), rx)
}

const statsOut = `smcd.clnt_v2_succ=0
smcr.clnt_v1_succ=0
smcr.clnt_v2_succ=3
smcr.srv_v2_succ=1
smcr.tx_bytes=300
smcr.rx_bytes=200
smcr.tx_rmb_stats.reuse_cnt=2
fallback.srv_cnt=1
fallback.clnt_cnt=0
fallback.srv.0x03010000=1
# fallback.srv.0x03010000: peer did not indicate SMC
garbage line
`

func TestSMCStats(t *testing.T) {
	before := parseSMCStats(statsOut)
	assert.Equal(t, int64(3), before["smcr.clnt_v2_succ"])
	assert.Equal(t, int64(1), before["fallback.srv.0x03010000"])
	assert.NotContains(t, before, "garbage line")
	after := parseSMCStats(strings.NewReplacer("clnt_v2_succ=3", "clnt_v2_succ=4", "fallback.clnt_cnt=0", "fallback.clnt_cnt=2",
		"fallback.srv_cnt=1\n", "fallback.srv_cnt=1\nfallback.clnt.0x03030008=2\n").Replace(statsOut))
	d := after.delta(before)
	assert.Equal(t, smcStats{"smcr.clnt_v2_succ": 1, "fallback.clnt_cnt": 2, "fallback.clnt.0x03030008": 2}, d)
	assert.Equal(t, int64(1), d.smcrConns("clnt"))
	reasons, n := d.fallbacks()
	assert.Equal(t, int64(2), n)
	assert.Equal(t, []string{"client 0x03030008 (no UEID) ×2"}, reasons)
}

// smcCapture is rocedump text of a first contact with a shut, from the
// kernel (server) side's view: goroce the client.
const smcCapture = `0.1 198.18.0.1.40000 > 198.18.0.11.5000: TCP smc CLC Proposal v2 len 156 v1 none v2 SMC-R release 1
0.2 198.18.0.11.5000 > 198.18.0.1.40000: TCP smc CLC Accept v2 first contact len 160 qpn 0x11
0.3 198.18.0.1.40000 > 198.18.0.11.5000: TCP smc CLC Confirm v2 first contact len 180 qpn 0x11
0.4 198.18.0.11.49441 > 198.18.0.1.4791: RC SEND_ONLY qp 0x11 psn 5 ackreq se payload 44 icrc ok smc LLC CONFIRM_LINK_v2 len 44 link 1
0.5 198.18.0.1.49441 > 198.18.0.11.4791: RC SEND_ONLY qp 0x11 psn 7 ackreq se payload 44 icrc ok smc LLC CONFIRM_LINK_v2 RESP len 44 link 1
0.6 198.18.0.11.49441 > 198.18.0.1.4791: RC SEND_ONLY qp 0x11 psn 6 ackreq se payload 88 icrc ok smc LLC ADD_LINK_v2 len 88 link 2
0.7 198.18.0.1.49441 > 198.18.0.11.4791: RC SEND_ONLY qp 0x11 psn 8 ackreq se payload 44 icrc ok smc LLC ADD_LINK_v2 RESP len 44 rejected link 2
0.8 198.18.0.1.49441 > 198.18.0.11.4791: RC SEND_ONLY qp 0x11 psn 9 ackreq se payload 44 icrc ok smc CDC seq 2 token 1 prod 0:100 cons 0:100 peer_done_writing
0.9 198.18.0.11.49441 > 198.18.0.1.4791: RC SEND_ONLY qp 0x11 psn 7 ackreq se payload 44 icrc ok smc CDC seq 2 token 1 prod 0:100 cons 0:100 peer_done_writing peer_conn_closed
1.0 198.18.0.11.49441 > 198.18.0.1.4791: RC SEND_ONLY qp 0x11 psn 8 ackreq se payload 44 icrc ok smc LLC TEST_LINK_v2 len 44
`

func TestSMCWire(t *testing.T) {
	cc := newCaptureCheck()
	cc.addText(smcCapture)
	w := cc.smc
	assert.Equal(t, 1, w.clc[hostIP]["Proposal"])
	assert.Equal(t, 1, w.clc[guestIP]["Accept"])
	assert.Equal(t, 1, w.llcCount(guestIP, "ADD_LINK", false))
	assert.Equal(t, 1, w.llcCount(hostIP, "ADD_LINK", true))
	assert.Equal(t, 0, w.llcCount(hostIP, "ADD_LINK", false))
	assert.Equal(t, 1, w.cdc[hostIP]["peer_done_writing"])
	assert.Equal(t, 1, w.cdc[guestIP]["peer_conn_closed"])
	assert.Equal(t, 7, cc.bySrc[guestIP]+cc.bySrc[hostIP], "the RoCE lines are counted as ever")

	c := testCase{server: guestServer, smc: &smcSpec{conns: 1, sizes: []int{100}, clientEnd: endShut, serverEnd: endShut, addLink: true}}
	r := &result{cap: cc}
	cc.packets = 7
	assert.Empty(t, checkSMCWire(&c, r))
	// TEST_LINK: the kernel's is there, goroce's answer is not.
	c.smc.testlink = 2
	assert.Equal(t, []string{"goroce answered none of the kernel's 1 TEST_LINK(s)"}, checkSMCWire(&c, r))
	c.smc.testlink = 0
	// The client aborted, but the wire shows a shut.
	c.smc.clientEnd = endAbort
	assert.Equal(t, []string{"no CDC peer_conn_abort from goroce (client end abort)"}, checkSMCWire(&c, r))
	c.smc.clientEnd = endShut
	// Seen from the other direction, the kernel is the client: its
	// Proposal is missing.
	c.server = goroceServer
	f := checkSMCWire(&c, r)
	assert.Contains(t, f, "no CLC Proposal from the kernel")
	cc.icrcBad = 1
	assert.Contains(t, checkSMCWire(&c, r), "1 of 7 RoCE packets have a bad ICRC")
}

func TestCheckSMC(t *testing.T) {
	// A kernel-server case that went well.
	c := testCase{server: guestServer, smc: &smcSpec{conns: 1, sizes: []int{100}, clientEnd: endShut, serverEnd: endShut}}
	cc := newCaptureCheck()
	cc.addText(smcCapture)
	cc.packets = 7
	good := func() *result {
		return &result{guestRC: 0, goroceRC: 0, cap: cc,
			guestOut: "server: conn 0 accepted from 198.18.0.1:40000 mode=smcr\nserver: done conns=1",
			smc: &smcOutcome{delta: smcStats{"smcr.srv_v2_succ": 1, "smcr.tx_bytes": 100, "smcr.rx_bytes": 100},
				hostConns: []hostConn{{rc: 0, sent: 100, echoed: 100}}}}
	}
	assert.Empty(t, checkSMC(&c, good()))

	// A fallback fails the case, with its reason.
	r := good()
	r.guestOut = strings.Replace(r.guestOut, "mode=smcr", "mode=fallback reason=0x03030008 (no UEID)", 1)
	r.smc.delta = smcStats{"fallback.srv_cnt": 1, "fallback.srv.0x03030008": 1}
	f := strings.Join(checkSMC(&c, r), "\n")
	assert.Contains(t, f, "fallback to TCP: the kernel counted 1 fallback(s): server 0x03030008 (no UEID) ×1")
	assert.Contains(t, f, "a connection ran as mode=fallback reason=0x03030008 (no UEID), not SMC-R")
	assert.Contains(t, f, "the kernel counted 0 SMC-R server connection(s) (v1+v2), not 1")

	// A short echo on goroce's client.
	r = good()
	r.smc.hostConns[0].echoed = 50
	assert.Equal(t, []string{"conn 0: 100 bytes sent, 50 echoed"}, checkSMC(&c, r))

	// The fallback proof: plain TCP from the host.
	c = testCase{server: guestServer, smc: &smcSpec{hostTCP: true, conns: 1, sizes: []int{1}, clientEnd: endShut, serverEnd: endShut}}
	r = &result{cap: newCaptureCheck(), guestOut: "server: conn 0 accepted from 198.18.0.1:4 mode=fallback reason=0x03010000 (peer did not indicate SMC)\nserver: done conns=1",
		goroceOut: "client: done conns=1 failed=0", smc: &smcOutcome{delta: smcStats{"fallback.srv_cnt": 1, "fallback.srv.0x03010000": 1}}}
	assert.Empty(t, checkSMC(&c, r))
	r.smc.delta = smcStats{"smcr.srv_v2_succ": 1}
	f = strings.Join(checkSMC(&c, r), "\n")
	assert.Contains(t, f, "not 1 × server 0x03010000")
	assert.Contains(t, f, "the kernel counted 1 SMC-R server connection(s) for a plain TCP client")
}

func TestDriveClientEcho(t *testing.T) {
	// cat is a perfect echo: what goroce's client writes to the
	// connection and reads back, the harness writes and reads here.
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Skip("no cat")
	}
	start := func(cmd *exec.Cmd) (*proc, error) { return newProcs().start("cat", cmd) }
	ctx := context.Background()
	for _, waitEcho := range []bool{false, true} {
		r := driveClient(ctx, start, exec.Command(cat), 3, []int{1, 1 << 10, 1 << 20}, 0, waitEcho, nil, time.Now().Add(20*time.Second))
		assert.Equal(t, 0, r.rc)
		assert.Empty(t, r.mismatch)
		assert.Equal(t, int64(1+1<<10+1<<20), r.sent)
		assert.Equal(t, r.sent, r.echoed)
	}

	// A program that changes a byte: the offset is named.
	flip := exec.Command("sh", "-c", `head -c 10 && printf 'X' && head -c 1 >/dev/null && cat`)
	r := driveClient(ctx, start, flip, 0, []int{100}, 0, false, nil, time.Now().Add(20*time.Second))
	assert.Contains(t, r.mismatch, "echo differs at byte 10")

	// A program that does not exit is stopped at the deadline.
	r = driveClient(ctx, start, exec.Command("sleep", "30"), 0, []int{10}, 0, false, nil, time.Now().Add(300*time.Millisecond))
	assert.Contains(t, r.mismatch, "still running at the case's time limit")
	assert.NotEqual(t, 0, r.rc)
}

func TestParsePatternLines(t *testing.T) {
	out := "conn 1: 300 bytes sent, 300 echoed and checked, ended (shut)\n" +
		"conn 0: 300 bytes sent, 20 echoed and checked, the echo differs at byte 20\n" +
		"conn 2: 100 bytes sent, 0 echoed and checked: receive: connection reset\n" +
		"conn 9: 1 bytes sent, 1 echoed and checked, ended (shut)\n"
	got := parsePatternLines(out, 4)
	assert.Equal(t, []hostConn{
		{sent: 300, echoed: 20, mismatch: "the echo differs at byte 20"},
		{sent: 300, echoed: 300},
		{sent: 100, mismatch: "receive: connection reset"},
		{mismatch: "smcat printed no line for this connection"},
	}, got)
}

func TestOverlayInitrd(t *testing.T) {
	dir := t.TempDir()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("base archive"))
	zw.Close()
	base := filepath.Join(dir, "initrd.img")
	require.NoError(t, os.WriteFile(base, gz.Bytes(), 0o644))
	prog := filepath.Join(dir, "prog")
	require.NoError(t, os.WriteFile(prog, []byte("\x7fELF program"), 0o755))
	dst, err := overlayInitrd(base, filepath.Join(dir, "out.img"), map[string]string{"usr/bin/smcguest": prog})
	require.NoError(t, err)
	b, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(b, gz.Bytes()), "the base archive first, unchanged")
	rest := b[len(gz.Bytes()):]
	pad := 0
	for pad < len(rest) && rest[pad] == 0 {
		pad++
	}
	assert.Less(t, pad, 4)
	assert.Zero(t, (len(gz.Bytes())+pad)%4, "the second archive starts 4-byte aligned")
	got := readCpio(t, rest[pad:])
	assert.Equal(t, "\x7fELF program", string(got["usr/bin/smcguest"].data))
	assert.Equal(t, uint32(sIFREG|0o755), got["usr/bin/smcguest"].mode)

	_, err = overlayInitrd(filepath.Join(dir, "missing"), filepath.Join(dir, "x"), nil)
	assert.Error(t, err)
}

func TestSMCSetupSteps(t *testing.T) {
	// What the SMC guest's setup verifies, the way smcguest prints it.
	var pnet, ueid bool
	for _, s := range smcSetupSteps() {
		if strings.Contains(s.cmd, "pnet add "+InteropPnetID+" eth0 rxe0 1") {
			pnet = true
			assert.Empty(t, missingLines("pnetid=GOROCEPNET eth=eth0 ib=n/a port=255\npnetid=GOROCEPNET eth=n/a ib=rxe0 port=1", s.want))
		}
		if strings.Contains(s.cmd, "ueid add "+InteropUEID) {
			ueid = true
			assert.Empty(t, missingLines("ueid added: GOROCE-INTEROP-UEID\nueid=GOROCE-INTEROP-UEID", s.want))
		}
	}
	assert.True(t, pnet && ueid)
	assert.Equal(t, []string{"lgrs=0"}, missingLines("lgrs=1", []string{"lgrs=0"}))
}

func TestRunTags(t *testing.T) {
	assert.Equal(t, "", runTag{attempt: 1}.suffix())
	assert.Equal(t, "-try2", runTag{attempt: 2}.suffix())
	assert.Equal(t, "-rep007", runTag{attempt: 1, rep: 7}.suffix())
	// Every run of a case gets a port of its own, all valid, none of them
	// another case's first attempt.
	seen := map[int]bool{}
	for idx := 1; idx <= 70; idx++ {
		seen[18515+runTag{attempt: 1}.portIdx(idx)] = true
	}
	for _, idx := range []int{1, 44, 70} {
		for rep := 1; rep <= 500; rep++ {
			p := 18515 + runTag{attempt: 1, rep: rep}.portIdx(idx)
			assert.False(t, seen[p], "case %d rep %d: port %d reused", idx, rep, p)
			assert.Less(t, p, 65536)
			seen[p] = true
		}
	}
}

func TestAllCases(t *testing.T) {
	base := allCases("none")
	assert.Equal(t, cases(), base)
	nrc, nplain := 0, 0 // the RC guest's cases, and rc_pingpong's on goroce's UDP backend over IPv4
	for _, c := range base {
		if c.guest == rcGuest {
			nrc++
			if c.variant() == "" && c.tool == rcPingpong {
				nplain++
			}
		}
	}
	for _, set := range []string{"all", "quick"} {
		both := allCases(set)
		again := len(both) - len(base)
		if set == "all" {
			assert.Equal(t, nrc, again)
		} else {
			// rc_pingpong's 64 KiB case at path MTU 1024, both directions,
			// and the RDMA CM's cases cmOnSMC picks.
			ncm := 0
			for _, c := range base {
				if c.guest == rcGuest && cmOnSMC(&c) {
					ncm++
				}
			}
			assert.Positive(t, ncm)
			assert.Equal(t, 2+ncm, again)
		}
		// The RC cases, then those again on the SMC-R guest, then the SMC-R cases.
		for i, c := range both {
			switch {
			case i < nrc:
				assert.Equal(t, rcGuest, c.guest)
			case i < nrc+again:
				assert.Equal(t, smcGuest, c.guest)
				assert.Nil(t, c.smc)
				if set == "quick" && cmOnSMC(&c) {
					assert.False(t, c.lossy(), c.name())
				} else if set == "quick" {
					assert.Equal(t, rcPingpong, c.tool)
					assert.Equal(t, 1024, c.mtu)
					assert.False(t, c.lossy(), c.name())
					assert.Equal(t, 65536, c.size, c.name())
					assert.Empty(t, c.variant(), "the AF_PACKET and IPv6 cases run on the RC guest only")
				}
			default:
				assert.NotNil(t, c.smc)
			}
		}
	}
}

func TestKnownFlakeRetryExc(t *testing.T) {
	// As in a failed run under host load: goroce's message sent 1 + 7
	// times 67 ms apart, rxe's ACK of it 640 ms after the first.
	var sb strings.Builder
	sb.WriteString("4.399912 198.18.0.1.4791 > 198.18.0.11.4791: RC ACKNOWLEDGE qp 0x44 psn 13009289 aeth(ACK credits=unlimited msn=242) payload 0 icrc ok\n")
	for i := range 8 {
		fmt.Fprintf(&sb, "%.6f 198.18.0.1.4791 > 198.18.0.11.4791: RC SEND_LAST qp 0x44 psn 13009028 ackreq payload 1024 icrc ok\n", 4.415306+0.067*float64(i))
	}
	sb.WriteString("5.038689 198.18.0.11.50308 > 198.18.0.1.4791: RC ACKNOWLEDGE qp 0x11 psn 13009028 aeth(ACK credits=unlimited msn=243) payload 0 icrc ok\n")
	cc := newCaptureCheck()
	cc.addText(sb.String())
	c := testCase{tool: rcPingpong, server: guestServer, size: 65536, mtu: 1024, iters: 1000}
	r := &result{cap: cc, goroceRC: 1, goroceOut: "Failed status transport retry counter exceeded (12) for wr_id 2\n"}
	k := knownFlake(&c, r)
	assert.Contains(t, k, "goroce's SEND psn 13009028 was sent 8 times with its first ACK 623 ms after it was first sent")
	assert.Contains(t, k, "retry_cnt 7 ran out as IBTA counts it")
	// An ACK in time makes it no such case; so does another failure.
	r.goroceOut = "Failed status IBV_WC_REM_OP_ERR"
	assert.Empty(t, knownFlake(&c, r))
	cc = newCaptureCheck()
	cc.addText(strings.Replace(sb.String(), "5.038689", "4.420000", 1))
	r = &result{cap: cc, goroceRC: 1, goroceOut: "IBV_WC_RETRY_EXC_ERR"}
	assert.Empty(t, knownFlake(&c, r))
}

func TestKnownFlakeRxeCompleterStall(t *testing.T) {
	// The end of a run as captured: rxe's last SEND, goroce's ACK of it,
	// rxe's retransmission of it, then nothing from rxe for 10 s.
	text := `10.335198 198.18.0.11.50189 > 198.18.0.1.4791: RC SEND_FIRST qp 0x11 psn 16646521 payload 1024 icrc ok
10.341011 198.18.0.11.50189 > 198.18.0.1.4791: RC SEND_LAST qp 0x11 psn 16646584 ackreq payload 1024 icrc ok
10.341089 198.18.0.1.4791 > 198.18.0.11.4791: RC ACKNOWLEDGE qp 0x94 psn 16646584 aeth(ACK credits=unlimited msn=1000) payload 0 icrc ok
10.341262 198.18.0.11.50189 > 198.18.0.1.4791: RC SEND_FIRST qp 0x11 psn 16646521 payload 1024 icrc ok
10.344989 198.18.0.11.50189 > 198.18.0.1.4791: RC SEND_LAST qp 0x11 psn 16646584 ackreq payload 1024 icrc ok
20.400000 198.18.0.1.4791 > 198.18.0.11.4791: RC ACKNOWLEDGE qp 0x94 psn 1 aeth(ACK credits=unlimited msn=1) payload 0 icrc ok
`
	cc := newCaptureCheck()
	cc.addText(text)
	c := testCase{tool: rcPingpong, server: guestServer, size: 65536, mtu: 1024, iters: 1000, events: true}
	r := &result{cap: cc, guestRC: 143}
	k := knownFlake(&c, r)
	assert.Contains(t, k, "rxe's completer stall: goroce ACKed rxe's last SEND psn 16646584 at 10.341089")
	// An rxe that ended by itself (or crashed) is something else.
	assert.Empty(t, knownFlake(&c, &result{cap: cc, guestRC: 1}))
	// The 6.12 form: the ACKs after the last LAST, then a partial
	// retransmission (FIRST and MIDDLEs) and nothing more.
	cc612 := newCaptureCheck()
	cc612.addText(`5.427385 198.18.0.11.50308 > 198.18.0.1.4791: RC SEND_LAST qp 0x11 psn 11479973 ackreq payload 1024 icrc ok
5.512033 198.18.0.11.50308 > 198.18.0.1.4791: RC SEND_LAST qp 0x11 psn 11479973 ackreq payload 1024 icrc ok
5.583498 198.18.0.1.4791 > 198.18.0.11.4791: RC ACKNOWLEDGE qp 0x4a psn 11479973 aeth(ACK credits=unlimited msn=127) payload 0 icrc ok
5.584246 198.18.0.11.50308 > 198.18.0.1.4791: RC SEND_FIRST qp 0x11 psn 11479910 payload 1024 icrc ok
5.587329 198.18.0.11.50308 > 198.18.0.1.4791: RC SEND_MIDDLE qp 0x11 psn 11479951 payload 1024 icrc ok
5.604690 198.18.0.11.50308 > 198.18.0.1.4791: RC ACKNOWLEDGE qp 0x11 psn 2094880 aeth(ACK credits=unlimited msn=127) payload 0 icrc ok
`)
	c612 := testCase{tool: rcPingpong, server: goroceServer, size: 65536, mtu: 1024, iters: 1000}
	assert.Contains(t, knownFlake(&c612, &result{cap: cc612, guestRC: 143, goroceRC: 1}), "psn 11479973 at 5.583498")
	// No retransmission after the ACK: something else too.
	cc2 := newCaptureCheck()
	cc2.addText(strings.Join(strings.Split(text, "\n")[:3], "\n"))
	assert.Empty(t, knownFlake(&c, &result{cap: cc2, guestRC: 143}))
	// Not under loss (lost ACKs explain retransmissions), nor when rxe ended well.
	c.loss = 5
	assert.Empty(t, knownFlake(&c, r))
	c.loss = 0
	r.guestRC = 0
	assert.Empty(t, knownFlake(&c, r))
}

// The relay case: the kernel's client against smc-relay, which relays to
// a plain TCP echo server beside it.
func TestRelayCommands(t *testing.T) {
	var relay *testCase
	for _, c := range smcCases() {
		if c.smc.relay {
			relay = &c
		}
	}
	require.NotNil(t, relay, "a relay case is among the SMC cases")
	assert.Equal(t, goroceServer, relay.server)
	r, s := relayCommands(relay, guestEnds, 20000)
	assert.Equal(t, "smc-relay -v -ueid GOROCE-INTEROP-UEID -n 1 -linger 2s -listen smc:198.18.0.1:20000 -dial tcp:198.18.0.1:20001", strings.Join(r, " "))
	assert.Equal(t, "smcguest server 20001 -tcp -n 1 -timeout "+strconv.Itoa(relay.smcTimeout())+"s", strings.Join(s, " "))
	assert.Contains(t, relay.name(), "via smc-relay")
}
