package qp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/faulty"
	"github.com/goroce/goroce/rocev2/device"
)

// The device's resource view of a queue pair is what rdma res show qp
// shows of an rxe one: its number, peer, type, state, port and path MTU,
// and once the traffic has settled, each side's SQ PSN is the other's RQ
// PSN, however much was lost and retransmitted on the way.
func TestResourcesAfterLoss(t *testing.T) {
	seed := uint64(7)
	a, b := newPair(t, pairConfig{
		mtu: rocev2.MTU1024, timeout: 14, rnrRetry: 7, rnrTimer: 1,
		wrap: func(be backend.Backend) backend.Backend {
			seed++
			return faulty.Wrap(be, faulty.Config{Loss: 0.10, Seed: seed}).Backend()
		},
	})
	const msgs, size = 100, 3000 // three packets each
	exchange := func(from, to *node) {
		for i := range msgs {
			_, err := to.qp.PostRecv([]RecvWR{{WRID: uint64(i), SGL: []SGE{to.sge(0, size)}}})
			require.NoError(t, err)
		}
		for i := range msgs {
			_, err := from.qp.PostSend([]SendWR{{WRID: uint64(i), Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{from.sge(0, size)}}})
			require.NoError(t, err)
		}
		// Every send completed: the peer acknowledged all of it.
		waitWCs(t, from.cq, msgs, 60*time.Second)
		waitWCs(t, to.cq, msgs, 60*time.Second)
	}
	exchange(a, b)
	exchange(b, a)

	ra, rb := a.dev.Resources(), b.dev.Resources()
	require.Len(t, ra.QPs, 1)
	require.Len(t, rb.QPs, 1)
	qa, qb := ra.QPs[0], rb.QPs[0]
	assert.Equal(t, uint32(a.psn.Add(msgs*3)), qa.SQPSN, "a sent 300 packets from its first PSN")
	assert.Equal(t, qa.SQPSN, qb.RQPSN, "a's SQ PSN is b's RQ PSN")
	assert.Equal(t, qb.SQPSN, qa.RQPSN, "b's SQ PSN is a's RQ PSN")
	assert.Equal(t, device.QPResource{
		LQPN: a.qp.QPN(), Connected: true, RQPN: b.qp.QPN(), Type: "RC", State: "RTS", Port: 1,
		SQPSN: qa.SQPSN, RQPSN: qa.RQPSN, PathMigState: "MIGRATED", PathMTU: 1024, PDN: a.pd.PDN(),
	}, qa)

	assert.Equal(t, []device.CQResource{{CQN: a.cq.ID(), CQE: a.cq.Depth(), Users: 1}}, ra.CQs, "one CQ, used by the QP for both queues")
	assert.Equal(t, []device.MRResource{{MRN: a.mr.MRN(), RKey: a.mr.RKey(), LKey: a.mr.LKey(), IOVA: a.mr.VA(), Len: uint64(a.mr.Len()), PDN: a.pd.PDN()}}, ra.MRs)
	assert.Equal(t, []device.PDResource{{PDN: a.pd.PDN(), Users: 2}}, ra.PDs, "the PD's users: the QP and the region")

	// A destroyed QP and a deregistered region leave the view; the PD and
	// CQ, having no users left, go with them.
	require.NoError(t, a.qp.Destroy())
	require.NoError(t, a.mr.Deregister())
	assert.Equal(t, device.Resources{}, a.dev.Resources())
}

// A queue pair in RESET is bound to no port yet, and a UD queue pair has
// no peer: rdma shows neither rqpn nor rq-psn for it.
func TestResourcesBeforeConnectAndUD(t *testing.T) {
	a, _ := newPair(t, pairConfig{noConnect: true})
	ud, err := Create(a.pd, InitAttr{Type: UD, SendCQ: a.cq, RecvCQ: a.cq, Cap: Cap{MaxSendWR: 4, MaxRecvWR: 4}})
	require.NoError(t, err)
	r := a.dev.Resources()
	require.Len(t, r.QPs, 2)
	for _, q := range r.QPs {
		switch q.LQPN {
		case a.qp.QPN():
			assert.Equal(t, "RC", q.Type)
			assert.Equal(t, "RESET", q.State)
			assert.Zero(t, q.Port)
			assert.True(t, q.Connected)
		case ud.QPN():
			assert.Equal(t, "UD", q.Type)
			assert.False(t, q.Connected)
			assert.Empty(t, q.PathMigState)
		default:
			t.Errorf("a QP the device does not have: %+v", q)
		}
	}
	assert.Equal(t, 2, r.CQs[0].Users, "two QPs complete into the CQ")
	assert.Equal(t, 3, r.PDs[0].Users, "two QPs and a region")
}
