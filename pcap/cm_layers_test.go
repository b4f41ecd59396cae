package pcap

import (
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rdmacm/cmwire"
	"github.com/goroce/goroce/rocev2"
)

// rpingPackets returns the kernel rping capture's frames decoded by gopacket.
func rpingPackets(t *testing.T) []gopacket.Packet {
	t.Helper()
	var out []gopacket.Packet
	for _, f := range vectorFrames(t)["rping.pcap"] {
		out = append(out, gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default))
	}
	require.Len(t, out, 41)
	return out
}

// TestCMLayersRping: the five MADs of the kernel's rping decode as MAD,
// IBCM and (the REQ) RDMACM layers, one line each; nothing else does.
func TestCMLayersRping(t *testing.T) {
	want := map[int]string{
		1: "CM REQ comm 0xa3a187cc sid 0x1061c06 (TCP 7174) qpn 0x1a psn 0x4b8d0f mtu 1024 rr 1 id 1 retry 7 rnr 7 timeout 20/20 retries 15 " +
			"path ::ffff:198.18.0.12 > ::ffff:198.18.0.11 fl 0x49cb6 hop 64 ack 19 rdma_cm 198.18.0.12:43344 > 198.18.0.11",
		2:  "CM REP comm 0x3255f1ea remote 0xa3a187cc qpn 0x1a psn 0x7b0a1d rr 1 id 1 ack delay 15 rnr 7",
		3:  "CM RTU comm 0xa3a187cc remote 0x3255f1ea",
		40: "CM DREQ comm 0xa3a187cc remote 0x3255f1ea qpn 0x1a",
		41: "CM DREP comm 0x3255f1ea remote 0xa3a187cc",
	}
	for i, p := range rpingPackets(t) {
		n := i + 1
		require.Nil(t, p.ErrorLayer(), "frame %d", n)
		mad, cm, hdr := CMLayers(p)
		if _, ok := want[n]; !ok {
			require.Nil(t, mad, "frame %d", n)
			require.Equal(t, "", MADSummary(p))
			continue
		}
		require.NotNil(t, mad, "frame %d", n)
		require.NotNil(t, cm, "frame %d", n)
		require.Equal(t, want[n], MADSummary(p), "frame %d", n)
		require.Equal(t, cmwire.ClassCM, mad.Class)
		require.Equal(t, uint64(0x2cc87a1a3), mad.TID)
		if n == 1 {
			require.NotNil(t, hdr)
			require.Equal(t, netip.MustParseAddr("198.18.0.12"), hdr.Src)
			require.Len(t, hdr.LayerPayload(), cmwire.REQPrivateLen-cmwire.CMAHeaderLen)
		} else {
			require.Nil(t, hdr, "frame %d", n)
		}
	}
}

// TestCMLayersSerialize rebuilds each MAD of the capture from its layers'
// fields: the bytes are the kernel's.
func TestCMLayersSerialize(t *testing.T) {
	for _, p := range rpingPackets(t) {
		mad, cm, _ := CMLayers(p)
		if mad == nil {
			continue
		}
		buf := gopacket.NewSerializeBuffer()
		require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, mad, cm))
		orig := p.Layer(LayerTypeBTH).(*BTH).Packet().Payload()
		require.Equal(t, orig, buf.Bytes())
	}
}

// TestCMDecodingLayers: a DecodingLayerParser set with the IBCM layer
// linked to its MAD layer decodes the same message.
func TestCMDecodingLayers(t *testing.T) {
	var mad MAD
	var cm IBCM
	cm.LinkMAD(&mad)
	p := rpingPackets(t)[0]
	payload := p.Layer(LayerTypeBTH).(*BTH).Packet().Payload()
	require.NoError(t, mad.DecodeFromBytes(payload, gopacket.NilDecodeFeedback))
	require.Equal(t, LayerTypeIBCM, mad.NextLayerType())
	require.NoError(t, cm.DecodeFromBytes(mad.LayerPayload(), gopacket.NilDecodeFeedback))
	require.Equal(t, LayerTypeRDMACM, cm.NextLayerType())
	require.Equal(t, uint32(0xa3a187cc), cm.Msg.(cmwire.REQ).LocalCommID)

	var alone IBCM
	require.Error(t, alone.DecodeFromBytes(mad.LayerPayload(), gopacket.NilDecodeFeedback), "no header linked")
	require.Error(t, cm.DecodeFromBytes(mad.LayerPayload()[:100], gopacket.NilDecodeFeedback), "short")
}

// TestRoceNextLayerMAD: only a UD SEND_ONLY to QP 1 of exactly one MAD is
// a MAD.
func TestRoceNextLayerMAD(t *testing.T) {
	mad := make([]byte, cmwire.MADLen)
	for _, c := range []struct {
		name    string
		op      rocev2.Opcode
		dqpn    uint32
		payload []byte
		want    gopacket.LayerType
	}{
		{"MAD", rocev2.UDSendOnly, 1, mad, LayerTypeMAD},
		{"other QP", rocev2.UDSendOnly, 2, mad, gopacket.LayerTypePayload},
		{"short", rocev2.UDSendOnly, 1, mad[:255], gopacket.LayerTypePayload},
		{"long", rocev2.UDSendOnly, 1, make([]byte, 257), gopacket.LayerTypePayload},
		{"with immediate", rocev2.UDSendOnlyImm, 1, mad, gopacket.LayerTypePayload},
		{"RC", rocev2.RCSendOnly, 1, mad, gopacket.LayerTypePayload},
	} {
		require.Equal(t, c.want, roceNextLayer(c.op, c.dqpn, c.payload), c.name)
	}
}

// TestMADSummaryOther: a MAD of another class, and a ClassPortInfo answer.
func TestMADSummaryOther(t *testing.T) {
	m := cmwire.NewCM(make([]byte, cmwire.MADLen), cmwire.AttrClassPortInfo, 7, 0)
	m[3] = byte(cmwire.MethodGet)
	cmwire.Unmatched(m)
	p := madPacket(t, m)
	require.Equal(t, "MAD CM GetResp attr 0x0001 tid 0x7 status 0x000c ClassPortInfo version 0 cap 0x0 resp time 0", MADSummary(p))
	m[1] = byte(cmwire.ClassPerf)
	require.Equal(t, "MAD Perf GetResp attr 0x0001 tid 0x7 status 0x000c", MADSummary(madPacket(t, m)))
}

// madPacket decodes a MAD starting at the MAD layer.
func madPacket(t *testing.T, m cmwire.MAD) gopacket.Packet {
	t.Helper()
	p := gopacket.NewPacket(m, LayerTypeMAD, gopacket.Default)
	require.Nil(t, p.ErrorLayer())
	return p
}
