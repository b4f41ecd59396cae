package smcwire

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The counts below are the ones conformance/testdata/rxe/CATALOG.md lists
// for each capture ("SMC-R (independent decoder)", "LLC:", "CDC close
// flags:", "CM / SMC messages"); retransmitted SENDs count every time.
func TestCaptureCounts(t *testing.T) {
	tests := []struct {
		file      string
		clc       map[string]int
		llcTotal  int
		cdcTotal  int
		llc       map[string]int
		closeFlag map[string]int
		smcSYNs   int
	}{
		{
			file:    "smc_r_v2.pcap",
			clc:     map[string]int{"Proposal v2": 1, "Accept v2 first contact": 1, "Confirm v2 first contact": 1},
			smcSYNs: 2,
		},
		{
			file: "smcr_close.pcap",
			clc: map[string]int{"Proposal v2": 3, "Accept v2 first contact": 1, "Confirm v2 first contact": 1,
				"Accept v2": 2, "Confirm v2": 2},
			llcTotal: 44, cdcTotal: 13,
			llc: map[string]int{
				"ADD_LINK_v2": 1, "ADD_LINK_v2 RESP": 1, "CONFIRM_LINK_v2": 1, "CONFIRM_LINK_v2 RESP": 1,
				"CONFIRM_RKEY_v2": 4, "CONFIRM_RKEY_v2 RESP": 4, "DELETE_LINK_v2": 16, "DELETE_RKEY_v2": 6,
				"DELETE_RKEY_v2 RESP": 6, "TEST_LINK_v2": 2, "TEST_LINK_v2 RESP": 2,
			},
			closeFlag: map[string]int{"peer_done_writing": 2, "peer_conn_closed": 4, "peer_conn_abort": 2},
			smcSYNs:   6,
		},
		{
			file:     "smcr_echo_small.pcap",
			clc:      map[string]int{"Proposal v2": 1, "Accept v2 first contact": 1, "Confirm v2 first contact": 1},
			llcTotal: 8, cdcTotal: 11,
			llc: map[string]int{
				"ADD_LINK_v2": 1, "ADD_LINK_v2 RESP": 1, "CONFIRM_LINK_v2": 1, "CONFIRM_LINK_v2 RESP": 1,
				"DELETE_RKEY_v2": 2, "DELETE_RKEY_v2 RESP": 2,
			},
			closeFlag: map[string]int{"peer_done_writing": 2, "peer_conn_closed": 2},
			smcSYNs:   2,
		},
		// Verbs traffic must not look like SMC (the independent decoder of
		// CATALOG.md counts 10 resp. 12 false "LLC" messages here).
		{file: "rc_pingpong_s1024.pcap"},
		{file: "rping.pcap"},
		{file: "ud_pingpong_s512.pcap"},
		{file: "write_bw.pcap"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c := loadCapture(t, tt.file)
			clc := map[string]int{}
			for _, m := range c.tcp {
				if !IsCLC(m.data) {
					continue
				}
				msg, err := ParseCLC(m.data)
				require.NoError(t, err, "frame %d", m.frame)
				require.Len(t, msg, len(m.data), "one CLC message per segment")
				clc[msg.Name()]++
			}
			llc, closeFlag := map[string]int{}, map[string]int{}
			var nLLC, nCDC int
			for _, m := range c.sends {
				switch Classify(m.data) {
				case KindLLCv2, KindLLCv1:
					l, err := ParseLLC(m.data)
					require.NoError(t, err, "frame %d", m.frame)
					llc[l.Name()]++
					nLLC++
				case KindCDC:
					d, err := ParseCDC(m.data)
					require.NoError(t, err, "frame %d", m.frame)
					nCDC++
					if d.PeerDoneWriting() {
						closeFlag["peer_done_writing"]++
					}
					if d.PeerConnClosed() {
						closeFlag["peer_conn_closed"]++
					}
					if d.PeerConnAbort() {
						closeFlag["peer_conn_abort"]++
					}
				}
			}
			syns := 0
			for _, o := range c.syns {
				if HasSMCOption(o) {
					syns++
				}
			}
			assert.Equal(t, orEmpty(tt.clc), clc, "CLC")
			assert.Equal(t, tt.llcTotal, nLLC, "LLC total")
			assert.Equal(t, tt.cdcTotal, nCDC, "CDC total")
			assert.Equal(t, orEmpty(tt.llc), llc, "LLC types")
			assert.Equal(t, orEmpty(tt.closeFlag), closeFlag, "CDC close flags")
			assert.Equal(t, tt.smcSYNs, syns, "SYN/SYN-ACK with the SMC option")
		})
	}
}

func orEmpty(m map[string]int) map[string]int {
	if m == nil {
		return map[string]int{}
	}
	return m
}

// Every SMC message in the captures re-encodes from its Fields to the
// very bytes Linux sent: the builders lay messages out as Linux does.
func TestCaptureRebuildExact(t *testing.T) {
	clc, llc, cdc := smcMessages(t)
	require.Len(t, clc, 3+9+3)
	require.Len(t, llc, 44+8)
	require.Len(t, cdc, 13+11)
	for i, b := range clc {
		c, err := ParseCLC(b)
		require.NoError(t, err)
		var out []byte
		switch c.Type() {
		case CLCProposal:
			p, err := ParseProposal(b)
			require.NoError(t, err)
			f := p.Fields()
			out = AppendProposal(nil, &f)
		case CLCAccept, CLCConfirm:
			a, err := ParseAcceptConfirm(b)
			require.NoError(t, err)
			f := a.Fields()
			out = AppendAcceptConfirm(nil, &f)
		default:
			t.Fatalf("unexpected %v", c.Type())
		}
		assert.Equal(t, b, out, "CLC message %d (%s)", i, c.Name())
	}
	for i, b := range llc {
		l, err := ParseLLC(b)
		require.NoError(t, err)
		f := l.Fields()
		assert.Equal(t, b, AppendLLC(nil, &f), "LLC message %d (%s)", i, l.Name())
	}
	for i, b := range cdc {
		d, err := ParseCDC(b)
		require.NoError(t, err)
		f := d.Fields()
		assert.Equal(t, b, AppendCDC(nil, &f), "CDC message %d", i)
	}
}

func gid4(s string) GID { return GID(netip.MustParseAddr("::ffff:" + s).As16()) }

func mustPeerID(b ...byte) PeerID { return PeerID(b) }

var (
	macVM1 = MAC{0x52, 0x54, 0, 0, 0, 0x11}
	macVM2 = MAC{0x52, 0x54, 0, 0, 0, 0x12}
	ueid   = EIDFrom("RXEVM-TEST-UEID")
)

// Field values read off smcr_echo_small.pcap (kernel 6.12, SMC-Rv2.1) and
// smc_r_v2.pcap (kernel 6.1, SMC-Rv2.0) frame by frame.
func TestCaptureCLCFields(t *testing.T) {
	c := loadCapture(t, "smcr_echo_small.pcap")
	require.Len(t, c.tcp, 3)

	p, err := ParseProposal(c.tcp[0].data)
	require.NoError(t, err)
	assert.Equal(t, "198.18.0.12", c.tcp[0].src)
	assert.Equal(t, ProposalFields{
		CLCHeader: CLCHeader{Version: 2, TypeV2: TypeR, TypeV1: TypeN},
		SMCDInfo:  &SMCDInfo{},
		V2Ext: &ProposalV2Ext{Release: 1, RoCEGID: gid4("198.18.0.12"), MaxConns: 255, MaxLinks: 2,
			FeatureMask: 1, UserEIDs: []EID{ueid}},
	}, p.Fields())
	assert.Equal(t, 156, p.Length())
	assert.Equal(t, uint16(0), p.IPAreaOffset())
	assert.Equal(t, uint16(28), p.V2ExtOffset(), "v2 extension at byte 80")
	assert.False(t, p.HasIPArea())
	assert.Equal(t, "RXEVM-TEST-UEID", p.UserEID(0).String())

	a, err := ParseAcceptConfirm(c.tcp[1].data)
	require.NoError(t, err)
	assert.Equal(t, AcceptConfirmFields{
		CLCHeader: CLCHeader{Version: 2, TypeV1: TypeR, FirstContact: true},
		PeerID:    mustPeerID(0x2c, 0x2c, 0x52, 0x54, 0, 0, 0, 0x11),
		GID:       gid4("198.18.0.11"), MAC: macVM1, QPN: 0x11, RMBRKey: 0x3d7, RMBEIndex: 1,
		AlertToken: 1, RMBESizeCode: 2, QPMTU: 3, RMBVA: 0xffff8dbb834e0000, PSN: 8788221, EID: ueid,
		FirstContactExt: &FirstContactExt{V2Direct: true, OSType: OSLinux, Release: 1,
			Hostname: HostnameFrom("vm1"), MaxConns: 255, MaxLinks: 2, FeatureMask: 1},
	}, a.Fields())
	assert.Equal(t, uint32(65536), a.RMBESize())
	assert.Equal(t, 1024, a.QPMTU().Bytes())
	assert.Equal(t, "vm1", a.Hostname().String())

	cf, err := ParseAcceptConfirm(c.tcp[2].data)
	require.NoError(t, err)
	assert.Equal(t, CLCConfirm, cf.Type())
	assert.Equal(t, 180, cf.Length())
	assert.Equal(t, uint32(0x358), cf.RMBRKey())
	assert.Equal(t, uint32(0xdb7e98), cf.PSN())
	assert.Equal(t, uint32(0x11), cf.QPN(), "QPNs start at 0x11 on both VMs")
	assert.Equal(t, macVM2, cf.MAC())
	require.Equal(t, 1, cf.NumGIDs())
	assert.Equal(t, "::ffff:198.18.0.12", cf.ListGID(0).String())
	assert.Equal(t, "vm2", cf.Hostname().String())

	// Kernel 6.1 speaks SMCv2.0: release 0, no max conns/links, but the
	// first-contact extension is still 52 bytes (Accept 160, Confirm 180).
	old := loadCapture(t, "smc_r_v2.pcap")
	p, err = ParseProposal(old.tcp[0].data)
	require.NoError(t, err)
	assert.Equal(t, uint8(0), p.Release())
	assert.Equal(t, uint8(0), p.MaxConns())
	a, err = ParseAcceptConfirm(old.tcp[1].data)
	require.NoError(t, err)
	assert.Equal(t, 160, a.Length())
	assert.True(t, a.HasFirstContactExt())
	assert.Equal(t, uint8(0), a.Release())
	assert.Equal(t, OSLinux, a.OSType())
	assert.Equal(t, uint8(0), a.MaxLinks())
	assert.Equal(t, uint32(0x1164), a.RMBRKey())
	cf, err = ParseAcceptConfirm(old.tcp[2].data)
	require.NoError(t, err)
	assert.Equal(t, 1, cf.NumGIDs())
}

// The RMB rkeys of smcr_close (CATALOG: 198.18.0.11 0x328, 198.18.0.12
// 0x344) appear in the CLC Accept/Confirm of every connection, in every
// CONFIRM_RKEY and in every DELETE_RKEY request.
func TestCaptureRKeys(t *testing.T) {
	c := loadCapture(t, "smcr_close.pcap")
	want := map[string]uint32{"198.18.0.11": 0x328, "198.18.0.12": 0x344}
	var tokens []uint32
	for _, m := range c.tcp {
		a, err := ParseAcceptConfirm(m.data)
		if err == ErrType { // Proposal
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, want[m.src], a.RMBRKey(), "frame %d", m.frame)
		assert.Equal(t, uint32(65536), a.RMBESize())
		tokens = append(tokens, a.AlertToken())
	}
	assert.Equal(t, []uint32{1, 1, 2, 2, 3, 3}, tokens)
	var nConfirm, nDelete int
	for _, m := range c.sends {
		l, err := ParseLLC(m.data)
		if err != nil {
			continue
		}
		switch l.Type() {
		case LLCConfirmRKeyV2:
			r := ConfirmRKey(l)
			require.Equal(t, 1, r.NumRTokens())
			// a response echoes the request, so the rkey is the one of the
			// side that sent the request
			owner := m.src
			if l.IsResponse() {
				owner = other(m.src)
			}
			assert.Equal(t, want[owner], r.RToken(0).RKey, "frame %d", m.frame)
			nConfirm++
		case LLCDeleteRKeyV2:
			r := DeleteRKey(l)
			require.Equal(t, 1, r.NumRKeys())
			if l.IsResponse() {
				assert.Zero(t, r.RKey(0), "Linux zeroes the rkeys in the response")
				assert.Zero(t, r.NumInvalid())
			} else {
				assert.Equal(t, want[m.src], r.RKey(0), "frame %d", m.frame)
			}
			nDelete++
		}
	}
	assert.Equal(t, 8, nConfirm)
	assert.Equal(t, 12, nDelete)
}

func other(ip string) string {
	if ip == "198.18.0.11" {
		return "198.18.0.12"
	}
	return "198.18.0.11"
}

func TestCaptureLLCFields(t *testing.T) {
	c := loadCapture(t, "smcr_echo_small.pcap")
	var llcs []LLC
	for _, m := range c.sends {
		if k := Classify(m.data); k == KindLLCv2 {
			l, err := ParseLLC(m.data)
			require.NoError(t, err)
			llcs = append(llcs, l)
		} else {
			require.NotEqual(t, KindLLCv1, k, "6.12 speaks only LLC v2")
		}
	}
	require.Len(t, llcs, 8)

	cl := llcs[0]
	require.Equal(t, LLCConfirmLinkV2, cl.Type())
	assert.Equal(t, LLCFlagNoRMBEEyecatcher, cl.Flags())
	assert.Equal(t, ConfirmLinkFields{SenderMAC: macVM1, SenderGID: gid4("198.18.0.11"), SenderQPN: 0x11,
		LinkNum: 1, LinkUserID: 0x00000101, MaxLinks: 2, MaxConns: 255}, ConfirmLink(cl).Fields())
	assert.True(t, ConfirmLink(cl).NoRMBEEyecatcher())
	assert.Equal(t, "CONFIRM_LINK_v2 RESP", llcs[1].Name())
	assert.Equal(t, LLCFlagResponse|LLCFlagNoRMBEEyecatcher, llcs[1].Flags())

	// ADD LINK v2 is 88 bytes: length "58 00" and rkey count "01 00", both
	// little endian.
	al := llcs[2]
	require.Equal(t, LLCAddLinkV2, al.Type())
	assert.Equal(t, 88, al.Length())
	assert.Equal(t, []byte{0x58, 0x00}, []byte(al[1:3]))
	assert.Equal(t, []byte{0x01, 0x00}, []byte(al[70:72]))
	assert.Equal(t, AddLinkFields{SenderMAC: macVM1, SenderGID: gid4("198.18.0.11"), SenderQPN: 0x12,
		LinkNum: 2, QPMTU: 3, InitialPSN: 0xd90bbd,
		V2Ext: &AddLinkV2Ext{V2Direct: true, ClientTargetGID: gid4("198.18.0.11"),
			RKeys: []RKeyPair{{RKey: 0x3d7, RKeyNew: 0x5a7, VANew: 0xffff8dbb834e0000}}},
	}, AddLink(al).Fields())

	// The client has no alternate path and rejects; the v2 length
	// overwrote the reject reason.
	ar := AddLink(llcs[3])
	assert.Equal(t, "ADD_LINK_v2 RESP", llcs[3].Name())
	assert.True(t, ar.Rejected())
	assert.Equal(t, uint8(0), ar.RejectReason())
	assert.False(t, ar.HasV2Ext())
	assert.Equal(t, 44, llcs[3].Length())

	// smcr_close: rmmod on the server ends the link group.
	c = loadCapture(t, "smcr_close.pcap")
	reasons := map[string]int{}
	for _, m := range c.sends {
		l, err := ParseLLC(m.data)
		if err != nil || l.Type() != LLCDeleteLinkV2 {
			continue
		}
		d := DeleteLink(l)
		assert.True(t, d.All())
		assert.False(t, d.Orderly())
		assert.Zero(t, d.LinkNum())
		reasons[m.src+" "+d.Reason().String()]++
	}
	assert.Equal(t, map[string]int{"198.18.0.11 OP_INIT_TERM": 1, "198.18.0.12 PROG_INIT_TERM": 15}, reasons)
}

func TestCaptureCDCFields(t *testing.T) {
	c := loadCapture(t, "smcr_echo_small.pcap")
	var got []CDCFields
	var src []string
	for _, m := range c.sends {
		if Classify(m.data) == KindCDC {
			d, err := ParseCDC(m.data)
			require.NoError(t, err)
			got = append(got, d.Fields())
			src = append(src, m.src)
		}
	}
	require.Len(t, got, 11)
	// The client (.12) writes 100 bytes, the server echoes them; each CDC
	// announces the new producer cursor and the consumer cursor so far.
	assert.Equal(t, "198.18.0.12", src[0])
	assert.Equal(t, CDCFields{Seq: 1, Token: 1, Prod: Cursor{0, 100}}, got[0])
	assert.Equal(t, CDCFields{Seq: 1, Token: 1, Prod: Cursor{0, 100}, Cons: Cursor{0, 100}}, got[1])
	// after 100 + 1024 + 4096 + 8192 bytes
	last := got[7]
	assert.Equal(t, Cursor{0, 13412}, last.Prod)
	assert.Equal(t, Cursor{0, 13412}, last.Cons)
	assert.Equal(t, CDCPeerDoneWriting, got[8].ConnFlags)
	assert.Equal(t, CDCPeerConnClosed, got[9].ConnFlags)
	assert.Equal(t, CDCPeerDoneWriting|CDCPeerConnClosed, got[10].ConnFlags)
	assert.Equal(t, uint32(13412-5220), last.Prod.Diff(got[5].Prod, 65536))
}

func TestCaptureSMCOption(t *testing.T) {
	c := loadCapture(t, "smcr_echo_small.pcap")
	require.Len(t, c.syns, 2)
	for _, o := range c.syns {
		assert.True(t, HasSMCOption(o))
	}
	c = loadCapture(t, "rc_pingpong_s1024.pcap")
	for _, o := range c.syns {
		assert.False(t, HasSMCOption(o))
	}
}
