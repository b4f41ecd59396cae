package cmwire

import (
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/rxevectors"
)

// rpingMADs returns the MADs of the kernel's rping capture (6.1 rxe, client
// 198.18.0.12, server 198.18.0.11), in frame order.
func rpingMADs(t *testing.T) []MAD {
	t.Helper()
	frames, err := rxevectors.Frames(filepath.Join("..", "..", "conformance", "testdata", "rxe", "rping.pcap"))
	require.NoError(t, err)
	var out []MAD
	for _, f := range frames {
		const roce = 14 + 20 + 8 // Ethernet, IPv4, UDP
		if len(f) < roce+12 || f[roce] != 0x64 {
			continue
		}
		payload := f[roce+12+8 : len(f)-4] // BTH, DETH ... ICRC
		m, err := ParseMAD(payload)
		require.NoError(t, err)
		out = append(out, m)
	}
	require.Len(t, out, 5)
	return out
}

func TestRpingCaptureDecodes(t *testing.T) {
	mads := rpingMADs(t)
	const tid = 0x00000002cc87a1a3
	client, server := uint32(0xa3a187cc), uint32(0x3255f1ea)
	for _, m := range mads {
		h := m.Header()
		require.Equal(t, Header{BaseVersion: 1, Class: ClassCM, ClassVersion: 2, Method: MethodSend, TID: tid, AttrID: h.AttrID}, h)
		require.Equal(t, Deliver, Check(&h))
	}

	req := DecodeREQ(mads[0])
	require.Equal(t, AttrREQ, mads[0].Attr())
	gid := func(s string) GID { return GIDFromAddr(netip.MustParseAddr(s)) }
	want := REQ{
		LocalCommID: client, ServiceID: ServiceID(PortSpaceTCP, 7174), LocalCAGUID: 0x505400fffe000012,
		LocalQPN: 0x1a, ResponderResources: 1, InitiatorDepth: 1, RemoteCMResponseTimeout: 20,
		StartingPSN: 0x4b8d0f, LocalCMResponseTimeout: 20, RetryCount: 7, PKey: 0xffff, PathMTU: 3,
		RNRRetryCount: 7, MaxCMRetries: 15,
		Primary: Path{LocalLID: 0xffff, RemoteLID: 0xffff, LocalGID: gid("198.18.0.12"), RemoteGID: gid("198.18.0.11"),
			FlowLabel: 0x49cb6, HopLimit: 64, LocalACKTimeout: 19},
	}
	want.PrivateData = req.PrivateData
	require.Equal(t, want, req)
	cma, err := ParseCMAHeader(req.PrivateData)
	require.NoError(t, err)
	require.Equal(t, CMAHeader{Version: 0, IPVersion: 4, Port: 43344,
		Src: netip.MustParseAddr("198.18.0.12"), Dst: netip.MustParseAddr("198.18.0.11")}, cma)
	require.Equal(t, make(Bytes, REQPrivateLen-CMAHeaderLen), req.PrivateData[CMAHeaderLen:])

	rep := DecodeREP(mads[1])
	wantREP := REP{LocalCommID: server, RemoteCommID: client, LocalQPN: 0x1a, StartingPSN: 0x7b0a1d,
		ResponderResources: 1, InitiatorDepth: 1, TargetACKDelay: 15, RNRRetryCount: 7, LocalCAGUID: 0x505400fffe000011}
	wantREP.PrivateData = rep.PrivateData
	require.Equal(t, wantREP, rep)

	rtu := DecodeRTU(mads[2])
	require.Equal(t, [2]uint32{client, server}, [2]uint32{rtu.LocalCommID, rtu.RemoteCommID})
	dreq := DecodeDREQ(mads[3])
	require.Equal(t, [3]uint32{client, server, 0x1a}, [3]uint32{dreq.LocalCommID, dreq.RemoteCommID, dreq.RemoteQPNEECN})
	drep := DecodeDREP(mads[4])
	require.Equal(t, [2]uint32{server, client}, [2]uint32{drep.LocalCommID, drep.RemoteCommID})
}

// TestRpingCaptureReencodes builds every message of the capture from its
// decoded fields and compares the bytes: what goroce sends is what the
// kernel sent.
func TestRpingCaptureReencodes(t *testing.T) {
	for i, m := range rpingMADs(t) {
		h := m.Header()
		out := NewCM(make([]byte, MADLen), h.AttrID, h.TID, h.AttrMod)
		switch v := Decode(m).(type) {
		case REQ:
			v.PrivateData = append([]byte(nil), v.PrivateData...)
			require.True(t, v.Encode(out))
		case REP:
			require.True(t, v.Encode(out))
		case RTU:
			require.True(t, v.Encode(out))
		case DREQ:
			require.True(t, v.Encode(out))
		case DREP:
			require.True(t, v.Encode(out))
		default:
			t.Fatalf("MAD %d: %T", i, v)
		}
		require.Equal(t, []byte(m), []byte(out), "MAD %d (%v)", i, h.AttrID)
	}
}
