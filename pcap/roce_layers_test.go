package pcap

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
)

// wantChain is the layer chain from the BTH on for a packet of opcode op
// with the given payload: BTH, the extended headers in wire order, then the
// payload's decoder when there is a payload.
func wantChain(op rocev2.Opcode, dqpn uint32, payload []byte) []gopacket.LayerType {
	out := []gopacket.LayerType{LayerTypeBTH}
	for _, k := range extKinds {
		if op.Has(k.hdr) {
			out = append(out, k.lt)
		}
	}
	if len(payload) > 0 {
		out = append(out, roceNextLayer(op, dqpn, payload))
	}
	return out
}

// chainFrom returns the layer types of p from the BTH on, cut to n entries
// (the payload decoder may add layers of its own below).
func chainFrom(p gopacket.Packet, n int) []gopacket.LayerType {
	var out []gopacket.LayerType
	seen := false
	for _, l := range p.Layers() {
		if l.LayerType() == LayerTypeBTH {
			seen = true
		}
		if seen && len(out) < n {
			out = append(out, l.LayerType())
		}
	}
	return out
}

// assertLayersMatchViews checks every RoCE layer of p against the rocev2
// views of the same packet.
func assertLayersMatchViews(t *testing.T, p gopacket.Packet, pkt *rocev2.Packet, msg string) {
	t.Helper()
	b, ok := p.Layer(LayerTypeBTH).(*BTH)
	require.True(t, ok, msg)
	h := pkt.BTH()
	assert.Equal(t, h.Opcode(), b.Opcode, msg)
	assert.Equal(t, h.SE(), b.SE, msg)
	assert.Equal(t, h.MigReq(), b.MigReq, msg)
	assert.Equal(t, uint8(h.PadCount()), b.PadCount, msg)
	assert.Equal(t, h.TVer(), b.TVer, msg)
	assert.Equal(t, h.PKey(), b.PKey, msg)
	assert.Equal(t, h.FECN(), b.FECN, msg)
	assert.Equal(t, h.BECN(), b.BECN, msg)
	assert.Equal(t, h.DestQP(), b.DestQP, msg)
	assert.Equal(t, h.AckReq(), b.AckReq, msg)
	assert.Equal(t, h.PSN(), b.PSN, msg)
	assert.Equal(t, pkt.ICRC(), b.ICRC, msg)
	assert.Equal(t, pkt.Pad(), b.Pad, msg)
	assert.Equal(t, []byte(h), b.LayerContents(), msg)

	layerOf := func(lt gopacket.LayerType, present bool) gopacket.Layer {
		l := p.Layer(lt)
		assert.Equal(t, present, l != nil, "%s: %v present", msg, lt)
		return l
	}
	if l := layerOf(LayerTypeDETH, pkt.DETH() != nil); l != nil {
		v, d := pkt.DETH(), l.(*DETH)
		assert.Equal(t, v.QKey(), d.QKey, msg)
		assert.Equal(t, v.SrcQP(), d.SrcQP, msg)
		assert.Equal(t, []byte(v), d.LayerContents(), msg)
	}
	if l := layerOf(LayerTypeFETH, pkt.FETH() != nil); l != nil {
		v, d := pkt.FETH(), l.(*FETH)
		assert.Equal(t, v.PlacementType(), d.PlacementType, msg)
		assert.Equal(t, v.SelectivityLevel(), d.SelectivityLevel, msg)
	}
	if l := layerOf(LayerTypeRETH, pkt.RETH() != nil); l != nil {
		v, d := pkt.RETH(), l.(*RETH)
		assert.Equal(t, v.VA(), d.VA, msg)
		assert.Equal(t, v.RKey(), d.RKey, msg)
		assert.Equal(t, v.Len(), d.DMALength, msg)
		assert.Equal(t, []byte(v), d.LayerContents(), msg)
	}
	if l := layerOf(LayerTypeAtomicETH, pkt.AtomicETH() != nil); l != nil {
		v, d := pkt.AtomicETH(), l.(*AtomicETH)
		assert.Equal(t, v.VA(), d.VA, msg)
		assert.Equal(t, v.RKey(), d.RKey, msg)
		assert.Equal(t, v.SwapAdd(), d.SwapAdd, msg)
		assert.Equal(t, v.Compare(), d.Compare, msg)
	}
	if l := layerOf(LayerTypeAETH, pkt.AETH() != nil); l != nil {
		v, d := pkt.AETH(), l.(*AETH)
		assert.Equal(t, v.Syndrome(), d.Syndrome, msg)
		assert.Equal(t, v.MSN(), d.MSN, msg)
		assert.Equal(t, v.Syndrome().Kind(), d.Kind(), msg)
	}
	if l := layerOf(LayerTypeAtomicAckETH, pkt.AtomicAckETH() != nil); l != nil {
		assert.Equal(t, pkt.AtomicAckETH().Orig(), l.(*AtomicAckETH).Orig, msg)
	}
	if l := layerOf(LayerTypeImmDt, pkt.ImmDt() != nil); l != nil {
		assert.Equal(t, pkt.ImmDt().Imm(), l.(*ImmDt).Imm, msg)
	}
	if l := layerOf(LayerTypeIETH, pkt.IETH() != nil); l != nil {
		assert.Equal(t, pkt.IETH().RKey(), l.(*IETH).RKey, msg)
	}
	layerOf(LayerTypeCNPPad, pkt.Opcode().Has(rocev2.HdrCNPPad))

	// The last RoCE layer's payload is the packet's payload, without pad.
	ls := p.Layers()
	for i, l := range ls {
		if l.LayerType() != LayerTypeBTH {
			continue
		}
		last := ls[i+len(wantChain(pkt.Opcode(), pkt.BTH().DestQP(), nil))-1]
		assert.Equal(t, pkt.Payload(), last.LayerPayload(), msg)
	}
	chain := wantChain(pkt.Opcode(), pkt.BTH().DestQP(), pkt.Payload())
	assert.Equal(t, chain, chainFrom(p, len(chain)), msg)
}

// Every frame of the kernel rxe captures decodes through gopacket exactly
// as rocev2 parses it, and every ICRC verifies.
func TestDecodeRxeVectors(t *testing.T) {
	for name, frames := range vectorFrames(t) {
		t.Run(name, func(t *testing.T) {
			n := 0
			for i, frame := range frames {
				msg := fmt.Sprintf("frame %d", i+1)
				p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
				var f rocev2.Frame
				if err := rocev2.ParseEthernetFrame(frame, rocev2.UDPPort, &f); err != nil {
					require.ErrorIs(t, err, rocev2.ErrNotRoCE, msg)
					assert.Nil(t, p.Layer(LayerTypeBTH), msg)
					continue
				}
				n++
				require.Nil(t, p.ErrorLayer(), msg)
				var pkt rocev2.Packet
				require.NoError(t, pkt.Parse(f.Payload), msg)
				assert.Equal(t, layers.LayerTypeEthernet, p.Layers()[0].LayerType(), msg)
				assert.Equal(t, layers.LayerTypeIPv4, p.Layers()[1].LayerType(), msg)
				assert.Equal(t, layers.LayerTypeUDP, p.Layers()[2].LayerType(), msg)
				assertLayersMatchViews(t, p, &pkt, msg)
				ok, verifiable := VerifyICRC(p)
				assert.True(t, verifiable, msg)
				assert.True(t, ok, msg)
			}
			assert.Equal(t, vectorRoCECounts[name], n)
		})
	}
}

// testFlows are the IPv4 and IPv6 flows synthetic packets travel in.
func testFlows() map[string]rocev2.Flow {
	v4 := rocev2.NewFlow(netip.MustParseAddrPort("192.168.1.1:53812"), netip.MustParseAddrPort("192.168.1.2:4791"))
	v4.IPv4ID = 0x1234
	v4.SrcMAC = [6]byte{0x02, 0, 0, 0, 0, 1}
	v4.DstMAC = [6]byte{0x02, 0, 0, 0, 0, 2}
	v6 := rocev2.NewFlow(netip.MustParseAddrPort("[fe80::1]:53812"), netip.MustParseAddrPort("[fe80::2]:4791"))
	v6.FlowLabel = 0xABCDE
	v6.SrcMAC, v6.DstMAC = v4.SrcMAC, v4.DstMAC
	return map[string]rocev2.Flow{"ipv4": v4, "ipv6": v6}
}

// frameFor wraps a RoCEv2 packet (BTH through ICRC) in Ethernet, IP and UDP
// headers of flow.
func frameFor(flow *rocev2.Flow, pkt []byte) []byte {
	b := make([]byte, rocev2.EthernetHeaderLen+flow.IPHeaderLen()+rocev2.UDPHeaderLen+len(pkt))
	n := flow.EncodeEthernet(b)
	n += flow.EncodeIPUDP(b[n:], len(pkt))
	copy(b[n:], pkt)
	return b
}

// testFields sets every field to a distinct non-zero value.
func testFields(op rocev2.Opcode, payloadLen int) rocev2.Fields {
	return rocev2.Fields{
		Opcode: op, SE: true, MigReq: true, PKey: 0x8001, FECN: true, BECN: true,
		DestQP: 0xABCDEF, AckReq: true, PSN: 0x123456,
		VA: 0x1122334455667788, RKey: 0xCAFEBABE, Len: uint32(payloadLen),
		Syndrome: rocev2.NAKSyndrome(rocev2.NAKRemoteAccess), MSN: 0x654321,
		SwapAdd: 0x0102030405060708, Compare: 0x8877665544332211,
		Orig: 0xDEADBEEFFEEDFACE, Imm: 0x0BADF00D, InvRKey: 0x1357,
		QKey: 0x80010000, SrcQP: 0x13, Placement: 2, Selectivity: 1,
	}
}

// testPayload returns the payload a synthetic packet of op carries: 5 bytes
// (so that there are 3 bytes of pad), 8 for ATOMIC WRITE, none if the opcode
// carries none.
func testPayload(op rocev2.Opcode) []byte {
	switch {
	case op == rocev2.RCAtomicWrite:
		return []byte{1, 2, 3, 4, 5, 6, 7, 8}
	case op.Is(rocev2.OpPayload):
		return []byte("ABCDE")
	}
	return nil
}

// validOpcodes lists every opcode rocev2 knows.
func validOpcodes() []rocev2.Opcode {
	var out []rocev2.Opcode
	for i := 0; i < 256; i++ {
		if op := rocev2.Opcode(i); op.Valid() {
			out = append(out, op)
		}
	}
	return out
}

// A synthetic packet of every opcode, built with rocev2.Fields.Append, over
// IPv4 and IPv6: the layer chain, every field, and the ICRC.
func TestDecodeSyntheticHeaders(t *testing.T) {
	for fname, flow := range testFlows() {
		for _, op := range validOpcodes() {
			t.Run(fname+"/"+op.String(), func(t *testing.T) {
				payload := testPayload(op)
				f := testFields(op, len(payload))
				pkt, err := f.Append(nil, payload)
				require.NoError(t, err)
				flow.SealICRC(pkt)
				frame := frameFor(&flow, pkt)

				p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
				require.Nil(t, p.ErrorLayer())
				var view rocev2.Packet
				require.NoError(t, view.Parse(pkt))
				assertLayersMatchViews(t, p, &view, op.String())

				// And against the values that went in, independently of the views.
				b := p.Layer(LayerTypeBTH).(*BTH)
				assert.Equal(t, op, b.Opcode)
				assert.True(t, b.SE && b.MigReq && b.FECN && b.BECN && b.AckReq)
				assert.Equal(t, uint16(0x8001), b.PKey)
				assert.Equal(t, uint32(0xABCDEF), b.DestQP)
				assert.Equal(t, rocev2.PSN(0x123456), b.PSN)
				assert.Equal(t, uint8(rocev2.PadFor(len(payload))), b.PadCount)
				assertExtFields(t, p, f)
				if len(payload) > 0 {
					assert.Equal(t, payload, p.ApplicationLayer().Payload())
				}

				ok, verifiable := VerifyICRC(p)
				assert.True(t, verifiable)
				assert.True(t, ok)
				frame[len(frame)-5] ^= 0x01 // last byte before the ICRC: pad, payload or header
				ok, verifiable = VerifyICRC(gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default))
				assert.True(t, verifiable)
				assert.False(t, ok)
			})
		}
	}
}

// assertExtFields checks the extended-header layers of p against f.
func assertExtFields(t *testing.T, p gopacket.Packet, f rocev2.Fields) {
	t.Helper()
	if l, ok := p.Layer(LayerTypeDETH).(*DETH); ok {
		assert.Equal(t, f.QKey, l.QKey)
		assert.Equal(t, f.SrcQP, l.SrcQP)
	}
	if l, ok := p.Layer(LayerTypeFETH).(*FETH); ok {
		assert.Equal(t, f.Placement, l.PlacementType)
		assert.Equal(t, f.Selectivity, l.SelectivityLevel)
	}
	if l, ok := p.Layer(LayerTypeRETH).(*RETH); ok {
		assert.Equal(t, f.VA, l.VA)
		assert.Equal(t, f.RKey, l.RKey)
		assert.Equal(t, f.Len, l.DMALength)
	}
	if l, ok := p.Layer(LayerTypeAtomicETH).(*AtomicETH); ok {
		assert.Equal(t, f.VA, l.VA)
		assert.Equal(t, f.RKey, l.RKey)
		assert.Equal(t, f.SwapAdd, l.SwapAdd)
		assert.Equal(t, f.Compare, l.Compare)
	}
	if l, ok := p.Layer(LayerTypeAETH).(*AETH); ok {
		assert.Equal(t, f.Syndrome, l.Syndrome)
		assert.Equal(t, f.MSN, l.MSN)
		assert.Equal(t, rocev2.KindNAK, l.Kind())
		assert.Equal(t, rocev2.NAKRemoteAccess, l.Code())
	}
	if l, ok := p.Layer(LayerTypeAtomicAckETH).(*AtomicAckETH); ok {
		assert.Equal(t, f.Orig, l.Orig)
	}
	if l, ok := p.Layer(LayerTypeImmDt).(*ImmDt); ok {
		assert.Equal(t, f.Imm, l.Imm)
	}
	if l, ok := p.Layer(LayerTypeIETH).(*IETH); ok {
		assert.Equal(t, f.InvRKey, l.RKey)
	}
}

// The preallocated DecodingLayers give the same chain and fields as
// NewPacket, through gopacket.DecodingLayerParser.
func TestDecodingLayerParser(t *testing.T) {
	var (
		eth     layers.Ethernet
		ip4     layers.IPv4
		ip6     layers.IPv6
		udp     layers.UDP
		payload gopacket.Payload
	)
	dl := NewDecodingLayers()
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &ip6, &udp, &payload)
	for _, l := range dl.Layers() {
		parser.AddDecodingLayer(l)
	}
	var decoded []gopacket.LayerType
	for fname, flow := range testFlows() {
		for _, op := range validOpcodes() {
			payloadIn := testPayload(op)
			f := testFields(op, len(payloadIn))
			pkt, err := f.Append(nil, payloadIn)
			require.NoError(t, err)
			flow.SealICRC(pkt)
			frame := frameFor(&flow, pkt)
			require.NoError(t, parser.DecodeLayers(frame, &decoded), "%s %v", fname, op)

			p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
			var want []gopacket.LayerType
			for _, l := range p.Layers() {
				want = append(want, l.LayerType())
			}
			assert.Equal(t, want, decoded, "%s %v", fname, op)
			assert.Equal(t, p.Layer(LayerTypeBTH).(*BTH).PSN, dl.BTH.PSN)
			assert.Equal(t, pkt[len(pkt)-4:], le32(dl.BTH.ICRC))
			if op.Has(rocev2.HdrRETH) {
				assert.Equal(t, f.VA, dl.RETH.VA)
			}
			if op.Has(rocev2.HdrImmDt) {
				assert.Equal(t, f.Imm, dl.ImmDt.Imm)
			}
			if len(payloadIn) > 0 {
				assert.Equal(t, payloadIn, []byte(payload))
			}
		}
	}
}

func le32(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }

// Malformed or short RoCEv2 packets become a DecodeFailure carrying the
// rocev2 error, never a BTH layer and never a panic.
func TestDecodeMalformed(t *testing.T) {
	good := func(op rocev2.Opcode, payload []byte) []byte {
		f := testFields(op, len(payload))
		b, err := f.Append(nil, payload)
		require.NoError(t, err)
		return b
	}
	tests := []struct {
		name      string
		pkt       []byte
		want      error
		truncated bool
	}{
		{"empty-ish", []byte{0x04, 0x00, 0xff}, rocev2.ErrShort, true},
		{"bth only", good(rocev2.RCAcknowledge, nil)[:rocev2.BTHLen], rocev2.ErrShort, true},
		{"unknown opcode", func() []byte { b := good(rocev2.RCSendOnly, nil); b[0] = 0x15; return b }(), rocev2.ErrUnknownOpcode, false},
		{"tver", func() []byte { b := good(rocev2.RCSendOnly, nil); b[1] |= 1; return b }(), rocev2.ErrTVer, false},
		{"reth cut", good(rocev2.RCWriteOnly, nil)[:rocev2.BTHLen+8+rocev2.ICRCLen], rocev2.ErrHeaderTruncated, true},
		{"pad count", func() []byte { b := good(rocev2.RCSendOnly, nil); rocev2.BTH(b).SetPadCount(2); return b }(), rocev2.ErrPadCount, false},
		{"payload on ack", append(good(rocev2.RCAcknowledge, nil), 1, 2, 3, 4), rocev2.ErrUnexpectedPayload, false},
	}
	flow := testFlows()["ipv4"]
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frame := frameFor(&flow, tt.pkt)
			for _, opts := range []gopacket.DecodeOptions{gopacket.Default, {Lazy: true, NoCopy: true}} {
				p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, opts)
				assert.Nil(t, p.Layer(LayerTypeBTH))
				require.NotNil(t, p.ErrorLayer())
				assert.True(t, errors.Is(p.ErrorLayer().Error(), tt.want), "%v", p.ErrorLayer().Error())
				ls := p.Layers()
				assert.Equal(t, gopacket.LayerTypeDecodeFailure, ls[len(ls)-1].LayerType())
				assert.Equal(t, tt.truncated, p.Metadata().Truncated)
				_, verifiable := VerifyICRC(p)
				assert.False(t, verifiable)
			}
			var b BTH
			assert.ErrorIs(t, b.DecodeFromBytes(tt.pkt, gopacket.NilDecodeFeedback), tt.want)
			assert.Equal(t, gopacket.LayerTypeZero, b.NextLayerType())
		})
	}
}

// A frame whose capture was cut inside the payload still shows its BTH, but
// its ICRC cannot be checked.
func TestTruncatedCaptureUnverifiable(t *testing.T) {
	flow := testFlows()["ipv4"]
	f := testFields(rocev2.RCSendOnly, 64)
	pkt, err := f.Append(nil, make([]byte, 64))
	require.NoError(t, err)
	flow.SealICRC(pkt)
	frame := frameFor(&flow, pkt)
	p := gopacket.NewPacket(frame[:len(frame)-20], layers.LayerTypeEthernet, gopacket.Default)
	require.NotNil(t, p.Layer(LayerTypeBTH))
	assert.True(t, p.Metadata().Truncated)
	ok, verifiable := VerifyICRC(p)
	assert.False(t, ok)
	assert.False(t, verifiable)
}

// An extended header decoded on its own reports short input as truncated
// and hands the rest on as payload.
func TestExtStandalone(t *testing.T) {
	var df truncFeedback
	var r RETH
	require.ErrorIs(t, r.DecodeFromBytes(make([]byte, 10), &df), rocev2.ErrHeaderTruncated)
	assert.True(t, bool(df))
	p := gopacket.NewPacket(append(make([]byte, rocev2.RETHLen), 'x'), LayerTypeRETH, gopacket.Default)
	require.Nil(t, p.ErrorLayer())
	assert.Equal(t, []gopacket.LayerType{LayerTypeRETH, gopacket.LayerTypePayload},
		[]gopacket.LayerType{p.Layers()[0].LayerType(), p.Layers()[1].LayerType()})
}

type truncFeedback bool

func (t *truncFeedback) SetTruncated() { *t = true }

// Decoded layers serialise back to the exact bytes, and with
// SetNetworkLayerForICRC and ComputeChecksums the BTH writes the ICRC the
// capture carries.
func TestSerializeRoundTripVectors(t *testing.T) {
	buf := gopacket.NewSerializeBuffer()
	for name, frames := range vectorFrames(t) {
		for i, frame := range frames {
			p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
			b, ok := p.Layer(LayerTypeBTH).(*BTH)
			if !ok {
				continue
			}
			udp := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
			msg := fmt.Sprintf("%s frame %d", name, i+1)
			var sl []gopacket.SerializableLayer
			for _, l := range p.Layers() {
				if s, ok := l.(gopacket.SerializableLayer); ok && IsRoCELayerType(l.LayerType()) {
					sl = append(sl, s)
				}
			}
			sl = append(sl, gopacket.Payload(b.Packet().Payload()))
			require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, sl...), msg)
			assert.Equal(t, udp.Payload, buf.Bytes(), msg)

			want := b.ICRC
			b.ICRC = 0
			b.SetNetworkLayerForICRC(p.NetworkLayer(), udp)
			require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true}, sl...), msg)
			assert.Equal(t, udp.Payload, buf.Bytes(), msg)
			assert.Equal(t, want, b.ICRC, msg)
		}
	}
}

// A whole frame built from gopacket layers, with the ICRC computed by the
// BTH layer, matches what rocev2 builds for the same flow.
func TestSerializeComputeICRC(t *testing.T) {
	for fname, flow := range testFlows() {
		t.Run(fname, func(t *testing.T) {
			f := testFields(rocev2.RCWriteOnlyImm, 5)
			want, err := f.Append(nil, []byte("ABCDE"))
			require.NoError(t, err)
			flow.SealICRC(want)

			eth := &layers.Ethernet{SrcMAC: flow.SrcMAC[:], DstMAC: flow.DstMAC[:]}
			var ip gopacket.NetworkLayer
			var ipl gopacket.SerializableLayer
			if flow.IsIPv6() {
				eth.EthernetType = layers.EthernetTypeIPv6
				v := &layers.IPv6{Version: 6, FlowLabel: flow.FlowLabel, NextHeader: layers.IPProtocolUDP, HopLimit: flow.TTL,
					SrcIP: flow.Src.AsSlice(), DstIP: flow.Dst.AsSlice()}
				ip, ipl = v, v
			} else {
				eth.EthernetType = layers.EthernetTypeIPv4
				v := &layers.IPv4{Version: 4, IHL: 5, Id: flow.IPv4ID, Flags: layers.IPv4DontFragment, TTL: flow.TTL,
					Protocol: layers.IPProtocolUDP, SrcIP: flow.Src.AsSlice(), DstIP: flow.Dst.AsSlice()}
				ip, ipl = v, v
			}
			udp := &layers.UDP{SrcPort: layers.UDPPort(flow.SrcPort), DstPort: layers.UDPPort(flow.DstPort)}
			require.NoError(t, udp.SetNetworkLayerForChecksum(ip))
			bth := &BTH{Opcode: f.Opcode, SE: f.SE, MigReq: f.MigReq, PKey: f.PKey, FECN: f.FECN, BECN: f.BECN,
				DestQP: f.DestQP, AckReq: f.AckReq, PSN: f.PSN}
			bth.SetNetworkLayerForICRC(ip, udp)
			reth := &RETH{VA: f.VA, RKey: f.RKey, DMALength: f.Len}
			imm := &ImmDt{Imm: f.Imm}
			buf := gopacket.NewSerializeBuffer()
			require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
				eth, ipl, udp, bth, reth, imm, gopacket.Payload("ABCDE")))

			p := gopacket.NewPacket(buf.Bytes(), layers.LayerTypeEthernet, gopacket.Default)
			require.Nil(t, p.ErrorLayer())
			assert.Equal(t, want, p.Layer(layers.LayerTypeUDP).LayerPayload())
			ok, verifiable := VerifyICRC(p)
			assert.True(t, verifiable)
			assert.True(t, ok)
		})
	}
}

// Every extended header serialises to what rocev2 builds.
func TestSerializeSyntheticHeaders(t *testing.T) {
	buf := gopacket.NewSerializeBuffer()
	flow := testFlows()["ipv4"]
	for _, op := range validOpcodes() {
		payload := testPayload(op)
		f := testFields(op, len(payload))
		pkt, err := f.Append(nil, payload)
		require.NoError(t, err)
		flow.SealICRC(pkt)
		p := gopacket.NewPacket(frameFor(&flow, pkt), layers.LayerTypeEthernet, gopacket.Default)
		var sl []gopacket.SerializableLayer
		for _, l := range p.Layers() {
			if IsRoCELayerType(l.LayerType()) {
				sl = append(sl, l.(gopacket.SerializableLayer))
			}
		}
		sl = append(sl, gopacket.Payload(payload))
		require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, sl...))
		assert.Equal(t, pkt, buf.Bytes(), op.String())
	}
}

// FuzzDecodeBTH feeds arbitrary UDP payloads to the BTH decoder with panic
// recovery off: it must fail cleanly, and whatever it accepts rocev2 accepts.
func FuzzDecodeBTH(f *testing.F) {
	for _, frames := range vectorFrames(f) {
		for _, frame := range frames {
			var fr rocev2.Frame
			if rocev2.ParseEthernetFrame(frame, rocev2.UDPPort, &fr) == nil {
				f.Add(fr.Payload)
			}
		}
	}
	f.Add([]byte{0x81, 0, 0xff, 0xff})
	dl := NewDecodingLayers()
	parser := gopacket.NewDecodingLayerParser(LayerTypeBTH, dl.Layers()...)
	parser.IgnoreUnsupported = true
	var decoded []gopacket.LayerType
	f.Fuzz(func(t *testing.T, data []byte) {
		p := gopacket.NewPacket(data, LayerTypeBTH, gopacket.DecodeOptions{SkipDecodeRecovery: true})
		var pkt rocev2.Packet
		err := pkt.Parse(data)
		if err != nil {
			require.NotNil(t, p.ErrorLayer())
			require.Nil(t, p.Layer(LayerTypeBTH))
		} else {
			require.NotNil(t, p.Layer(LayerTypeBTH))
		}
		_ = parser.DecodeLayers(data, &decoded)
	})
}
