//go:build linux

package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
)

// The QPs of the synthetic captures: goroce's and rxe's, and the source
// port both ends of that RC connection take (rdma_get_udp_sport).
const (
	goroceQP = 0x11
	rxeQP    = 0x2a
)

var connPort = rocev2.FlowLabelSourcePort(rocev2.CalcFlowLabel(goroceQP, rxeQP))

// pkt is one synthetic rocedump -json line's fields.
type pkt struct {
	src    string
	opcode uint8 // 0x04 RC SEND_ONLY, 0x11 RC ACKNOWLEDGE, 0x64 UD SEND_ONLY
	dqpn   uint32
	sqpn   uint32 // UD
	sport  uint16
	ipid   int // -1: an IPv6 packet
	df     bool
	label  uint32 // IPv6
	ttl    int    // 0: 64, the route's, as both sides send it
}

func (p pkt) json(frame int) string {
	s := fmt.Sprintf(`{"frame":%d,"opcode":%d,"opname":"x","dqpn":%d,"psn":1,`, frame, p.opcode, p.dqpn)
	if p.opcode>>5 == transportUD {
		s += fmt.Sprintf(`"deth":{"qkey":1,"sqpn":%d},`, p.sqpn)
	}
	ttl := 64
	if p.ttl != 0 {
		ttl = p.ttl
	}
	s += fmt.Sprintf(`"icrc":0,"icrc_ok":true,"src":%q,"dst":"x","sport":%d,"ttl":%d`, p.src, p.sport, ttl)
	if p.ipid >= 0 {
		s += fmt.Sprintf(`,"ipid":%d,"df":%t}`, p.ipid, p.df)
	} else {
		s += fmt.Sprintf(`,"flowlabel":%d}`, p.label)
	}
	return s
}

// rxeSend is rxe's SEND to goroce's QP on the connection's port.
func rxeSend(src string, ipid int) pkt {
	return pkt{src: src, opcode: 0x04, dqpn: goroceQP, sport: connPort, ipid: ipid, df: true}
}

// goroceRun is goroce's n packets to rxe's QP with consecutive IPv4 IDs
// from id (or IPv6 ones with label), changed by mod.
func goroceRun(n, id int, ipv6 bool, mod func(i int, p *pkt)) []pkt {
	var ps []pkt
	for i := 0; i < n; i++ {
		p := pkt{src: hostIP, opcode: 0x04, dqpn: rxeQP, sport: connPort, ipid: (id + i) & 0xFFFF, df: true}
		if ipv6 {
			p.src, p.ipid, p.label = hostLinkLocal, -1, rocev2.CalcFlowLabel(goroceQP, rxeQP)
		}
		if mod != nil {
			mod(i, &p)
		}
		ps = append(ps, p)
	}
	return ps
}

func TestCheckWire(t *testing.T) {
	label := rocev2.CalcFlowLabel(goroceQP, rxeQP)
	skipID := func(i int, p *pkt) {
		if i == 2 {
			p.ipid++
		}
	}
	ud := func(_ int, p *pkt) { p.opcode, p.sqpn, p.sport = 0x64, 0x33, rocev2.QPSourcePort(0x33) }
	cases := []struct {
		name    string
		c       testCase
		pkts    []pkt
		dropped int
		fails   []string // substrings, one per failure
		note    string   // a substring of the note
	}{
		{"afpacket: rxe's port, consecutive IDs, DF", testCase{backend: afpacket},
			append([]pkt{rxeSend(guestIP, 7)}, goroceRun(3, 100, false, nil)...), 0, nil,
			fmt.Sprintf("goroce's 3 frames: source port %d, IPv4 IDs 100..102; rxe's: %d; TTL goroce 64, rxe 64", connPort, connPort)},
		{"afpacket: the address vector's TTL instead of the route's", testCase{backend: afpacket},
			append([]pkt{rxeSend(guestIP, 7)}, goroceRun(3, 100, false, func(_ int, p *pkt) { p.ttl = 1 })...), 0,
			[]string{"goroce's packets leave with TTL 1, rxe's with 64 (the route's)"}, ""},
		{"afpacket: IDs wrap", testCase{backend: afpacket},
			append([]pkt{rxeSend(guestIP, 7)}, goroceRun(3, 0xFFFF, false, nil)...), 0, nil, "IPv4 IDs 65535..1"},
		{"afpacket: the fixed port of a UDP socket", testCase{backend: afpacket},
			append([]pkt{rxeSend(guestIP, 7)}, goroceRun(3, 100, false, func(_ int, p *pkt) { p.sport = rocev2.UDPPort })...), 0,
			[]string{fmt.Sprintf("3 of 3 goroce packets have a UDP source port other than rxe's for the QP (first: frame 2: 4791, want %d (QPs 0x11, 0x2a))", connPort)}, ""},
		{"afpacket: one packet on another port", testCase{backend: afpacket},
			append([]pkt{rxeSend(guestIP, 7)}, goroceRun(3, 100, false, func(i int, p *pkt) {
				if i == 1 {
					p.sport++
				}
			})...), 0, []string{"1 of 3 goroce packets have a UDP source port"}, ""},
		{"afpacket: no rxe packet to learn goroce's QP from", testCase{backend: afpacket},
			goroceRun(2, 100, false, nil), 0, []string{"which the capture does not show"}, ""},
		{"afpacket: IDs all zero", testCase{backend: afpacket},
			append([]pkt{rxeSend(guestIP, 7)}, goroceRun(3, 0, false, func(_ int, p *pkt) { p.ipid = 0 })...), 0,
			[]string{"IPv4 IDs are not one sequence: 2 breaks in 3 packets (first: frame 3: ID 0 after 0; tcpdump dropped 0)"}, ""},
		{"afpacket: an ID skipped", testCase{backend: afpacket},
			append([]pkt{rxeSend(guestIP, 7)}, goroceRun(3, 100, false, skipID)...), 0,
			[]string{"1 breaks in 3 packets (first: frame 4: ID 103 after 101"}, ""},
		{"afpacket: an ID skipped where tcpdump dropped", testCase{backend: afpacket},
			append([]pkt{rxeSend(guestIP, 7)}, goroceRun(3, 100, false, skipID)...), 1, nil, ""},
		{"afpacket: IDs counting down", testCase{backend: afpacket},
			append([]pkt{rxeSend(guestIP, 7)}, goroceRun(3, 100, false, func(i int, p *pkt) { p.ipid = 100 - i })...), 2,
			[]string{"2 breaks in 3 packets"}, ""},
		{"afpacket: no DF", testCase{backend: afpacket},
			append([]pkt{rxeSend(guestIP, 7)}, goroceRun(3, 100, false, func(i int, p *pkt) { p.df = i != 2 })...), 0,
			[]string{"1 of 3 goroce packets lack DF"}, ""},
		{"afpacket: UD from its own QP's port", testCase{backend: afpacket},
			append([]pkt{rxeSend(guestIP, 7)}, goroceRun(2, 100, false, ud)...), 0, nil, ""},
		{"afpacket: UD from the wrong port", testCase{backend: afpacket},
			append([]pkt{rxeSend(guestIP, 7)}, goroceRun(2, 100, false, func(i int, p *pkt) { ud(i, p); p.sport = connPort })...), 0,
			[]string{fmt.Sprintf("want %d (UD QP 0x33's)", rocev2.QPSourcePort(0x33))}, ""},
		{"afpacket: rxe on another port is noted, not failed", testCase{backend: afpacket},
			append([]pkt{func() pkt { p := rxeSend(guestIP, 7); p.sport = 0xC000; return p }()}, goroceRun(2, 100, false, nil)...), 0,
			nil, "(not the same: rxe did not take the connection's flow label port)"},
		{"afpacket ipv6: the port's flow label", testCase{backend: afpacket, ipv6: true},
			append([]pkt{rxeSend(guestLinkLocal, -1)}, goroceRun(3, 0, true, nil)...), 0, nil,
			fmt.Sprintf("goroce's 3 frames: source port %d; rxe's: %d", connPort, connPort)},
		{"afpacket ipv6: flow label 0", testCase{backend: afpacket, ipv6: true},
			append([]pkt{rxeSend(guestLinkLocal, -1)}, goroceRun(3, 0, true, func(_ int, p *pkt) { p.label = 0 })...), 0,
			[]string{fmt.Sprintf("3 of 3 goroce packets have an IPv6 flow label other than the one of their source port (first: frame 2: 0x0, want %#x)", label)}, ""},
		{"ipv6: a packet over IPv4", testCase{ipv6: true},
			append([]pkt{rxeSend(guestLinkLocal, -1)}, goroceRun(1, 5, false, nil)...), 0,
			[]string{"frame 2: an IPv6 case's RoCE packet went over IPv4"}, ""},
		{"ipv6 on UDP: ports not checked", testCase{ipv6: true},
			append([]pkt{rxeSend(guestLinkLocal, -1)}, goroceRun(2, 0, true, func(_ int, p *pkt) { p.sport, p.label = rocev2.UDPPort, 0 })...), 0, nil, ""},
		{"UDP backend: nothing checked", testCase{},
			append([]pkt{rxeSend(guestIP, 7)}, goroceRun(3, 0, false, func(_ int, p *pkt) { p.sport, p.ipid, p.df = rocev2.UDPPort, 0, false })...), 0, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cc := newCaptureCheck()
			cc.alias = tc.c.wireAliases()
			var lines []string
			for i, p := range tc.pkts {
				lines = append(lines, p.json(i+1))
			}
			require.NoError(t, cc.addJSON(strings.Join(lines, "\n")))
			require.Len(t, cc.wire, len(tc.pkts))
			cc.dropped = tc.dropped
			fails, notes := cc.checkWire(&tc.c)
			require.Len(t, fails, len(tc.fails), "%q", fails)
			for i, want := range tc.fails {
				assert.Contains(t, fails[i], want)
			}
			if tc.note != "" {
				require.Len(t, notes, 1)
				assert.Contains(t, notes[0], tc.note)
			}
			if tc.c.backend == "" {
				assert.Empty(t, notes)
			}
		})
	}
}

// An IPv6 case's link-local addresses count as the roles' addresses: the
// packets per side, and the end-race bookkeeping.
func TestCaptureAliases(t *testing.T) {
	cc := newCaptureCheck()
	cc.alias = (&testCase{ipv6: true}).wireAliases()
	cc.addText(`0.000000 fe80::5054:ff:fe12:1.52000 > fe80::5054:ff:fe12:b.4791: RC SEND_ONLY qp 0x2a psn 5 payload 1024 icrc ok
0.000100 fe80::5054:ff:fe12:b.52000 > fe80::5054:ff:fe12:1.4791: RC ACKNOWLEDGE qp 0x11 psn 5 aeth(ACK msn 1) icrc ok
0.000200 fe80::5054:ff:fe12:b.52000 > fe80::5054:ff:fe12:1.4791: RC SEND_ONLY qp 0x11 psn 9 payload 1024 icrc ok`)
	assert.Equal(t, map[string]int{hostIP: 1, guestIP: 2}, cc.bySrc)
	assert.True(t, cc.lastReqAcked[hostIP])
	assert.Equal(t, uint32(9), cc.lastReq[guestIP])
	assert.False(t, cc.lastReqAcked[guestIP])

	plain := newCaptureCheck()
	plain.addText(`0.000000 fe80::5054:ff:fe12:1.52000 > fe80::5054:ff:fe12:b.4791: RC SEND_ONLY qp 0x2a psn 5 payload 1024 icrc ok`)
	assert.Equal(t, map[string]int{hostLinkLocal: 1}, plain.bySrc)
}

// The variants' command lines: goroce's backend options, and over IPv6
// the guest's link-local GID 0 against goroce's device on br0's link-local
// address, the out-of-band exchange staying on IPv4.
func TestBackendCaseCommands(t *testing.T) {
	base := testCase{tool: rcPingpong, size: 4096, iters: 200, mtu: 1024}
	cases := []struct {
		name          string
		backend       string
		ipv6          bool
		server        side
		ends          endpoints
		guest, goroce string
	}{
		{"afpacket, rxe serves", afpacket, false, guestServer, guestEnds,
			"ibv_rc_pingpong -d rxe0 -i 1 -g 1 -p 18517 -s 4096 -m 1024 -n 200",
			"rc_pingpong -d 198.18.0.1 -g 1 -timeout 30s -p 18517 -s 4096 -m 1024 -n 200 -backend afpacket -i br0 198.18.0.11"},
		{"ipv6 on UDP, goroce serves", "", true, goroceServer, guestEnds,
			"ibv_rc_pingpong -d rxe0 -i 1 -g 0 -p 18517 -s 4096 -m 1024 -n 200 198.18.0.1",
			"rc_pingpong -d fe80::5054:ff:fe12:1%br0 -g 1 -timeout 30s -p 18517 -s 4096 -m 1024 -n 200"},
		{"ipv6 on afpacket, rxe serves", afpacket, true, guestServer, guestEnds,
			"ibv_rc_pingpong -d rxe0 -i 1 -g 0 -p 18517 -s 4096 -m 1024 -n 200",
			"rc_pingpong -d fe80::5054:ff:fe12:1%br0 -g 1 -timeout 30s -p 18517 -s 4096 -m 1024 -n 200 -backend afpacket -i br0 198.18.0.11"},
		{"-list -peer without goroce's IPv6 address or interface", afpacket, true, goroceServer,
			endpoints{peerDev: "mlx5_0", peerGID: 3, peerAddr: "192.0.2.7", goroceAddr: "192.0.2.8"},
			"ibv_rc_pingpong -d mlx5_0 -i 1 -g 0 -p 18517 -s 4096 -m 1024 -n 200 192.0.2.8",
			"rc_pingpong -d GOROCE_IPV6_ADDR -g 1 -timeout 30s -p 18517 -s 4096 -m 1024 -n 200 -backend afpacket -i IFACE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			c.backend, c.ipv6, c.server = tc.backend, tc.ipv6, tc.server
			g, h := c.commands(2, tc.ends)
			assert.Equal(t, tc.guest, strings.Join(g, " "))
			assert.Equal(t, tc.goroce, strings.Join(h, " "))
		})
	}
}

// The new cases have names (and so files) of their own, run on the RC
// guest only, and keep the plain cases' names as they were.
func TestBackendCaseNames(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range allCases("quick") {
		if c.smc != nil {
			continue
		}
		key := c.slug() + " " + c.guest.String()
		assert.False(t, seen[key], "two cases named %s", key)
		seen[key] = true
		if c.variant() != "" {
			assert.Equal(t, rcGuest, c.guest, c.name())
		}
	}
	c := testCase{tool: rcPingpong, size: 1, iters: 200, mtu: 1024, loss: 5, lossIn: 5}
	assert.Equal(t, "rc_pingpong s=1 m=1024 n=200 loss=5% lossin=5%", c.name())
	c.backend, c.ipv6 = afpacket, true
	assert.Equal(t, "rc_pingpong s=1 m=1024 n=200 loss=5% lossin=5% afpacket ipv6", c.name())
	assert.Len(t, backendCases(), 26)
}
