package afpacket

import (
	"encoding/binary"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/bpf"

	"github.com/goroce/goroce/internal/rxevectors"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

var (
	local4 = netip.MustParseAddr("198.18.0.1")
	peer4  = netip.MustParseAddr("198.18.0.2")
	local6 = netip.MustParseAddr("2001:db8::1")
	peer6  = netip.MustParseAddr("2001:db8::2")
	macA   = [6]byte{0x02, 0, 0, 0, 0, 0xa}
	macB   = [6]byte{0x02, 0, 0, 0, 0, 0xb}
)

// roce returns an RC SEND_ONLY packet with n payload bytes, ICRC unsealed.
func roce(t testing.TB, n int) []byte {
	t.Helper()
	f := rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: 0x11, PSN: 7, AckReq: true}
	pkt, err := f.Append(nil, make([]byte, n))
	require.NoError(t, err)
	return pkt
}

// frameFrom builds the frame peer sends to local: the headers the send
// path writes and a sealed packet of n payload bytes.
func frameFrom(t testing.TB, from, to netip.Addr, n int) []byte {
	t.Helper()
	pkt := roce(t, n)
	h := header{srcMAC: macB, dstMAC: macA, src: from, dst: to, srcPort: 0xC121, dstPort: rocev2.UDPPort,
		ipv4ID: 0x1234, hopLimit: 64, flowLabel: 0x121}
	hdr := make([]byte, maxHeaderLen)
	hn := h.put(hdr, len(pkt))
	seal(hdr[:hn], pkt)
	return append(hdr[:hn:hn], pkt...)
}

func check4() *rxCheck { return &rxCheck{local: local4, maxFrame: ethHeaderLen + 1500} }
func check6() *rxCheck { return &rxCheck{local: local6, maxFrame: ethHeaderLen + 1500} }

func TestHeadersRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to netip.Addr
		c        *rxCheck
	}{
		{"IPv4", peer4, local4, check4()},
		{"IPv6", peer6, local6, check6()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fr := frameFrom(t, tc.from, tc.to, 100)
			// An independent parser agrees on the layout and the ICRC.
			var f rocev2.Frame
			require.NoError(t, rocev2.ParseEthernetFrame(fr, rocev2.UDPPort, &f))
			match, ok := f.VerifyICRC()
			assert.True(t, ok && match, "ICRC over the real headers")
			assert.Equal(t, uint16(0xC121), f.SrcPort())
			if tc.from.Is4() {
				assert.Equal(t, uint16(0x1234), binary.BigEndian.Uint16(f.IP[4:]), "IPv4 ID")
				assert.Equal(t, uint16(rocev2.IPv4DontFragment), binary.BigEndian.Uint16(f.IP[6:]), "DF")
				assert.Zero(t, rocev2.IPv4Checksum(f.IP), "header checksum")
				assert.Equal(t, uint8(64), f.IP[8], "TTL")
			} else {
				assert.Equal(t, uint32(0x121), binary.BigEndian.Uint32(f.IP[0:])&0xFFFFF, "flow label")
				assert.Equal(t, uint8(64), f.IP[7], "hop limit")
			}
			assert.Zero(t, binary.BigEndian.Uint16(f.UDP[6:]), "UDP checksum 0, as rxe sends")

			var d backend.Incoming
			tc.c.check(rxFrame{data: fr}, &d)
			require.Zero(t, d.Drop, "%v", d.Drop)
			assert.Equal(t, backend.ICRCVerified, d.ICRC)
			assert.Equal(t, netip.AddrPortFrom(tc.from, 0xC121), d.Src)
			assert.Equal(t, f.Payload, d.Buf)
			if tc.from.Is4() {
				assert.Equal(t, uint16(0x1234), d.IPv4ID)
			}
			assert.Equal(t, uint8(64), d.TTL, "TTL or hop limit, for a UD receive's GRH area")
		})
	}
}

// TestCheckRxeFrames runs every RoCEv2 frame of the kernel rxe captures
// through the receive checks, as the device its frames were sent to: each
// one's ICRC verifies over its real IPv4 header (rxe's IDs are not 0).
func TestCheckRxeFrames(t *testing.T) {
	all, err := rxevectors.All(filepath.Join("..", "..", "..", "conformance", "testdata", "rxe"))
	require.NoError(t, err)
	n := 0
	for name, frames := range all {
		for i, fr := range frames {
			var f rocev2.Frame
			if rocev2.ParseEthernetFrame(fr, rocev2.UDPPort, &f) != nil {
				continue
			}
			c := &rxCheck{local: f.Dst(), maxFrame: ethHeaderLen + 1500}
			var d backend.Incoming
			c.check(rxFrame{data: fr}, &d)
			if !assert.Zero(t, d.Drop, "%s frame %d: %v", name, i, d.Drop) {
				continue
			}
			assert.Equal(t, backend.ICRCVerified, d.ICRC, "%s frame %d", name, i)
			assert.Equal(t, binary.BigEndian.Uint16(f.IP[4:]), d.IPv4ID)
			assert.Equal(t, f.IP[8], d.TTL)
			assert.Equal(t, f.IP[1], d.TOS)
			n++
		}
	}
	assert.Equal(t, 366, n, "every RoCEv2 frame of the captures")
}

// mutate returns a copy of fr changed by f.
func mutate(fr []byte, f func([]byte) []byte) []byte {
	return f(append([]byte(nil), fr...))
}

// refresh4 recomputes the IPv4 header checksum after a change.
func refresh4(b []byte) []byte {
	ihl := int(b[14]&0xf) * 4
	b[24], b[25] = 0, 0
	binary.BigEndian.PutUint16(b[24:], rocev2.IPv4Checksum(b[14:14+ihl]))
	return b
}

// hostileFrames is every kind of frame the interface may deliver that the
// device must drop and count, with the reason it is counted under.
func hostileFrames(t testing.TB) []struct {
	name   string
	c      *rxCheck
	f      rxFrame
	reason rocev2.ParseError
} {
	v4 := frameFrom(t, peer4, local4, 64)
	v6 := frameFrom(t, peer6, local6, 64)
	big := frameFrom(t, peer4, local4, 1024)
	type tc = struct {
		name   string
		c      *rxCheck
		f      rxFrame
		reason rocev2.ParseError
	}
	c4, c6 := check4(), check6()
	fr := func(b []byte) rxFrame { return rxFrame{data: b} }
	return []tc{
		{"empty", c4, fr(nil), rocev2.ErrFrameTruncated},
		{"Ethernet header cut", c4, fr(v4[:13]), rocev2.ErrFrameTruncated},
		{"IPv4 header cut", c4, fr(v4[:14+19]), rocev2.ErrFrameTruncated},
		{"IPv4 total length beyond the frame", c4, fr(v4[:len(v4)-1]), rocev2.ErrFrameTruncated},
		{"IPv4 IHL below 5", c4, fr(mutate(v4, func(b []byte) []byte { b[14] = 0x44; return refresh4(b) })), rocev2.ErrFrameTruncated},
		{"IPv4 version 5", c4, fr(mutate(v4, func(b []byte) []byte { b[14] = 0x55; return refresh4(b) })), rocev2.ErrFrameTruncated},
		{"IPv4 total length below the header", c4, fr(mutate(v4, func(b []byte) []byte { b[16], b[17] = 0, 10; return refresh4(b) })), rocev2.ErrFrameTruncated},
		{"UDP header cut", c4, fr(mutate(v4[:14+20+7], func(b []byte) []byte { binary.BigEndian.PutUint16(b[16:], 27); return refresh4(b) })), rocev2.ErrFrameTruncated},
		{"UDP length beyond the IP payload", c4, fr(mutate(v4, func(b []byte) []byte { b[38]++; return b })), rocev2.ErrFrameTruncated},
		{"UDP length short of the IP payload", c4, fr(mutate(v4, func(b []byte) []byte { b[39]--; return b })), rocev2.ErrFrameTruncated},
		{"UDP length below its header", c4, fr(mutate(v4, func(b []byte) []byte { b[38], b[39] = 0, 4; return b })), rocev2.ErrFrameTruncated},
		{"IPv4 options", c4, fr(mutate(v4, func(b []byte) []byte {
			// Four bytes of NOP options between the header and UDP.
			out := append(append(append([]byte{}, b[:34]...), 1, 1, 1, 1), b[34:]...)
			out[14] = 0x46
			binary.BigEndian.PutUint16(out[16:], binary.BigEndian.Uint16(out[16:])+4)
			return refresh4(out)
		})), rocev2.ErrEncap},
		{"IPv4 first fragment", c4, fr(mutate(v4, func(b []byte) []byte { b[20] = 0x20; return refresh4(b) })), rocev2.ErrEncap},
		{"IPv4 later fragment", c4, fr(mutate(v4, func(b []byte) []byte { b[20], b[21] = 0x00, 0x10; return refresh4(b) })), rocev2.ErrEncap},
		{"IPv6 fragment header", c6, fr(mutate(v6, func(b []byte) []byte { b[20] = nextFragment; return b })), rocev2.ErrEncap},
		{"IPv6 hop-by-hop options", c6, fr(mutate(v6, func(b []byte) []byte { b[20] = nextHopByHop; return b })), rocev2.ErrEncap},
		{"VLAN tag the kernel took off", c4, rxFrame{data: v4, status: statusVLANValid}, rocev2.ErrEncap},
		{"VLAN tag in the frame", c4, fr(mutate(v4, func(b []byte) []byte {
			return append(append(append([]byte{}, b[:12]...), 0x81, 0x00, 0x00, 0x05), b[12:]...)
		})), rocev2.ErrEncap},
		{"QinQ tag in the frame", c4, fr(mutate(v4, func(b []byte) []byte { b[12], b[13] = 0x88, 0xA8; return b })), rocev2.ErrEncap},
		{"IPv4 header checksum wrong", c4, fr(mutate(v4, func(b []byte) []byte { b[24] ^= 1; return b })), rocev2.ErrChecksum},
		{"UDP checksum wrong", c4, fr(mutate(v4, func(b []byte) []byte { b[40], b[41] = 0x12, 0x34; return b })), rocev2.ErrChecksum},
		{"IPv6 UDP checksum wrong", c6, fr(mutate(v6, func(b []byte) []byte { b[60], b[61] = 0x12, 0x34; return b })), rocev2.ErrChecksum},
		{"jumbo frame beyond the MTU", &rxCheck{local: local4, maxFrame: ethHeaderLen + 1000}, fr(big), rocev2.ErrDatagram},
		{"to another host (promiscuous)", c4, rxFrame{data: v4, pktType: 3}, rocev2.ErrNotRoCE},
		{"broadcast", c4, rxFrame{data: v4, pktType: 1}, rocev2.ErrNotRoCE},
		{"to another address", &rxCheck{local: netip.MustParseAddr("198.18.0.9"), maxFrame: 1514}, fr(v4), rocev2.ErrNotRoCE},
		{"to another UDP port", c4, fr(mutate(v4, func(b []byte) []byte { b[37]++; return b })), rocev2.ErrNotRoCE},
		{"TCP", c4, fr(mutate(v4, func(b []byte) []byte { b[23] = 6; return refresh4(b) })), rocev2.ErrNotRoCE},
		{"ARP", c4, fr(mutate(v4, func(b []byte) []byte { b[12], b[13] = 0x08, 0x06; return b })), rocev2.ErrNotRoCE},
		{"IPv6 to an IPv4 device", c4, fr(v6), rocev2.ErrSource},
		{"IPv4 to an IPv6 device", c6, fr(v4), rocev2.ErrSource},
		{"from this device's own address", c4, fr(frameFrom(t, local4, local4, 8)), rocev2.ErrSource},
		{"from a multicast address", c4, fr(frameFrom(t, netip.MustParseAddr("224.0.0.1"), local4, 8)), rocev2.ErrSource},
		{"from 0.0.0.0", c4, fr(frameFrom(t, netip.IPv4Unspecified(), local4, 8)), rocev2.ErrSource},
		{"from an IPv4-mapped IPv6 address", c6, fr(frameFrom(t, netip.MustParseAddr("::ffff:198.18.0.2"), local6, 8)), rocev2.ErrSource},
	}
}

func TestCheckHostileFrames(t *testing.T) {
	for _, tc := range hostileFrames(t) {
		t.Run(tc.name, func(t *testing.T) {
			var d backend.Incoming
			tc.c.check(tc.f, &d)
			assert.Equal(t, tc.reason, d.Drop, "got %v", d.Drop)
		})
	}
}

// TestCheckICRC checks the verdicts that follow a valid frame: a flipped
// bit anywhere the ICRC covers is ICRCBad, the masked fields are not, and a
// checksum the kernel vouches for or left to offload is not recomputed.
func TestCheckICRC(t *testing.T) {
	v4 := frameFrom(t, peer4, local4, 64)
	for _, tc := range []struct {
		name   string
		f      rxFrame
		status backend.ICRCStatus
	}{
		{"intact", rxFrame{data: v4}, backend.ICRCVerified},
		{"payload bit", rxFrame{data: mutate(v4, func(b []byte) []byte { b[60] ^= 4; return b })}, backend.ICRCBad},
		{"IPv4 ID", rxFrame{data: mutate(v4, func(b []byte) []byte { b[19] ^= 1; return refresh4(b) })}, backend.ICRCBad},
		{"UDP source port", rxFrame{data: mutate(v4, func(b []byte) []byte { b[35] ^= 1; return b })}, backend.ICRCBad},
		{"TTL (masked)", rxFrame{data: mutate(v4, func(b []byte) []byte { b[22] = 1; return refresh4(b) })}, backend.ICRCVerified},
		{"TOS (masked)", rxFrame{data: mutate(v4, func(b []byte) []byte { b[15] = 0xb8; return refresh4(b) })}, backend.ICRCVerified},
		{"checksum left to offload", rxFrame{data: mutate(v4, func(b []byte) []byte { b[40], b[41] = 0x12, 0x34; return b }), status: statusCsumNotReady}, backend.ICRCVerified},
		{"checksum the device checked", rxFrame{data: mutate(v4, func(b []byte) []byte { b[40], b[41] = 0x12, 0x34; return b }), status: statusCsumValid}, backend.ICRCVerified},
		{"Ethernet padding", rxFrame{data: mutate(v4, func(b []byte) []byte { return append(b, 0, 0, 0, 0) })}, backend.ICRCVerified},
		{"no room for an ICRC", rxFrame{data: frameFromPayload(t, make([]byte, 10))}, backend.ICRCBad},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d backend.Incoming
			check4().check(tc.f, &d)
			require.Zero(t, d.Drop, "%v", d.Drop)
			assert.Equal(t, tc.status, d.ICRC)
		})
	}
}

// frameFromPayload frames an arbitrary UDP payload from peer4 to local4.
func frameFromPayload(t testing.TB, payload []byte) []byte {
	t.Helper()
	h := header{srcMAC: macB, dstMAC: macA, src: peer4, dst: local4, srcPort: 0xC000, dstPort: rocev2.UDPPort, hopLimit: 64}
	hdr := make([]byte, maxHeaderLen)
	hn := h.put(hdr, len(payload))
	return append(hdr[:hn:hn], payload...)
}

// A correct UDP checksum passes: computed here the long way.
func TestCheckCorrectUDPChecksum(t *testing.T) {
	for _, fr := range [][]byte{frameFrom(t, peer4, local4, 33), frameFrom(t, peer6, local6, 33)} {
		ipLen := 20
		if fr[12] == 0x86 {
			ipLen = 40
		}
		udp := fr[14+ipLen:]
		udp[6], udp[7] = 0, 0
		sum := udpChecksum(fr[14:14+ipLen], udp)
		binary.BigEndian.PutUint16(udp[6:], sum)
		var d backend.Incoming
		c := check4()
		if ipLen == 40 {
			c = check6()
		}
		c.check(rxFrame{data: fr}, &d)
		assert.Zero(t, d.Drop, "%v", d.Drop)
		assert.Equal(t, backend.ICRCVerified, d.ICRC)
	}
}

// TestFilter runs the socket filter in x/net/bpf's interpreter: it takes
// RoCEv2 for the device and the frames whose drop the device counts, and
// nothing else.
func TestFilter(t *testing.T) {
	v4 := frameFrom(t, peer4, local4, 64)
	v6 := frameFrom(t, peer6, local6, 64)
	for _, tc := range []struct {
		name  string
		local netip.Addr
		frame []byte
		take  bool
	}{
		{"RoCEv2 over IPv4", local4, v4, true},
		{"RoCEv2 over IPv6", local6, v6, true},
		{"IPv4 to another address", netip.MustParseAddr("198.18.0.9"), v4, false},
		{"IPv6 to another address", netip.MustParseAddr("2001:db8::9"), v6, false},
		{"IPv4 on an IPv6 device", local6, v4, false},
		{"another UDP port", local4, mutate(v4, func(b []byte) []byte { b[37]++; return b }), false},
		{"another UDP port over IPv6", local6, mutate(v6, func(b []byte) []byte { b[57]++; return b }), false},
		{"TCP to 4791", local4, mutate(v4, func(b []byte) []byte { b[23] = 6; return b }), false},
		{"IPv6 TCP", local6, mutate(v6, func(b []byte) []byte { b[20] = 6; return b }), false},
		{"IPv4 options (UDP found past them)", local4, mutate(v4, func(b []byte) []byte {
			out := append(append(append([]byte{}, b[:34]...), 1, 1, 1, 1), b[34:]...)
			out[14] = 0x46
			return out
		}), true},
		{"IPv4 options hiding another port", local4, mutate(v4, func(b []byte) []byte {
			out := append(append(append([]byte{}, b[:34]...), 0x12, 0xb7, 0x12, 0xb7), b[34:]...)
			out[14] = 0x46
			out[41]++ // the real destination port, past the options
			return out
		}), false},
		{"IPv4 later fragment", local4, mutate(v4, func(b []byte) []byte { b[20], b[21] = 0, 0x10; b[37]++; return b }), true},
		{"IPv6 fragment", local6, mutate(v6, func(b []byte) []byte { b[20] = nextFragment; return b }), true},
		{"ARP", local4, mutate(v4, func(b []byte) []byte { b[12], b[13] = 0x08, 0x06; return b }), false},
		{"runt", local4, v4[:20], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vm, err := bpf.NewVM(filter(tc.local))
			require.NoError(t, err)
			n, err := vm.Run(tc.frame)
			require.NoError(t, err)
			if tc.take {
				assert.Equal(t, snapLen, n, "the whole frame taken")
			} else {
				assert.Zero(t, n)
			}
		})
	}
	for _, p := range [][]bpf.Instruction{filter(local4), filter(local6), holdFilter()} {
		_, err := bpf.Assemble(p)
		require.NoError(t, err)
	}
}

// FuzzCheck feeds the receive checks arbitrary frames: never a panic, and
// a frame they accept holds a packet inside the frame, from a sender of the
// device's family.
func FuzzCheck(f *testing.F) {
	for _, tc := range hostileFrames(f) {
		f.Add(tc.f.data, tc.f.pktType, tc.f.status, tc.c.local.Is6(), uint8(0), uint16(0))
	}
	f.Add(frameFrom(f, peer4, local4, 200), uint8(0), uint32(0), false, uint8(0), uint16(0))
	f.Add(frameFrom(f, peer6, local6, 200), uint8(0), uint32(0), true, uint8(0), uint16(0))
	sf, _ := superFrame(f, peer4, local4, 7, 3, 500)
	f.Add(sf.data, uint8(0), uint32(0), false, uint8(gsoUDPL4), uint16(500+rocev2.PacketLen(rocev2.RCSendOnly, 0)))
	f.Fuzz(func(t *testing.T, fr []byte, pktType uint8, status uint32, v6 bool, gsoType uint8, gsoSize uint16) {
		c := check4()
		if v6 {
			c = check6()
		}
		in := rxFrame{data: fr, pktType: pktType, status: status}
		in.vnet[1] = gsoType
		binary.NativeEndian.PutUint16(in.vnet[4:], gsoSize)
		m := c.message(in)
		n := m.segments()
		require.LessOrEqual(t, n, maxGSOSegments)
		total := 0
		for k := range n {
			var d backend.Incoming
			c.packet(&m, k, &d)
			if d.Drop != 0 {
				require.Equal(t, 1, n)
				return
			}
			require.True(t, d.Src.Addr().Is6() == v6, "sender of the device's family")
			require.NotEqual(t, backend.ICRCUnchecked, d.ICRC)
			total += len(d.Buf)
		}
		require.LessOrEqual(t, total, len(fr), "packets lie inside the frame")
	})
}

// superFrame builds what a virtual link hands over for a UDP GSO send of
// segs packets of n payload bytes each from peer to local: the headers
// once, the segments back to back, each sealed for the headers
// segmentation gives it (over IPv4, IDs id, id+1, ...).
func superFrame(t testing.TB, from, to netip.Addr, id uint16, segs, n int) (rxFrame, [][]byte) {
	t.Helper()
	var pkts [][]byte
	var payload []byte
	for k := range segs {
		pkt := roce(t, n)
		h := header{srcMAC: macB, dstMAC: macA, src: from, dst: to, srcPort: 4791, dstPort: rocev2.UDPPort, ipv4ID: id + uint16(k), hopLimit: 64}
		hdr := make([]byte, maxHeaderLen)
		hn := h.put(hdr, len(pkt))
		seal(hdr[:hn], pkt)
		pkts = append(pkts, pkt)
		payload = append(payload, pkt...)
	}
	h := header{srcMAC: macB, dstMAC: macA, src: from, dst: to, srcPort: 4791, dstPort: rocev2.UDPPort, ipv4ID: id, hopLimit: 64}
	hdr := make([]byte, maxHeaderLen)
	hn := h.put(hdr, len(payload))
	f := rxFrame{data: append(hdr[:hn:hn], payload...)}
	f.vnet[0] = vnetNeedsCsum
	f.vnet[1] = gsoUDPL4
	binary.NativeEndian.PutUint16(f.vnet[4:], uint16(len(pkts[0])))
	return f, pkts
}

func TestCheckGSOSuperFrame(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to netip.Addr
		c        *rxCheck
	}{
		{"IPv4", peer4, local4, check4()},
		{"IPv6", peer6, local6, check6()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, pkts := superFrame(t, tc.from, tc.to, 0xfffe, 5, 1000) // IDs wrap
			m := tc.c.message(f)
			require.Zero(t, m.drop, "%v", m.drop)
			require.Equal(t, 5, m.segments())
			for k := range 5 {
				var d backend.Incoming
				tc.c.packet(&m, k, &d)
				assert.Equal(t, pkts[k], d.Buf, "segment %d", k)
				assert.Equal(t, backend.ICRCVerified, d.ICRC, "segment %d", k)
				if tc.from.Is4() {
					assert.Equal(t, uint16(0xfffe)+uint16(k), d.IPv4ID, "segment %d", k)
				}
			}
		})
	}
	// A segment the MTU would not let through, a GSO type RoCE never uses.
	f, _ := superFrame(t, peer4, local4, 0, 3, 1000)
	small := &rxCheck{local: local4, maxFrame: ethHeaderLen + 800}
	assert.Equal(t, rocev2.ErrDatagram, small.message(f).drop, "segments beyond the MTU")
	f.vnet[1] = 1 // TCPv4
	assert.Equal(t, rocev2.ErrEncap, check4().message(f).drop, "TCP segmentation")
	// Without GSO, the same frame is one jumbo frame.
	f.vnet = [vnetHdrLen]byte{}
	assert.Equal(t, rocev2.ErrDatagram, check4().message(f).drop, "a jumbo frame")
}
