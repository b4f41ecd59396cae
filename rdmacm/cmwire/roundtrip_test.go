package cmwire

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func randGID(r *rand.Rand) (g GID) {
	copy(g[:], randBytes(r, 16))
	return g
}

func randPath(r *rand.Rand) Path {
	return Path{LocalLID: uint16(r.Uint32()), RemoteLID: uint16(r.Uint32()), LocalGID: randGID(r), RemoteGID: randGID(r),
		FlowLabel: r.Uint32N(1 << 20), PacketRate: uint8(r.UintN(64)), TrafficClass: uint8(r.Uint32()),
		HopLimit: uint8(r.Uint32()), SL: uint8(r.UintN(16)), SubnetLocal: r.IntN(2) == 1, LocalACKTimeout: uint8(r.UintN(32))}
}

// encoder is a message that encodes into and decodes from a MAD.
type encoder interface{ Encode(MAD) bool }

// TestRoundTrip fills every field of every message with random values in
// range, encodes and decodes: each field comes back, so no two fields of a
// layout overlap and no value spills out of its bits. Unused (reserved)
// bits stay zero: a decoded message re-encodes to the same bytes.
func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	b := func() bool { return r.IntN(2) == 1 }
	u8 := func(bits uint) uint8 { return uint8(r.UintN(1 << bits)) }
	u24 := func() uint32 { return r.Uint32N(1 << 24) }
	for range 200 {
		cases := []struct {
			msg    encoder
			attr   AttrID
			decode func(MAD) any
		}{
			{&REQ{LocalCommID: r.Uint32(), VendorID: u24(), ServiceID: r.Uint64(), LocalCAGUID: r.Uint64(),
				LocalQKey: r.Uint32(), LocalQPN: u24(), ResponderResources: u8(8), LocalEECN: u24(), InitiatorDepth: u8(8),
				RemoteEECN: u24(), RemoteCMResponseTimeout: u8(5), TransportType: u8(2), FlowControl: b(),
				StartingPSN: u24(), LocalCMResponseTimeout: u8(5), RetryCount: u8(3), PKey: uint16(r.Uint32()),
				PathMTU: u8(4), RDCExists: b(), RNRRetryCount: u8(3), MaxCMRetries: u8(4), SRQ: b(),
				ExtTransportType: u8(3), Primary: randPath(r), Alternate: randPath(r), SAPSupported: b(),
				PrivateData: randBytes(r, REQPrivateLen)}, AttrREQ, func(m MAD) any { v := DecodeREQ(m); return &v }},
			{&MRA{LocalCommID: r.Uint32(), RemoteCommID: r.Uint32(), MessageMRAed: MessageKind(u8(2)),
				ServiceTimeout: u8(5), PrivateData: randBytes(r, MRAPrivateLen)}, AttrMRA, func(m MAD) any { v := DecodeMRA(m); return &v }},
			{&REJ{LocalCommID: r.Uint32(), RemoteCommID: r.Uint32(), MessageRejected: MessageKind(u8(2)), ARILength: u8(7),
				Reason: RejReason(r.Uint32()), ARI: randBytes(r, REJARILen), PrivateData: randBytes(r, REJPrivateLen)},
				AttrREJ, func(m MAD) any { v := DecodeREJ(m); return &v }},
			{&REP{LocalCommID: r.Uint32(), RemoteCommID: r.Uint32(), LocalQKey: r.Uint32(), LocalQPN: u24(),
				LocalEECN: u24(), StartingPSN: u24(), VendorID: u24(), ResponderResources: u8(8), InitiatorDepth: u8(8),
				TargetACKDelay: u8(5), Failover: u8(2), FlowControl: b(), RNRRetryCount: u8(3), SRQ: b(),
				LocalCAGUID: r.Uint64(), PrivateData: randBytes(r, REPPrivateLen)}, AttrREP, func(m MAD) any { v := DecodeREP(m); return &v }},
			{&RTU{LocalCommID: r.Uint32(), RemoteCommID: r.Uint32(), PrivateData: randBytes(r, RTUPrivateLen)},
				AttrRTU, func(m MAD) any { v := DecodeRTU(m); return &v }},
			{&DREQ{LocalCommID: r.Uint32(), RemoteCommID: r.Uint32(), RemoteQPNEECN: u24(), PrivateData: randBytes(r, DREQPrivateLen)},
				AttrDREQ, func(m MAD) any { v := DecodeDREQ(m); return &v }},
			{&DREP{LocalCommID: r.Uint32(), RemoteCommID: r.Uint32(), PrivateData: randBytes(r, DREPPrivateLen)},
				AttrDREP, func(m MAD) any { v := DecodeDREP(m); return &v }},
			{&SIDRReq{RequestID: r.Uint32(), PKey: uint16(r.Uint32()), ServiceID: r.Uint64(), PrivateData: randBytes(r, SIDRReqPrivateLen)},
				AttrSIDRReq, func(m MAD) any { v := DecodeSIDRReq(m); return &v }},
			{&SIDRRep{RequestID: r.Uint32(), Status: SIDRStatus(r.Uint32()), InfoLength: uint8(r.Uint32()), VendorID: u24(),
				QPN: u24(), ServiceID: r.Uint64(), QKey: r.Uint32(), Info: randBytes(r, SIDRRepInfoLen),
				PrivateData: randBytes(r, SIDRRepPrivateLen)}, AttrSIDRRep, func(m MAD) any { v := DecodeSIDRRep(m); return &v }},
			{&LAP{LocalCommID: r.Uint32(), RemoteCommID: r.Uint32(), RemoteQPNEECN: u24(), RemoteCMResponseTimeout: u8(5),
				AltLocalLID: uint16(r.Uint32()), AltRemoteLID: uint16(r.Uint32()), AltLocalGID: randGID(r), AltRemoteGID: randGID(r),
				AltFlowLabel: r.Uint32N(1 << 20), AltTrafficClass: uint8(r.Uint32()), AltHopLimit: uint8(r.Uint32()),
				AltPacketRate: u8(6), AltSL: u8(4), AltSubnetLocal: b(), AltLocalACKTimeout: u8(5),
				PrivateData: randBytes(r, LAPPrivateLen)}, AttrLAP, func(m MAD) any { v := DecodeLAP(m); return &v }},
			{&APR{LocalCommID: r.Uint32(), RemoteCommID: r.Uint32(), InfoLength: uint8(r.Uint32()), Status: uint8(r.Uint32()),
				Info: randBytes(r, APRInfoLen), PrivateData: randBytes(r, APRPrivateLen)}, AttrAPR, func(m MAD) any { v := DecodeAPR(m); return &v }},
		}
		for _, c := range cases {
			tid := r.Uint64()
			m := NewCM(make([]byte, MADLen), c.attr, tid, 0)
			require.True(t, c.msg.Encode(m), "%v", c.attr)
			require.Equal(t, c.msg, c.decode(m), "%v", c.attr)
			h := m.Header()
			require.Equal(t, Header{BaseVersion: 1, Class: ClassCM, ClassVersion: 2, Method: MethodSend, TID: tid, AttrID: c.attr}, h)
			again := NewCM(make([]byte, MADLen), c.attr, tid, 0)
			require.True(t, c.decode(m).(encoder).Encode(again))
			require.Equal(t, []byte(m), []byte(again), "%v", c.attr)
		}
		cpi := ClassPortInfo{BaseVersion: uint8(r.Uint32()), ClassVersion: uint8(r.Uint32()), CapabilityMask: uint16(r.Uint32()),
			CapabilityMask2: r.Uint32N(1 << 27), RespTimeValue: u8(5), RedirectGID: randGID(r), RedirectTC: uint8(r.Uint32()),
			RedirectSL: u8(4), RedirectFlowLabel: r.Uint32N(1 << 20), RedirectLID: uint16(r.Uint32()), RedirectPKey: uint16(r.Uint32()),
			RedirectQP: u24(), RedirectQKey: r.Uint32(), TrapGID: randGID(r), TrapTC: uint8(r.Uint32()), TrapSL: u8(4),
			TrapFlowLabel: r.Uint32N(1 << 20), TrapLID: uint16(r.Uint32()), TrapPKey: uint16(r.Uint32()),
			TrapHopLimit: uint8(r.Uint32()), TrapQP: u24(), TrapQKey: r.Uint32()}
		m := NewCM(make([]byte, MADLen), AttrClassPortInfo, 1, 0)
		cpi.Encode(m)
		require.Equal(t, cpi, DecodeClassPortInfo(m))
		require.Equal(t, make([]byte, DataLen-ClassPortInfoLen), []byte(m.Data()[ClassPortInfoLen:]))
	}
}

// TestEncodeRefusesOversizedPrivateData: a private data that does not fit
// its message is refused, not cut.
func TestEncodeRefusesOversizedPrivateData(t *testing.T) {
	m := NewCM(make([]byte, MADLen), AttrREQ, 1, 0)
	for _, c := range []struct {
		name string
		msg  encoder
	}{
		{"REQ", &REQ{PrivateData: make([]byte, REQPrivateLen+1)}},
		{"REP", &REP{PrivateData: make([]byte, REPPrivateLen+1)}},
		{"REJ ARI", &REJ{ARI: make([]byte, REJARILen+1)}},
		{"REJ", &REJ{PrivateData: make([]byte, REJPrivateLen+1)}},
		{"RTU", &RTU{PrivateData: make([]byte, RTUPrivateLen+1)}},
		{"DREQ", &DREQ{PrivateData: make([]byte, DREQPrivateLen+1)}},
		{"DREP", &DREP{PrivateData: make([]byte, DREPPrivateLen+1)}},
		{"MRA", &MRA{PrivateData: make([]byte, MRAPrivateLen+1)}},
		{"SIDR_REQ", &SIDRReq{PrivateData: make([]byte, SIDRReqPrivateLen+1)}},
		{"SIDR_REP", &SIDRRep{PrivateData: make([]byte, SIDRRepPrivateLen+1)}},
	} {
		require.False(t, c.msg.Encode(m), c.name)
	}
}

func TestParseMAD(t *testing.T) {
	for _, c := range []struct {
		n   int
		err error
	}{{0, ErrShort}, {23, ErrShort}, {255, ErrShort}, {256, nil}, {257, ErrLength}, {4096, ErrLength}} {
		_, err := ParseMAD(make([]byte, c.n))
		if c.err == nil {
			require.NoError(t, err, c.n)
		} else {
			require.ErrorIs(t, err, c.err, c.n)
		}
	}
}

// TestCheck is mad.c's and ib_cm's dispatch of what arrives on QP 1.
func TestCheck(t *testing.T) {
	cm := func(method Method, attr AttrID) Header {
		return Header{BaseVersion: 1, Class: ClassCM, ClassVersion: 2, Method: method, AttrID: attr}
	}
	for _, c := range []struct {
		name string
		h    Header
		want Verdict
	}{
		{"REQ", cm(MethodSend, AttrREQ), Deliver},
		{"SIDR_REP", cm(MethodSend, AttrSIDRRep), Deliver},
		{"LAP reaches ib_cm", cm(MethodSend, AttrLAP), Deliver},
		{"unknown CM attribute", cm(MethodSend, 0x0030), DropAttr},
		{"CM Send of ClassPortInfo", cm(MethodSend, AttrClassPortInfo), DropAttr},
		{"CM Get of REQ", cm(MethodGet, AttrREQ), DropCMMethod},
		{"CM GetResp of REP", cm(MethodGetResp, AttrREP), DropCMMethod},
		{"CM Get ClassPortInfo: no Get agent", cm(MethodGet, AttrClassPortInfo), Respond},
		{"CM Set ClassPortInfo", cm(MethodSet, AttrClassPortInfo), Respond},
		{"CM GetResp ClassPortInfo", cm(MethodGetResp, AttrClassPortInfo), DropNoAgent},
		{"CM class version 1", Header{BaseVersion: 1, Class: ClassCM, ClassVersion: 1, Method: MethodSend, AttrID: AttrREQ}, DropNoAgent},
		{"base version 2", Header{BaseVersion: 2, Class: ClassCM, ClassVersion: 2, Method: MethodSend, AttrID: AttrREQ}, DropBaseVersion},
		{"SMI on QP1", Header{BaseVersion: 1, Class: ClassSubnLID, ClassVersion: 1, Method: MethodGet}, DropSMI},
		{"DR SMI on QP1", Header{BaseVersion: 1, Class: ClassSubnDirect, ClassVersion: 1, Method: MethodGet}, DropSMI},
		{"PerfMgt Get", Header{BaseVersion: 1, Class: ClassPerf, ClassVersion: 1, Method: MethodGet, AttrID: 0x12}, Respond},
		{"SA Get", Header{BaseVersion: 1, Class: ClassSubnAdm, ClassVersion: 2, Method: MethodGet}, Respond},
		{"vendor Send", Header{BaseVersion: 1, Class: 0x09, ClassVersion: 1, Method: MethodSend}, DropNoAgent},
		{"Trap", Header{BaseVersion: 1, Class: ClassPerf, ClassVersion: 1, Method: MethodTrap}, DropNoAgent},
	} {
		require.Equal(t, c.want, Check(&c.h), c.name)
	}
	m := NewCM(make([]byte, MADLen), AttrClassPortInfo, 0x1234, 7)
	m[3] = byte(MethodGet)
	Unmatched(m)
	require.Equal(t, Header{BaseVersion: 1, Class: ClassCM, ClassVersion: 2, Method: MethodGetResp,
		Status: StatusUnsupportedMethodAttr, TID: 0x1234, AttrID: AttrClassPortInfo, AttrMod: 7}, m.Header())
}

func TestCMAHeader(t *testing.T) {
	for _, c := range []struct{ src, dst string }{
		{"198.18.0.12:43344", "198.18.0.11:7174"},
		{"[fe80::5054:ff:fe12:1]:1", "[fe80::5054:ff:fe12:b]:7174"},
		{"[::ffff:10.0.0.1]:5", "[::ffff:10.0.0.2]:6"},
	} {
		src, dst := netip.MustParseAddrPort(c.src), netip.MustParseAddrPort(c.dst)
		h := NewCMAHeader(src, dst)
		pd := make([]byte, REQPrivateLen)
		h.Put(pd)
		got, err := ParseCMAHeader(pd)
		require.NoError(t, err)
		require.Equal(t, h, got)
		require.Equal(t, src.Addr().Unmap(), got.Src)
		require.Equal(t, dst.Addr().Unmap(), got.Dst)
		require.Equal(t, src.Port(), got.Port)
	}
	_, err := ParseCMAHeader(make([]byte, CMAHeaderLen-1))
	require.ErrorIs(t, err, ErrShort)
	pd := make([]byte, CMAHeaderLen)
	pd[1] = 5 << 4
	_, err = ParseCMAHeader(pd)
	require.ErrorIs(t, err, ErrVersion)

	ps, port, ok := SplitServiceID(0x0000000001061c06)
	require.Equal(t, []any{PortSpaceTCP, uint16(7174), true}, []any{ps, port, ok})
	_, _, ok = SplitServiceID(0x1000000001061c06)
	require.False(t, ok)
	require.Equal(t, uint64(0x01111c06), ServiceID(PortSpaceUDP, 7174))
	require.Equal(t, "consumer defined", RejConsumerDefined.String())
	require.Equal(t, "unrecognized reason 99", RejReason(99).String())
}
