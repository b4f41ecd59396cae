//go:build linux

package main

// These tests cover the harness's own logic without QEMU, root or a
// network: `make test` runs them. The harness itself runs with `make
// interop`.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAptDepends(t *testing.T) {
	out := `iproute2
 |Depends: debconf
  Depends: <debconf-2.0>
    cdebconf
    debconf
  Depends: libbpf1
  Depends: libc6:any
  Recommends: libatm1
  PreDepends: libcap2
libtirpc3
  Depends: <libfoo>
    libfoo1
  Depends: libgssapi-krb5-2
`
	got := parseAptDepends(out)
	assert.Equal(t, []string{"debconf", "libbpf1", "libc6", "libcap2"}, got["iproute2"])
	assert.Equal(t, []string{"libfoo1", "libgssapi-krb5-2"}, got["libtirpc3"])
}

func TestParseModinfoDeps(t *testing.T) {
	info := []byte("license=GPL\x00depends=ib_core,ib_uverbs,ip6_udp_tunnel\x00softdep=pre: crc32 post: foo\x00name=rdma_rxe\x00")
	assert.Equal(t, []string{"ib_core", "ib_uverbs", "ip6_udp_tunnel", "crc32"}, parseModinfoDeps(info))
	assert.Empty(t, parseModinfoDeps([]byte("depends=\x00")))
}

// readCpio parses a newc archive back into its entries.
func readCpio(t *testing.T, b []byte) map[string]cpioEntry {
	t.Helper()
	got := map[string]cpioEntry{}
	for off := 0; ; {
		require.GreaterOrEqual(t, len(b)-off, 110)
		h := string(b[off : off+110])
		require.Equal(t, "070701", h[:6])
		field := func(i int) int {
			v, err := strconv.ParseUint(h[6+8*i:14+8*i], 16, 32)
			require.NoError(t, err)
			return int(v)
		}
		mode, size, nameSize := field(1), field(6), field(11)
		name := string(b[off+110 : off+110+nameSize-1])
		off = (off + 110 + nameSize + 3) &^ 3
		data := b[off : off+size]
		off = (off + size + 3) &^ 3
		if name == "TRAILER!!!" {
			require.Equal(t, len(b), off)
			return got
		}
		got[name] = cpioEntry{mode: uint32(mode), data: data}
	}
}

func TestCpioArchive(t *testing.T) {
	a := newCpioArchive()
	a.addFile("/usr/bin/prog", 0o755, []byte("hello"))
	a.addSymlink("lib64/ld.so", "/lib/x86_64-linux-gnu/ld.so")
	a.mkdirAll("proc")
	a.addFile("init", 0o755, []byte("#!/bin/sh\n"))
	var buf bytes.Buffer
	require.NoError(t, a.writeTo(&buf))
	got := readCpio(t, buf.Bytes())
	assert.Equal(t, uint32(sIFREG|0o755), got["usr/bin/prog"].mode)
	assert.Equal(t, "hello", string(got["usr/bin/prog"].data))
	assert.Equal(t, uint32(sIFDIR|0o755), got["usr"].mode)
	assert.Equal(t, uint32(sIFDIR|0o755), got["usr/bin"].mode)
	assert.Equal(t, uint32(sIFLNK|0o777), got["lib64/ld.so"].mode)
	assert.Equal(t, "/lib/x86_64-linux-gnu/ld.so", string(got["lib64/ld.so"].data))
	assert.Contains(t, got, "proc")
	assert.Contains(t, got, "init")
	assert.True(t, a.has("/usr/bin/prog"))
	assert.Equal(t, 5+10+len("/lib/x86_64-linux-gnu/ld.so"), a.size())
}

func TestParsePingpong(t *testing.T) {
	out := `  local address:  LID 0x0000, QPN 0x000011, PSN 0x4de1f3, GID ::ffff:198.18.0.11
  remote address: LID 0x0000, QPN 0x000011, PSN 0x8b8f5b, GID ::ffff:198.18.0.1
8192000 bytes in 0.12 seconds = 546.13 Mbit/sec
1000 iters in 0.12 seconds = 120.00 usec/iter
`
	p := parsePingpong(out)
	assert.Equal(t, perf{ok: true, bytes: 8192000, secs: 0.12, mbits: 546.13, iters: 1000, usecIter: 120}, p)
	assert.False(t, parsePingpong("Failed status transport retry counter exceeded (12) for wr_id 2\n").ok)
}

func TestShellQuote(t *testing.T) {
	assert.Equal(t, "-d rxe0 -s 4096 198.18.0.1", shellQuote([]string{"-d", "rxe0", "-s", "4096", "198.18.0.1"}))
	assert.Equal(t, `'' 'a b' 'it'\''s' '$x'`, shellQuote([]string{"", "a b", "it's", "$x"}))
}

func TestExitStatusAndStripLines(t *testing.T) {
	out := "line\nGOROCE-EXIT 143\nmore"
	assert.Equal(t, 143, exitStatus(out, "GOROCE-EXIT "))
	assert.Equal(t, -1, exitStatus("nothing", "GOROCE-EXIT "))
	assert.Equal(t, -1, exitStatus("GOROCE-EXIT -1", "GOROCE-EXIT "))
	assert.Equal(t, "line\nmore", stripLines(out, "GOROCE-EXIT "))
}

func TestCases(t *testing.T) {
	seen := map[string]bool{}
	cs := cases()
	require.NotEmpty(t, cs)
	sizes := map[int]bool{}
	mtus := map[int]bool{}
	var dirs [2]int
	events, lossy, n1000 := false, false, false
	for i, c := range cs {
		if c.smc != nil {
			continue // TestSMCCases
		}
		s := c.slug()
		assert.False(t, seen[s], "duplicate case %s", s)
		seen[s] = true
		assert.NotContains(t, s, " ")
		assert.Less(t, 18515+i+1, 65536)
		sizes[c.size], mtus[c.mtu] = true, true
		dirs[c.server]++
		events = events || c.events
		lossy = lossy || c.loss > 0
		n1000 = n1000 || c.iters >= 1000
		assert.Equal(t, map[bool]int{false: 1500, true: 9000}[c.mtu > 1024], c.nicMTU())
	}
	// What issue 5 asks for.
	for _, s := range []int{1, 1024, 4096, 65536} {
		assert.True(t, sizes[s], "size %d", s)
	}
	assert.True(t, mtus[1024] && mtus[4096])
	assert.Equal(t, dirs[0], dirs[1])
	assert.True(t, events && lossy && n1000)
}

func TestPingpongArgs(t *testing.T) {
	c := testCase{tool: rcPingpong, size: 4096, iters: 1000, mtu: 1024, events: true}
	assert.Equal(t, []string{"-p", "18520", "-s", "4096", "-m", "1024", "-n", "1000", "-e"}, pingpongArgs(&c, 18520))
	g, h := c.commands(5, guestEnds)
	assert.Equal(t, "ibv_rc_pingpong -d rxe0 -i 1 -g 1 -p 18520 -s 4096 -m 1024 -n 1000 -e", strings.Join(g, " "))
	assert.Equal(t, "rc_pingpong -d 198.18.0.1 -g 1 -timeout 32s -p 18520 -s 4096 -m 1024 -n 1000 -e 198.18.0.11", strings.Join(h, " "))
	c.server = goroceServer
	g, h = c.commands(5, endpoints{peerDev: "mlx5_0", peerGID: 3, peerAddr: "192.0.2.7", goroceAddr: "192.0.2.8"})
	assert.Equal(t, "ibv_rc_pingpong -d mlx5_0 -i 1 -g 3 -p 18520 -s 4096 -m 1024 -n 1000 -e 192.0.2.8", strings.Join(g, " "))
	assert.Equal(t, "rc_pingpong -d 192.0.2.8 -g 1 -timeout 32s -p 18520 -s 4096 -m 1024 -n 1000 -e", strings.Join(h, " "))
	c.server = guestServer
	assert.Equal(t, "rc_pingpong s=4096 m=1024 n=1000 -e", c.name())
	c.loss, c.lossIn = 5, 5
	assert.Equal(t, "rc_pingpong_s4096_m1024_n1000_e_loss5pct_lossin5pct_rxesrv", c.slug())
}

func TestCaptureCheckParsing(t *testing.T) {
	cc := newCaptureCheck()
	require.NoError(t, cc.addJSON(`{"frame":1,"opcode":4,"opname":"SEND_ONLY","icrc_ok":true}
{"frame":2,"opcode":17,"opname":"ACKNOWLEDGE","aeth":{"syndrome":96,"msn":0,"kind":"nak","code":0},"icrc_ok":true}
{"frame":3,"opcode":17,"opname":"ACKNOWLEDGE","aeth":{"syndrome":97,"msn":0,"kind":"nak","code":1},"icrc_ok":false}
{"frame":4,"opcode":17,"opname":"ACKNOWLEDGE","aeth":{"syndrome":32,"msn":0,"kind":"rnr","code":0}}
{"frame":5,"smc":{"clc":true}}
`))
	assert.Equal(t, 4, cc.packets)
	assert.Equal(t, 1, cc.icrcBad)
	assert.Equal(t, 1, cc.unverifiable)
	assert.Equal(t, 1, cc.psnNAKs)
	assert.Equal(t, 1, cc.otherNAKs)
	assert.Equal(t, 1, cc.rnrNAKs)

	cc.addText(`0.000000 198.18.0.1.4791 > 198.18.0.11.4791: RC SEND_FIRST qp 0x11 psn 16777214 payload 1024 icrc ok
0.000001 198.18.0.1.4791 > 198.18.0.11.4791: RC SEND_LAST qp 0x11 psn 16777215 ackreq payload 1024 icrc ok
0.000002 198.18.0.11.49152 > 198.18.0.1.4791: RC ACKNOWLEDGE qp 0x13 psn 16777215 aeth(ACK credits=unlimited msn=1) payload 0 icrc ok
0.000003 198.18.0.11.49152 > 198.18.0.1.4791: RC SEND_ONLY qp 0x13 psn 5 ackreq payload 1 icrc ok
0.000004 198.18.0.1.4791 > 198.18.0.11.4791: RC ACKNOWLEDGE qp 0x11 psn 4 aeth(NAK psn-sequence msn=1) payload 0 icrc ok
`)
	assert.Equal(t, map[string]int{"198.18.0.1": 3, "198.18.0.11": 2}, cc.bySrc)
	assert.Equal(t, uint32(16777215), cc.lastReq["198.18.0.1"])
	assert.True(t, cc.lastReqAcked["198.18.0.1"])
	assert.Equal(t, uint32(5), cc.lastReq["198.18.0.11"])
	assert.False(t, cc.lastReqAcked["198.18.0.11"], "a NAK is no ACK")

	cc.addStats("     dst host  dst qp  packets  bytes  retrans  naks  rnr naks\n        total               20  10600        7     0         0\n")
	assert.Equal(t, 7, cc.retrans)

	assert.True(t, psnAtOrAfter(0, 0xFFFFFF))
	assert.True(t, psnAtOrAfter(5, 5))
	assert.False(t, psnAtOrAfter(4, 5))
}

func TestEndRace(t *testing.T) {
	done := perf{ok: true, iters: 100}
	c := testCase{tool: rcPingpong, server: guestServer, iters: 100, loss: 5}
	// goroce's ACK of rxe's last SEND never showed: rxe (server) gave up.
	r := &result{guestRC: 143, guestOut: "Terminated", goroceRC: 0, goroce: done,
		cap: &captureCheck{lastReq: map[string]uint32{guestIP: 7}, lastReqAcked: map[string]bool{}}}
	why, ok := endRace(&c, r)
	assert.True(t, ok)
	assert.Contains(t, why, "rxe (the server, exit 143)")

	// The same in a perftest case is a failure: perftest ends with a
	// hand-shake after its last completion.
	pc := c
	pc.tool = ibReadBW
	_, ok = endRace(&pc, r)
	assert.False(t, ok)

	// The ACK is on the wire and nothing drops it after the capture: rxe's own failure.
	r.cap.lastReqAcked[guestIP] = true
	_, ok = endRace(&c, r)
	assert.False(t, ok)
	// ... unless the guest drops what it receives.
	c.lossIn = 5
	_, ok = endRace(&c, r)
	assert.True(t, ok)

	// goroce (client) gave up on retries after rxe (server) finished.
	c = testCase{tool: rcPingpong, server: guestServer, iters: 100, loss: 5}
	r = &result{guestRC: 0, guest: done, goroceRC: 1, goroceOut: "Failed status transport retry counter exceeded (12) for wr_id 2",
		cap: &captureCheck{lastReq: map[string]uint32{hostIP: 9}, lastReqAcked: map[string]bool{hostIP: false}}}
	why, ok = endRace(&c, r)
	assert.True(t, ok)
	assert.Contains(t, why, "goroce (the client, exit 1)")
	// goroce got the ACK (it is on the wire, and the host side loses nothing): a goroce bug.
	r.cap.lastReqAcked[hostIP] = true
	_, ok = endRace(&c, r)
	assert.False(t, ok)

	// Not in loss-free cases, nor when the other side did not finish, nor
	// for other failures.
	r.cap.lastReqAcked[hostIP] = false
	c.loss = 0
	_, ok = endRace(&c, r)
	assert.False(t, ok)
	c.loss = 5
	r.guest = perf{ok: true, iters: 99}
	_, ok = endRace(&c, r)
	assert.False(t, ok)
	r.guest = done
	r.goroceOut = "panic: runtime error"
	_, ok = endRace(&c, r)
	assert.False(t, ok)
}

// fakeGuest serves the job protocol of init.sh on conn: it answers each
// "J ID LEN CMD" line with handle(CMD)'s output and status, and garbles
// the first command whose text is "garble me".
func fakeGuest(t *testing.T, conn net.Conn, handle func(cmd string) (string, int)) {
	fmt.Fprintln(conn, "GOROCE-READY 6.1.0-test")
	rd := bufio.NewReader(conn)
	garbled := false
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimSuffix(line, "\n")
		f := strings.SplitN(line, " ", 4)
		if len(f) != 4 || f[0] != "J" || strconv.Itoa(len(f[3])) != f[2] {
			fmt.Fprintln(conn, "GOROCE-BAD")
			continue
		}
		if f[3] == "garble me" && !garbled {
			garbled = true
			fmt.Fprintln(conn, "GOROCE-BAD")
			continue
		}
		out, rc := handle(f[3])
		fmt.Fprintf(conn, "%s\nGOROCE-END %s %d\n", out, f[1], rc)
	}
}

func TestJobChannel(t *testing.T) {
	host, guest := net.Pipe()
	defer host.Close()
	go fakeGuest(t, guest, func(cmd string) (string, int) {
		switch cmd {
		case "echo hi":
			return "hi\n", 0
		case "noeol":
			return "partial", 3
		case "hang":
			time.Sleep(time.Hour)
		}
		return "", 0
	})
	v := &vm{conn: host, rd: bufio.NewReader(host)}
	line, err := v.rd.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "GOROCE-READY 6.1.0-test\n", line)

	ctx := context.Background()
	out, rc, err := v.run(ctx, 5*time.Second, "echo hi")
	require.NoError(t, err)
	assert.Equal(t, "hi", out)
	assert.Equal(t, 0, rc)

	out, rc, err = v.run(ctx, 5*time.Second, "noeol")
	require.NoError(t, err)
	assert.Equal(t, "partial", out)
	assert.Equal(t, 3, rc)

	out, err = v.mustRun(ctx, 5*time.Second, "noeol")
	assert.ErrorContains(t, err, "exited with status 3")
	assert.Equal(t, "partial", out)

	out, rc, err = v.run(ctx, 5*time.Second, "")
	require.NoError(t, err)
	assert.Equal(t, "", out)
	assert.Equal(t, 0, rc)

	// A garbled line is sent again.
	_, rc, err = v.run(ctx, 5*time.Second, "garble me")
	require.NoError(t, err)
	assert.Equal(t, 0, rc)
	assert.Equal(t, 1, v.garbled)

	_, _, err = v.run(ctx, 5*time.Second, "two\nlines")
	assert.ErrorContains(t, err, "line break")

	// A command that does not finish breaks the channel for good.
	_, _, err = v.run(ctx, 100*time.Millisecond, "hang")
	assert.ErrorContains(t, err, "did not finish")
	_, _, err = v.run(ctx, time.Second, "echo hi")
	assert.ErrorContains(t, err, "unusable")
}
