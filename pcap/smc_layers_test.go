package pcap

import (
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/smcr/smcwire"
)

// Decoding every frame of the captures with gopacket from the Ethernet
// layer down yields the SMC messages CATALOG.md counts: LLC and CDC below
// the BTH of RC SEND_ONLY packets, CLC through SMCLayers, the SMC option
// in the SYNs.
func TestSMCLayersCaptures(t *testing.T) {
	tests := []struct {
		file                 string
		clc, llc, cdc, syns  int
		llcNames             map[string]int
		closeFlags           map[string]int
		firstCLC, firstLLC   string
		firstCDC, lastLLCSum string
	}{
		{file: "smc_r_v2.pcap", clc: 3, syns: 2,
			firstCLC: `CLC Proposal v2 len 156 v1 none v2 SMC-R release 0 gid ::ffff:198.18.0.12 eid "RXEVM-TEST-UEID"`},
		{file: "smcr_close.pcap", clc: 9, llc: 44, cdc: 13, syns: 6,
			llcNames: map[string]int{
				"ADD_LINK_v2": 1, "ADD_LINK_v2 RESP": 1, "CONFIRM_LINK_v2": 1, "CONFIRM_LINK_v2 RESP": 1,
				"CONFIRM_RKEY_v2": 4, "CONFIRM_RKEY_v2 RESP": 4, "DELETE_LINK_v2": 16, "DELETE_RKEY_v2": 6,
				"DELETE_RKEY_v2 RESP": 6, "TEST_LINK_v2": 2, "TEST_LINK_v2 RESP": 2},
			closeFlags: map[string]int{"peer_done_writing": 2, "peer_conn_closed": 4, "peer_conn_abort": 2},
			lastLLCSum: "LLC DELETE_LINK_v2 len 44 all reason PROG_INIT_TERM"},
		{file: "smcr_echo_small.pcap", clc: 3, llc: 8, cdc: 11, syns: 2,
			llcNames: map[string]int{"ADD_LINK_v2": 1, "ADD_LINK_v2 RESP": 1, "CONFIRM_LINK_v2": 1,
				"CONFIRM_LINK_v2 RESP": 1, "DELETE_RKEY_v2": 2, "DELETE_RKEY_v2 RESP": 2},
			closeFlags: map[string]int{"peer_done_writing": 2, "peer_conn_closed": 2},
			firstCLC:   `CLC Proposal v2 len 156 v1 none v2 SMC-R release 1 gid ::ffff:198.18.0.12 max conns 255 links 2 eid "RXEVM-TEST-UEID"`,
			firstLLC:   "LLC CONFIRM_LINK_v2 len 44 link 1 qpn 0x11 gid ::ffff:198.18.0.11 max links 2 conns 255",
			firstCDC:   "CDC seq 1 token 1 prod 0:100 cons 0:0",
			lastLLCSum: "LLC DELETE_RKEY_v2 RESP len 44 rkey 0x0"},
		{file: "rc_pingpong_s1024.pcap"},
		{file: "rping.pcap"},
		{file: "ud_pingpong_s512.pcap"},
	}
	frames := vectorFrames(t)
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			var clc, llc, cdc, syns int
			names, flags := map[string]int{}, map[string]int{}
			var firstCLC, firstLLC, firstCDC, lastLLC string
			for i, data := range frames[tt.file] {
				p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
				require.Nil(t, p.ErrorLayer(), "frame %d", i+1)
				if tcp, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP); ok && tcp.SYN && HasSMCOption(tcp) {
					syns++
				}
				for _, l := range SMCLayers(p) {
					s := SMCSummary(l)
					switch m := l.(type) {
					case *SMCCLC:
						clc++
						firstCLC = first(firstCLC, s)
					case *SMCLLC:
						llc++
						names[m.Name()]++
						firstLLC, lastLLC = first(firstLLC, s), s
						require.NotNil(t, p.Layer(LayerTypeBTH))
					case *SMCCDC:
						cdc++
						firstCDC = first(firstCDC, s)
						for _, f := range CDCFlagNames(m.ProdFlags, m.ConnFlags) {
							flags[f]++
						}
					}
				}
			}
			assert.Equal(t, tt.clc, clc, "CLC")
			assert.Equal(t, tt.llc, llc, "LLC")
			assert.Equal(t, tt.cdc, cdc, "CDC")
			assert.Equal(t, tt.syns, syns, "SYNs with the SMC option")
			if tt.llcNames != nil {
				assert.Equal(t, tt.llcNames, names)
				assert.Equal(t, tt.closeFlags, flags)
			}
			for _, s := range [][2]string{{tt.firstCLC, firstCLC}, {tt.firstLLC, firstLLC}, {tt.firstCDC, firstCDC}, {tt.lastLLCSum, lastLLC}} {
				if s[0] != "" {
					assert.Equal(t, s[0], s[1])
				}
			}
		})
	}
}

func first(have, s string) string {
	if have != "" {
		return have
	}
	return s
}

// The layers carry the smcwire fields; re-serialising them gives back the
// bytes of the capture.
func TestSMCLayersFieldsAndSerialize(t *testing.T) {
	frames := vectorFrames(t)["smcr_echo_small.pcap"]
	var accept *SMCCLC
	var addLink *SMCLLC
	var cdcs []*SMCCDC
	for _, data := range frames {
		p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		for _, l := range SMCLayers(p) {
			switch m := l.(type) {
			case *SMCCLC:
				if m.Type == smcwire.CLCAccept {
					accept = m
				}
			case *SMCLLC:
				if m.Type == smcwire.LLCAddLinkV2 && !m.Msg.IsResponse() {
					addLink = m
				}
			case *SMCCDC:
				cdcs = append(cdcs, m)
			}
			buf := gopacket.NewSerializeBuffer()
			require.NoError(t, l.(gopacket.SerializableLayer).SerializeTo(buf, gopacket.SerializeOptions{}))
			assert.Equal(t, l.LayerContents(), buf.Bytes(), SMCSummary(l))
		}
	}
	require.NotNil(t, accept)
	a := accept.AcceptConfirm
	require.NotNil(t, a)
	assert.True(t, accept.Header.FirstContact)
	assert.Equal(t, uint32(0x3d7), a.RMBRKey)
	assert.Equal(t, uint64(0xffff8dbb834e0000), a.RMBVA)
	assert.Equal(t, "vm1", a.FirstContactExt.Hostname.String())
	assert.Equal(t, `CLC Accept v2 first contact len 160 qpn 0x11 psn 8788221 mtu 1024 rkey 0x3d7 va 0xffff8dbb834e0000 token 1 rmbe 65536 host "vm1" os Linux release 1 direct`,
		SMCSummary(accept))

	require.NotNil(t, addLink)
	assert.Equal(t, 88, addLink.Length)
	require.NotNil(t, addLink.AddLink.V2Ext)
	assert.Equal(t, []smcwire.RKeyPair{{RKey: 0x3d7, RKeyNew: 0x5a7, VANew: 0xffff8dbb834e0000}}, addLink.AddLink.V2Ext.RKeys)
	assert.Equal(t, "LLC ADD_LINK_v2 len 88 link 2 qpn 0x12 psn 14224317 mtu 1024 gid ::ffff:198.18.0.11 rkey 0x3d7->0x5a7",
		SMCSummary(addLink))

	require.Len(t, cdcs, 11)
	assert.Equal(t, smcwire.Cursor{Count: 13412}, cdcs[7].Prod)
	assert.Equal(t, "CDC seq 6 token 1 prod 0:13412 cons 0:13412 peer_done_writing peer_conn_closed", SMCSummary(cdcs[10]))
}

// roceNextLayer hands only complete RC SENDs to the SMC decoders.
func TestRoceNextLayerSMC(t *testing.T) {
	cdc := smcwire.AppendCDC(nil, &smcwire.CDCFields{Seq: 1})
	llc := smcwire.AppendTestLink(nil, true, 0, &smcwire.TestLinkFields{})
	tests := []struct {
		op      rocev2.Opcode
		payload []byte
		want    gopacket.LayerType
	}{
		{rocev2.RCSendOnly, cdc, LayerTypeSMCCDC},
		{rocev2.RCSendOnly, llc, LayerTypeSMCLLC},
		{rocev2.RCSendOnlyImm, llc, LayerTypeSMCLLC},
		{rocev2.RCSendOnlyInv, cdc, LayerTypeSMCCDC},
		{rocev2.RCSendFirst, llc, gopacket.LayerTypePayload},
		{rocev2.RCSendLast, cdc, gopacket.LayerTypePayload},
		{rocev2.RCWriteOnly, cdc, gopacket.LayerTypePayload},
		{rocev2.UCSendOnly, cdc, gopacket.LayerTypePayload},
		{rocev2.UDSendOnly, llc, gopacket.LayerTypePayload},
		{rocev2.RCSendOnly, append(append([]byte{}, cdc...), 0), gopacket.LayerTypePayload},
		{rocev2.RCSendOnly, make([]byte, 44), gopacket.LayerTypePayload},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, roceNextLayer(tt.op, 0x11, tt.payload), "%v %x", tt.op, tt.payload[:4])
	}
}

// The decoders also work on their own, from the message bytes.
func TestSMCDecodeDirect(t *testing.T) {
	llc := smcwire.AppendDeleteLink(nil, false, smcwire.LLCFlagDeleteOrderly,
		&smcwire.DeleteLinkFields{LinkNum: 2, Reason: smcwire.DelLostPath})
	p := gopacket.NewPacket(llc, LayerTypeSMCLLC, gopacket.Default)
	l, ok := p.Layer(LayerTypeSMCLLC).(*SMCLLC)
	require.True(t, ok)
	assert.Equal(t, smcwire.LLCDeleteLink, l.Type)
	assert.Equal(t, &smcwire.DeleteLinkFields{LinkNum: 2, Reason: smcwire.DelLostPath}, l.DeleteLink)
	assert.Equal(t, "LLC DELETE_LINK len 44 link 2 orderly reason LOST_PATH", SMCSummary(l))

	cdc := smcwire.AppendCDC(nil, &smcwire.CDCFields{Seq: 9, Token: 3, ProdFlags: smcwire.CDCWriteBlocked})
	p = gopacket.NewPacket(cdc, LayerTypeSMCCDC, gopacket.Default)
	c, ok := p.Layer(LayerTypeSMCCDC).(*SMCCDC)
	require.True(t, ok)
	assert.Equal(t, uint16(9), c.Seq)
	assert.Equal(t, "CDC seq 9 token 3 prod 0:0 cons 0:0 write_blocked", SMCSummary(c))

	// Truncated input is a decode failure flagged as truncated.
	p = gopacket.NewPacket(llc[:40], LayerTypeSMCLLC, gopacket.Default)
	require.NotNil(t, p.ErrorLayer())
	assert.Equal(t, smcwire.ErrShort, p.ErrorLayer().Error())
	assert.True(t, p.Metadata().Truncated)

	// Two CLC messages in one segment decode as a chain; a third,
	// truncated one is an error after the first two.
	d1 := smcwire.AppendDecline(nil, &smcwire.DeclineFields{CLCHeader: smcwire.CLCHeader{Version: 1}, Diagnosis: smcwire.DiagPeerNoSMC})
	d2 := smcwire.AppendDecline(nil, &smcwire.DeclineFields{CLCHeader: smcwire.CLCHeader{Version: 2}, Diagnosis: smcwire.DiagNoUEID,
		ExtraDiags: []smcwire.DiagCode{0}})
	seg := append(append(append([]byte{}, d1...), d2...), d1[:10]...)
	p = gopacket.NewPacket(seg, LayerTypeSMCCLC, gopacket.Default)
	var got []string
	for _, l := range SMCLayers(p) {
		got = append(got, SMCSummary(l))
	}
	assert.Equal(t, []string{
		"CLC Decline v1 len 28 diag 0x03010000 (peer did not indicate SMC)",
		"CLC Decline v2 len 44 diag 0x03030008 (no UEID)",
	}, got)
	require.NotNil(t, p.ErrorLayer())
	clcs, err := DecodeCLC(seg)
	assert.Len(t, clcs, 2)
	assert.Equal(t, smcwire.ErrShort, err)
	clcs, err = DecodeCLC([]byte("GET / HTTP/1.1\r\n"))
	assert.Empty(t, clcs)
	assert.NoError(t, err)

	// An SMC-D Accept decodes its header only.
	acc := smcwire.AppendAcceptConfirm(nil, &smcwire.AcceptConfirmFields{CLCHeader: smcwire.CLCHeader{SMCD: true, Version: 1}})
	acc[7] |= byte(smcwire.TypeD)
	clcs, err = DecodeCLC(acc)
	require.NoError(t, err)
	require.Len(t, clcs, 1)
	assert.Nil(t, clcs[0].AcceptConfirm)
	assert.Equal(t, "CLC Accept v1 len 68 smcd", SMCSummary(clcs[0]))
	assert.Error(t, clcs[0].SerializeTo(gopacket.NewSerializeBuffer(), gopacket.SerializeOptions{}))
}

func TestHasSMCOptionLayer(t *testing.T) {
	tcp := &layers.TCP{Options: []layers.TCPOption{
		{OptionType: layers.TCPOptionKindNop},
		{OptionType: 254, OptionLength: 6, OptionData: []byte{0xe2, 0xd4, 0xc3, 0xd9}},
	}}
	assert.True(t, HasSMCOption(tcp))
	tcp.Options[1].OptionData = []byte{0xe2, 0xd4, 0xc3, 0xc4}
	assert.False(t, HasSMCOption(tcp))
	assert.False(t, HasSMCOption(&layers.TCP{}))
}
