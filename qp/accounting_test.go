package qp

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/device"
)

// Every datagram is counted once: delivered (rcvd_pkts) or under the
// reason it was dropped for, the QP's own header checks (transport,
// state, source address) included; what the transport makes of a
// delivered one is counted beside.
func TestEachDatagramCountedOnce(t *testing.T) {
	l := newLoneRC(t, 0x200)
	idle, err := Create(l.q.pd, InitAttr{Type: RC, SendCQ: l.cq, RecvCQ: l.cq, Cap: Cap{MaxSendWR: 1, MaxRecvWR: 1}})
	require.NoError(t, err)
	defer idle.Destroy()
	// In RTR: it takes requests from the peer, not responses.
	require.NoError(t, idle.Modify(&Attr{State: Init, Port: 1}, MaskState|MaskPKeyIndex|MaskPort|MaskAccessFlags))
	require.NoError(t, idle.Modify(&Attr{State: RTR, PathMTU: rocev2.MTU1024, DestQPN: 0x43, RQPSN: 0x100, MaxDestRdAtomic: 1, MinRNRTimer: 1,
		AH: AH{DGID: device.GIDFromAddr(l.peer.Addr()), SGIDIndex: 1}}, MaskState|MaskAV|MaskPathMTU|MaskDestQPN|MaskRQPSN|MaskMaxDestRdAtomic|MaskMinRNRTimer))
	from := func(addr string) func([]backend.Outgoing) error {
		be, err := l.net.Attach(netip.MustParseAddrPort(addr))
		require.NoError(t, err)
		t.Cleanup(func() { be.Close() })
		return be.Send
	}
	stranger, peer := from("127.0.0.99:4791"), from(netip.AddrPortFrom(l.peer.Addr(), 9999).String())
	for _, tc := range []struct {
		name    string
		send    func([]backend.Outgoing) error
		fl      rocev2.Fields
		counted string // the reason, or rcvd_pkts
		beside  string // what the transport counts
	}{
		{"from a stranger's address", stranger, rocev2.Fields{Opcode: rocev2.RCSendOnly, DestQP: l.q.QPN(), PSN: 0x100}, "rcvd_addr_err", ""},
		{"another transport's opcode", peer, rocev2.Fields{Opcode: rocev2.UCSendOnly, DestQP: l.q.QPN(), PSN: 0x100}, "rcvd_wrong_qp_type", ""},
		{"a QP not ready", peer, rocev2.Fields{Opcode: rocev2.RCAcknowledge, Syndrome: 0x1F, DestQP: idle.QPN()}, "rcvd_qp_state_drop", ""},
		{"no such QP", peer, rocev2.Fields{Opcode: rocev2.RCSendOnly, DestQP: 1}, "rcvd_unknown_qp", ""},
		{"another partition", peer, rocev2.Fields{Opcode: rocev2.RCSendOnly, DestQP: l.q.QPN(), PKey: 0x8001}, "rcvd_pkey_err", ""},
		{"the repeated last ACK", peer, rocev2.Fields{Opcode: rocev2.RCAcknowledge, Syndrome: 0x1F, DestQP: l.q.QPN(), PSN: 0x1FF}, "rcvd_pkts", ""},
		{"a ghost NAK", peer, rocev2.Fields{Opcode: rocev2.RCAcknowledge, Syndrome: 0x61, DestQP: l.q.QPN(), PSN: 0x400200}, "rcvd_pkts", "rcvd_ghost_resp"},
		{"a duplicate request", peer, rocev2.Fields{Opcode: rocev2.RCSendOnly, DestQP: l.q.QPN(), PSN: 0xFF}, "rcvd_pkts", "duplicate_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fl.PKey == 0 {
				tc.fl.PKey = 0xffff
			}
			p, err := tc.fl.Append(nil, nil)
			require.NoError(t, err)
			before := counters(l)
			require.NoError(t, tc.send([]backend.Outgoing{{Buf: p, Dst: l.dev.LocalAddr()}}))
			require.Eventually(t, func() bool { return counters(l)[tc.counted] > before[tc.counted] }, waitLimit, 50*time.Microsecond)
			after := counters(l)
			assert.Equal(t, before["received"]+1, after["received"], "counted once in all")
			for _, name := range []string{"rcvd_pkts", "rcvd_addr_err", "rcvd_wrong_qp_type", "rcvd_qp_state_drop", "rcvd_unknown_qp", "rcvd_pkey_err", "rcvd_ghost_resp", "duplicate_request"} {
				want := before[name]
				if name == tc.counted || name == tc.beside {
					want++
				}
				assert.Equal(t, want, after[name], name)
			}
		})
	}
	assert.Equal(t, RTS, l.q.State())
}

// counters returns l's device counters by name, and as "received" how
// many datagrams the device took.
func counters(l *loneRC) map[string]uint64 {
	m := map[string]uint64{"received": l.dev.Counters.Received()}
	for _, c := range l.dev.Counters.Snapshot() {
		m[c.Name] = c.Value
	}
	return m
}
