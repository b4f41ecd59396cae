package smcwire

import (
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProposalRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		f    ProposalFields
		len  int
	}{
		{
			// RFC 7609: SMC-R v1 over IPv4, no SMC-D block.
			name: "v1 SMC-R IPv4",
			f: ProposalFields{CLCHeader: CLCHeader{Version: 1, TypeV1: TypeR}, PeerID: PeerID{1, 2, 3, 4, 5, 6, 7, 8},
				GID: gid4("10.0.0.1"), MAC: macVM1,
				IPArea: &IPArea{Subnet: netip.MustParseAddr("10.0.0.0"), PrefixLen: 24}},
			len: 52,
		},
		{
			// A proposal offering SMC-R v1 and v2 over IPv4 without EIDs is 132 bytes.
			name: "v2 SMC-R v1+v2 IPv4",
			f: ProposalFields{CLCHeader: CLCHeader{Version: 2, TypeV1: TypeR, TypeV2: TypeR},
				SMCDInfo: &SMCDInfo{}, GID: gid4("10.0.0.1"),
				IPArea: &IPArea{Subnet: netip.MustParseAddr("10.0.0.0"), PrefixLen: 8},
				V2Ext:  &ProposalV2Ext{Release: 1, RoCEGID: gid4("10.0.0.1"), MaxConns: 255, MaxLinks: 2}},
			len: 132,
		},
		{
			name: "v2 both, IPv6 prefixes, EIDs, SMC-Dv2",
			f: ProposalFields{CLCHeader: CLCHeader{SMCD: true, Version: 2, TypeV1: TypeB, TypeV2: TypeB},
				SMCDInfo: &SMCDInfo{ISMGID: 0x1122334455667788, ISMCHID: 0xabcd},
				IPArea: &IPArea{Subnet: netip.MustParseAddr("192.168.1.0"), PrefixLen: 24, IPv6Prefixes: []IPv6Prefix{
					{netip.MustParseAddr("2001:db8::"), 64}, {netip.MustParseAddr("fd00::"), 8}}},
				V2Ext: &ProposalV2Ext{Release: 1, SEID: true, RoCEGID: GID(netip.MustParseAddr("2001:db8::1").As16()),
					MaxConns: 16, MaxLinks: 3, FeatureMask: 0x8001, UserEIDs: []EID{EIDFrom("A"), EIDFrom("B")}},
				SMCDv2: &SMCDv2Ext{SystemEID: EIDFrom("IBM-SYSZ-ISMSEID00000000"), ISMGIDs: []ISMGIDCHID{{1, 2}, {3, 4}, {5, 6}}}},
			len: 40 + 40 + 8 + 2*17 + 40 + 2*32 + 48 + 3*10 + 4,
		},
		{
			name: "v1 with SMC-D block and no IP area",
			f:    ProposalFields{CLCHeader: CLCHeader{Version: 1, TypeV1: TypeN}, SMCDInfo: &SMCDInfo{ISMGID: 7}},
			len:  84,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := AppendProposal([]byte{0xAA}, &tt.f)
			require.Equal(t, byte(0xAA), b[0], "appends")
			b = b[1:]
			assert.Len(t, b, tt.len)
			p, err := ParseProposal(b)
			require.NoError(t, err)
			assert.Equal(t, tt.f, p.Fields())
			assert.Equal(t, tt.f.IPArea != nil, p.HasIPArea())
			assert.Equal(t, tt.f.SMCDv2 != nil, p.HasSMCDv2Ext())
			_, err = json.Marshal(p.Fields())
			require.NoError(t, err)
		})
	}
}

func TestAcceptConfirmRoundTrip(t *testing.T) {
	base := AcceptConfirmFields{PeerID: PeerID{9, 9}, GID: gid4("1.2.3.4"), MAC: macVM2, QPN: 0xabcdef,
		RMBRKey: 0xdeadbeef, RMBEIndex: 1, AlertToken: 7, RMBESizeCode: 15, QPMTU: 5,
		RMBVA: 0x0102030405060708, PSN: 0xfedcba}
	tests := []struct {
		name string
		mod  func(f *AcceptConfirmFields)
		len  int
	}{
		{"v1 Accept", func(f *AcceptConfirmFields) { f.Version = 1 }, AcceptV1Len},
		{"v1 Confirm first contact", func(f *AcceptConfirmFields) {
			f.Version, f.Confirm, f.FirstContact = 1, true, true
		}, 68},
		{"v2 Accept", func(f *AcceptConfirmFields) { f.Version, f.EID = 2, ueid }, AcceptV2MinLen},
		{"v2 Accept first contact", func(f *AcceptConfirmFields) {
			f.Version, f.EID, f.FirstContact = 2, ueid, true
			f.FirstContactExt = &FirstContactExt{V2Direct: true, OSType: OSAIX, Release: 1,
				Hostname: HostnameFrom("host"), MaxConns: 1, MaxLinks: 1, FeatureMask: 3, VendorOptions: 0x11223344}
		}, 160},
		{"v2 Confirm first contact 2 GIDs", func(f *AcceptConfirmFields) {
			f.Version, f.Confirm, f.FirstContact = 2, true, true
			f.FirstContactExt = &FirstContactExt{OSType: OSLinux}
			f.GIDs = []GID{gid4("1.1.1.1"), gid4("2.2.2.2")}
		}, 160 + 4 + 32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := base
			tt.mod(&f)
			b := AppendAcceptConfirm(nil, &f)
			assert.Len(t, b, tt.len)
			a, err := ParseAcceptConfirm(b)
			require.NoError(t, err)
			if f.Version >= 2 && f.FirstContact && f.FirstContactExt == nil {
				f.FirstContactExt = &FirstContactExt{}
			}
			assert.Equal(t, f, a.Fields())
		})
	}
	// An SMC-D Accept is valid CLC but not decoded here.
	b := AppendAcceptConfirm(nil, &AcceptConfirmFields{CLCHeader: CLCHeader{Version: 1}})
	b[7] |= byte(TypeD)
	_, err := ParseAcceptConfirm(b)
	assert.Equal(t, ErrUnsupported, err)
}

func TestDecline(t *testing.T) {
	v1 := DeclineFields{CLCHeader: CLCHeader{Version: 1}, PeerID: PeerID{1}, Diagnosis: DiagDiffPrefix, OSType: OSLinux}
	b := AppendDecline(nil, &v1)
	assert.Len(t, b, DeclineV1Len)
	d, err := ParseDecline(b)
	require.NoError(t, err)
	assert.Equal(t, v1, d.Fields())
	assert.Equal(t, "0x03070000 (IP prefix/subnet mismatch)", d.Diagnosis().String())

	v2 := DeclineFields{CLCHeader: CLCHeader{Version: 2, FirstContact: true}, Diagnosis: DiagSyncErr,
		ExtraDiags: []DiagCode{DiagNoUEID, DiagNoSMCRDev, 0, 0}}
	b = AppendDecline(nil, &v2)
	assert.Len(t, b, DeclineV2Len)
	d, err = ParseDecline(b)
	require.NoError(t, err)
	assert.True(t, d.OutOfSync())
	assert.Equal(t, "Decline v2 out of sync", d.Name())
	assert.Equal(t, v2, d.Fields())
	assert.Equal(t, "no UEID", d.ExtraDiagnosis(0).Name())
	assert.Equal(t, "0x12345678", DiagCode(0x12345678).String())
}

func TestLLCRoundTrip(t *testing.T) {
	rk := []RKeyPair{{1, 2, 3}, {4, 5, 6}}
	tests := []LLCFields{
		{Type: LLCConfirmLink, Flags: LLCFlagNoRMBEEyecatcher, ConfirmLink: &ConfirmLinkFields{SenderMAC: macVM1,
			SenderGID: gid4("1.2.3.4"), SenderQPN: 0x123456, LinkNum: 1, LinkUserID: 0x01020304, MaxLinks: 3}},
		{Type: LLCConfirmLinkV2, Flags: LLCFlagResponse | LLCFlagNoRMBEEyecatcher, ConfirmLink: &ConfirmLinkFields{MaxConns: 255}},
		{Type: LLCAddLink, Flags: LLCFlagResponse | LLCFlagAddLinkReject, AddLink: &AddLinkFields{RejectReason: 1,
			SenderQPN: 0x42, LinkNum: 2, QPMTU: 4, InitialPSN: 0xabcdef}},
		{Type: LLCAddLinkV2, AddLink: &AddLinkFields{SenderMAC: macVM2, V2Ext: &AddLinkV2Ext{V2Direct: true,
			ClientTargetGID: gid4("5.6.7.8"), RKeys: rk}}},
		{Type: LLCAddLinkV2, AddLink: &AddLinkFields{V2Ext: &AddLinkV2Ext{}}},
		{Type: LLCAddLinkCont, AddLinkCont: &AddLinkContFields{LinkNum: 2, NumRKeys: 2, RKeys: rk}},
		// Linux's count is of the rkeys left to send, these included.
		{Type: LLCAddLinkCont, Flags: LLCFlagResponse, AddLinkCont: &AddLinkContFields{LinkNum: 3, NumRKeys: 5, RKeys: rk}},
		{Type: LLCDeleteLink, Flags: LLCFlagDeleteOrderly, DeleteLink: &DeleteLinkFields{LinkNum: 2, Reason: DelLostPath}},
		{Type: LLCDeleteLinkV2, Flags: LLCFlagDeleteAll, DeleteLink: &DeleteLinkFields{Reason: DelProgInitTerm}},
		{Type: LLCRequestAddLink, RequestAddLink: &RequestAddLinkFields{GIDs: []GID{gid4("9.9.9.9")}}},
		{Type: LLCRequestAddLinkV2, RequestAddLink: &RequestAddLinkFields{GIDs: []GID{gid4("1.1.1.1"), gid4("2.2.2.2"), gid4("3.3.3.3")}}},
		{Type: LLCConfirmRKey, Flags: LLCFlagRKeyRetry, ConfirmRKey: &ConfirmRKeyFields{RTokens: []RToken{{0, 7, 8}, {2, 9, 10}, {3, 11, 12}}}},
		{Type: LLCConfirmRKeyV2, Flags: LLCFlagResponse | LLCFlagRKeyNegative, ConfirmRKey: &ConfirmRKeyFields{RTokens: []RToken{{0, 7, 8}}}},
		{Type: LLCConfirmRKeyCont, ConfirmRKeyCont: &ConfirmRKeyContFields{NumRKeys: 5, RTokens: []RToken{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}}},
		{Type: LLCTestLink, TestLink: &TestLinkFields{UserData: [16]byte{1, 2, 3, 15: 16}}},
		{Type: LLCTestLinkV2, Flags: LLCFlagResponse, TestLink: &TestLinkFields{}},
		{Type: LLCDeleteRKey, Flags: LLCFlagResponse | LLCFlagRKeyNegative, DeleteRKey: &DeleteRKeyFields{Status: 0x40,
			RKeys: []uint32{1, 2, 3, 4, 5, 6, 7, 8}}},
		{Type: LLCDeleteRKeyV2, DeleteRKey: &DeleteRKeyFields{RKeys: []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}},
	}
	for _, f := range tests {
		t.Run(f.Type.String(), func(t *testing.T) {
			b := AppendLLC(nil, &f)
			require.Equal(t, Classify(b) == KindLLCv2, f.Type.Version() == 2, "classify %x", b)
			require.NotEqual(t, KindNone, Classify(b))
			l, err := ParseLLC(b)
			require.NoError(t, err)
			assert.Equal(t, len(b), l.Length())
			assert.Equal(t, f, l.Fields())
			_, err = json.Marshal(l.Fields())
			require.NoError(t, err)
		})
	}
}

func TestLLCLengths(t *testing.T) {
	// v2 DELETE RKEY with 12 rkeys: 8 + 48 = 56 bytes, length little endian.
	b := AppendDeleteRKey(nil, true, 0, &DeleteRKeyFields{RKeys: make([]uint32, 12)})
	assert.Len(t, b, 56)
	assert.Equal(t, []byte{0x29, 56, 0}, b[:3])

	// A big-endian sender (s390x Linux) writes the length the other way
	// round; it parses too.
	b[1], b[2] = 0, 56
	l, err := ParseLLC(b)
	require.NoError(t, err)
	assert.Equal(t, 56, l.Length())
	assert.Equal(t, KindLLCv2, Classify(b))

	// The same for an ADD LINK v2 extension rkey count.
	b = AppendAddLink(nil, true, 0, &AddLinkFields{V2Ext: &AddLinkV2Ext{RKeys: make([]RKeyPair, 3)}})
	assert.Len(t, b, 72+48)
	b[1], b[2] = 0, byte(len(b))
	b[70], b[71] = 0, 3
	l, err = ParseLLC(b)
	require.NoError(t, err)
	assert.Equal(t, 3, AddLink(l).NumRKeys())

	// v1 length byte must be 44; a v2 length must be 44..8192 and present.
	_, err = ParseLLC(append([]byte{0x01, 43}, make([]byte, 42)...))
	assert.Equal(t, ErrLength, err)
	_, err = ParseLLC([]byte{0x21, 0xff, 0xff, 0})
	assert.Equal(t, ErrLength, err)
	_, err = ParseLLC(append([]byte{0x21, 0x00, 0x20}, make([]byte, 100)...))
	assert.Equal(t, ErrShort, err, "8192 bytes announced")
	_, err = ParseLLC(append([]byte{0x0a, 44}, make([]byte, 42)...))
	assert.Equal(t, ErrType, err)
	_, err = ParseLLC(append([]byte{0x23, 44}, make([]byte, 42)...))
	assert.Equal(t, ErrType, err, "no ADD LINK CONTINUE in v2")

	// Counts that do not fit are rejected.
	b = AppendDeleteRKey(nil, false, 0, &DeleteRKeyFields{})
	b[4] = 9
	_, err = ParseLLC(b)
	assert.Equal(t, ErrCount, err)
	b = AppendRequestAddLink(nil, true, 0, &RequestAddLinkFields{})
	b[24] = 2
	_, err = ParseLLC(b)
	assert.Equal(t, ErrCount, err)
	b = AppendConfirmRKey(nil, true, 0, &ConfirmRKeyFields{})
	b[4] = 3
	_, err = ParseLLC(b)
	assert.Equal(t, ErrCount, err)
	b = AppendAddLink(nil, true, 0, &AddLinkFields{V2Ext: &AddLinkV2Ext{}})
	b[70], b[71] = 1, 1
	_, err = ParseLLC(b)
	assert.Equal(t, ErrCount, err)
	b = append(AppendAddLink(nil, true, 0, &AddLinkFields{}), 0, 0, 0, 0)
	b[1] = 48
	_, err = ParseLLC(b)
	assert.Equal(t, ErrLength, err, "ADD LINK v2 between 44 and the extension")
}

func TestLLCNames(t *testing.T) {
	assert.Equal(t, "CONFIRM_LINK", LLCConfirmLink.String())
	assert.Equal(t, "DELETE_RKEY_v2", LLCDeleteRKeyV2.String())
	assert.Equal(t, "LLC 0x2a", LLCType(0x2a).String())
	assert.Equal(t, uint8(2), LLCTestLinkV2.Version())
	assert.Equal(t, LLCTestLink, LLCTestLinkV2.Base())
	b := AppendTestLink(nil, true, LLCFlagResponse, &TestLinkFields{})
	l, err := ParseLLC(b)
	require.NoError(t, err)
	assert.Equal(t, "TEST_LINK_v2 RESP", l.Name())
	assert.Equal(t, "0x00990000", DeleteLinkReason(0x990000).String())
}

func TestCDCRoundTripAndCursors(t *testing.T) {
	f := CDCFields{Seq: 0xffff, Token: 0x01020304, Prod: Cursor{7, 65535}, Cons: Cursor{0xffff, 1},
		ProdFlags: CDCWriteBlocked | CDCFailoverValidate, ConnFlags: CDCPeerConnAbort}
	b := AppendCDC(nil, &f)
	require.Len(t, b, CDCLen)
	require.Equal(t, KindCDC, Classify(b))
	c, err := ParseCDC(b)
	require.NoError(t, err)
	assert.Equal(t, f, c.Fields())
	assert.True(t, c.PeerConnAbort())

	const size = 65536
	cur := Cursor{0, 65000}
	next := cur.Add(1000, size)
	assert.Equal(t, Cursor{1, 464}, next)
	assert.Equal(t, uint32(1000), next.Diff(cur, size))
	assert.Zero(t, cur.Diff(next, size), "backwards is 0")
	assert.True(t, cur.Before(next))
	assert.False(t, next.Before(cur))
	// wrap 0 comes after 0xFFFF
	w := Cursor{0xffff, 65000}
	assert.Equal(t, Cursor{0, 464}, w.Add(1000, size))
	assert.Equal(t, uint32(1000), w.Add(1000, size).Diff(w, size))
	assert.True(t, w.Before(w.Add(1000, size)))
	assert.Equal(t, uint32(10), Cursor{3, 20}.Diff(Cursor{3, 10}, size))

	_, err = ParseCDC([]byte{0xfe, 43})
	assert.Equal(t, ErrLength, err)
	_, err = ParseCDC([]byte{0xfe, 44, 0})
	assert.Equal(t, ErrShort, err)
	_, err = ParseCDC([]byte{0x21, 44})
	assert.Equal(t, ErrType, err)
}

func TestClassify(t *testing.T) {
	cdc := AppendCDC(nil, &CDCFields{})
	llc1 := AppendTestLink(nil, false, 0, &TestLinkFields{})
	llc2 := AppendTestLink(nil, true, 0, &TestLinkFields{})
	tests := []struct {
		name string
		b    []byte
		want Kind
	}{
		{"CDC", cdc, KindCDC},
		{"LLC v1", llc1, KindLLCv1},
		{"LLC v2 44 bytes", llc2, KindLLCv2},
		{"CDC padded to 48", append(append([]byte{}, cdc...), 0, 0, 0, 0), KindNone},
		{"LLC v1 padded", append(append([]byte{}, llc1...), 0), KindNone},
		{"LLC v2 longer than its length", append(append([]byte{}, llc2...), 0), KindNone},
		{"short", cdc[:43], KindNone},
		{"zeros", make([]byte, 44), KindNone},
		{"unknown type", append([]byte{0x0a, 44}, make([]byte, 42)...), KindNone},
		{"empty", nil, KindNone},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Classify(tt.b), tt.name)
	}
	assert.Equal(t, "LLCv2", KindLLCv2.String())
}

func TestCLCHeaderErrors(t *testing.T) {
	good := AppendDecline(nil, &DeclineFields{CLCHeader: CLCHeader{Version: 1}})
	mut := func(f func(b []byte)) []byte {
		b := append([]byte{}, good...)
		f(b)
		return b
	}
	tests := []struct {
		name string
		b    []byte
		err  ParseError
	}{
		{"short", good[:7], ErrShort},
		{"eyecatcher", mut(func(b []byte) { b[0] = 0 }), ErrEyecatcher},
		{"version 0", mut(func(b []byte) { b[7] = 0 }), ErrVersion},
		{"length below header+trailer", mut(func(b []byte) { b[5], b[6] = 0, 11 }), ErrLength},
		{"length beyond buffer", mut(func(b []byte) { b[6]++ }), ErrShort},
		{"trailer", mut(func(b []byte) { b[len(b)-1] = 0 }), ErrTrailer},
	}
	for _, tt := range tests {
		_, err := ParseCLC(tt.b)
		assert.Equal(t, tt.err, err, tt.name)
	}
	_, err := ParseProposal(good)
	assert.Equal(t, ErrType, err)
	_, err = ParseAcceptConfirm(good)
	assert.Equal(t, ErrType, err)
	// The SMC-D eyecatcher works in both places, and trailing bytes of the
	// segment are not part of the message.
	d := AppendDecline(nil, &DeclineFields{CLCHeader: CLCHeader{SMCD: true, Version: 1}})
	c, err := ParseCLC(append(d, 1, 2, 3))
	require.NoError(t, err)
	assert.True(t, c.IsSMCD())
	assert.Equal(t, EyecatcherD, c.Trailer())
	assert.Len(t, c, DeclineV1Len)
	for _, e := range ParseErrors {
		assert.NotEmpty(t, e.Error())
	}
	assert.Equal(t, "smcwire: unknown parse error", ParseError(0).Error())
}

func TestProposalOffsetErrors(t *testing.T) {
	f := ProposalFields{CLCHeader: CLCHeader{Version: 2, TypeV1: TypeR, TypeV2: TypeB}, SMCDInfo: &SMCDInfo{},
		IPArea: &IPArea{Subnet: netip.MustParseAddr("10.0.0.0")}, V2Ext: &ProposalV2Ext{}, SMCDv2: &SMCDv2Ext{}}
	good := AppendProposal(nil, &f)
	_, err := ParseProposal(good)
	require.NoError(t, err)
	mut := func(f func(b []byte)) []byte {
		b := append([]byte{}, good...)
		f(b)
		return b
	}
	tests := []struct {
		name string
		b    []byte
		err  ParseError
	}{
		{"IP area offset", mut(func(b []byte) { b[38], b[39] = 0xff, 0 }), ErrOffset},
		{"IPv6 prefix count", mut(func(b []byte) { b[80+7] = 0xff }), ErrCount},
		{"v2 extension offset", mut(func(b []byte) { b[50], b[51] = 0x10, 0 }), ErrOffset},
		{"EID count", mut(func(b []byte) { b[88] = 0xff }), ErrCount},
		{"SMC-Dv2 offset", mut(func(b []byte) { b[88+6] = 0x10 }), ErrOffset},
		{"ISM GID count", mut(func(b []byte) { b[88+1] = 1 }), ErrCount},
	}
	for _, tt := range tests {
		_, err := ParseProposal(tt.b)
		assert.Equal(t, tt.err, err, tt.name)
	}
}

func TestTCPOption(t *testing.T) {
	linux := []byte{2, 4, 5, 0xb4, 4, 2, 8, 10, 0x70, 0x8f, 0x91, 0x20, 0, 0, 0, 0, 1, 3, 3, 6, 1, 1, 0xfe, 6, 0xe2, 0xd4, 0xc3, 0xd9}
	assert.True(t, HasSMCOption(linux))
	assert.True(t, HasSMCOption(AppendSMCOption(nil)))
	assert.True(t, HasSMCOption([]byte{0xfe, 8, 0xe2, 0xd4, 0xc3, 0xd9, 0, 0}), "a longer even length, as Linux's parser accepts")
	assert.Equal(t, []byte{1, 1, 0xfe, 6, 0xe2, 0xd4, 0xc3, 0xd9}, AppendSMCOption(nil))
	for _, b := range [][]byte{
		nil,
		{0, 0xfe, 6, 0xe2, 0xd4, 0xc3, 0xd9}, // after End of Option List
		{0xfe, 6, 0xe2, 0xd4, 0xc3, 0xc4},    // SMC-D magic
		{0xfe, 7, 0xe2, 0xd4, 0xc3, 0xd9, 0}, // odd length (Linux takes any even length from 6)
		{0xfe, 6, 0xe2, 0xd4, 0xc3},          // truncated
		{2, 0},                               // bad length
		{0xfe},                               // no length
		{2, 4, 5, 0xb4, 0xfe, 10, 0xe2, 0xd4, 0xc3}, // length past the end
	} {
		assert.False(t, HasSMCOption(b), "%x", b)
	}
}

func TestSizes(t *testing.T) {
	assert.Equal(t, uint32(16384), RMBESize(0))
	assert.Equal(t, uint32(65536), RMBESize(2))
	assert.Equal(t, uint32(512<<20), RMBESize(15))
	for _, tt := range []struct {
		size int
		code uint8
	}{{1, 0}, {16384, 0}, {16385, 1}, {32768, 1}, {65536, 2}, {65537, 3}, {512 << 20, 15}, {1 << 30, 15}} {
		assert.Equal(t, tt.code, RMBESizeCode(tt.size), "%d", tt.size)
	}
	assert.Equal(t, 256, QPMTU(1).Bytes())
	assert.Equal(t, 4096, QPMTU(5).Bytes())
	assert.Zero(t, QPMTU(0).Bytes())
	assert.Zero(t, QPMTU(6).Bytes())
	assert.Equal(t, QPMTU(3), QPMTUFor(1024))
	assert.Zero(t, QPMTUFor(1500))
	assert.Equal(t, "52:54:00:00:00:12", macVM2.String())
	assert.Equal(t, "0102000000000000", PeerID{1, 2}.String())
	assert.Equal(t, "Linux", OSLinux.String())
	assert.Equal(t, "SMC-R/SMC-D", TypeB.String())
	j, err := json.Marshal(struct {
		G GID
		M MAC
		E EID
	}{gid4("198.18.0.11"), macVM1, ueid})
	require.NoError(t, err)
	assert.JSONEq(t, `{"G":"::ffff:198.18.0.11","M":"52:54:00:00:00:11","E":"RXEVM-TEST-UEID"}`, string(j))
}
