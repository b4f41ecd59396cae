package device

import (
	"sync/atomic"

	"github.com/goroce/goroce/rocev2"
)

// Counters are the device's hardware-style counters, named like rxe's
// (rxe_hw_counters.c) so that dashboards and diff scripts carry over, plus
// goroce's per-reason drop counters. All fields are updated atomically.
//
// Every datagram the device takes from its backend is counted once, under
// rcvd_pkts (delivered: past the checks of rxe's hdr_check, the transport
// type, the QP's state and the peer's address included, as rxe counts
// rcvd_pkts only there) or under one drop reason before delivery
// (Received sums them). What the transport then makes of a delivered
// packet (a duplicate, a ghost response, a UC or UD message dropped) is
// counted again under that outcome.
type Counters struct {
	SentPkts            atomic.Uint64 // sent_pkts
	RcvdPkts            atomic.Uint64 // rcvd_pkts: accepted and delivered to a QP's transport
	DuplicateRequest    atomic.Uint64 // duplicate_request
	OutOfSeqRequest     atomic.Uint64 // out_of_seq_request
	RcvdRNRErr          atomic.Uint64 // rcvd_rnr_err: RNR NAKs received
	SendRNRErr          atomic.Uint64 // send_rnr_err: RNR NAKs sent
	RcvdSeqErr          atomic.Uint64 // rcvd_seq_err: PSN-sequence NAKs received
	AckDeferred         atomic.Uint64 // ack_deferred
	RetryExceededErr    atomic.Uint64 // retry_exceeded_err
	RetryRNRExceededErr atomic.Uint64 // retry_rnr_exceeded_err
	CompleterRetryErr   atomic.Uint64 // completer_retry_err: retransmissions started
	SendErr             atomic.Uint64 // send_err
	LinkDowned          atomic.Uint64 // link_downed
	RDMASends           atomic.Uint64 // rdma_sends: RDMA WRITE/READ/atomic requests sent
	RDMARecvs           atomic.Uint64 // rdma_recvs: RDMA WRITE/READ/atomic requests served
	RetransmittedPkts   atomic.Uint64 // retransmitted_pkts
	SentNAKs            atomic.Uint64 // sent_naks: NAKs of any kind sent
	RcvdNAKs            atomic.Uint64 // rcvd_naks: NAKs of any kind received
	RcvdICRCIDInferred  atomic.Uint64 // rcvd_icrc_id_inferred: IPv4 ICRC verified with an inferred IP ID
	RcvdUnknownQP       atomic.Uint64 // rcvd_unknown_qp: no QP with that number
	RcvdWrongQPType     atomic.Uint64 // rcvd_wrong_qp_type: opcode of another transport
	RcvdPKeyErr         atomic.Uint64 // rcvd_pkey_err
	RcvdQPStateDrop     atomic.Uint64 // rcvd_qp_state_drop: QP not ready to receive
	RcvdAddrErr         atomic.Uint64 // rcvd_addr_err: RC/UC packet from an address other than the QP's peer
	// rcvd_ghost_resp: RC response (ACK, NAK, RNR NAK, READ response,
	// atomic ACK) for a PSN its kind may not name: not sent, or already
	// answered (qp/ghost.go); dropped. rxe has no such counter: it ignores
	// the older ones silently and takes one past its oldest WQE as
	// acknowledging that WQE. The name is goroce's own, in rxe's style,
	// beside rxe's names rather than in place of one: those keep rxe's
	// meanings (a ghost NAK is not in rcvd_naks or rcvd_seq_err), so a
	// script that compares the two devices still compares like with like.
	RcvdGhostResp atomic.Uint64
	// busy_polled_pkts: datagrams taken by a goroutine in Device.BusyPoll
	// rather than by the receive goroutine (Linux counts the like as
	// BusyPollRxPackets). goroce's own, as rcvd_ghost_resp.
	BusyPolledPkts atomic.Uint64
	// busy_poll_misses: BusyPoll looks that ran out of budget (each makes
	// the next calls sleep at once for a while).
	BusyPollMisses atomic.Uint64
	// lent_waits: waits in which the waiting goroutine served the
	// device's receive loop itself (Device.WaitOn), one wake-up per
	// message instead of two. goroce's own.
	LentWaits atomic.Uint64
	// lent_wait_backstops: times the receive goroutine resumed because
	// nobody had served the device for HoldLimit after a lent wait.
	LentWaitBackstops atomic.Uint64
	QKeyViol          atomic.Uint64 // qkey_viol: UD packet whose Q_Key is not its QP's (rxe's port qkey_viol_cntr)
	RcvdDropNoWQE     atomic.Uint64 // rcvd_drop_no_wqe: UC/UD message dropped for want of a receive WQE (RC answers RNR)
	RcvdDropLen       atomic.Uint64 // rcvd_drop_len: UC/UD message longer than its receive buffer, or a UC packet that breaks the length rules
	RcvdDropAccess    atomic.Uint64 // rcvd_drop_access: UC WRITE without remote write access or with a bad rkey
	RcvdDropSeq       atomic.Uint64 // rcvd_drop_seq: UC packets dropped as the rest of a message broken by a lost packet or an error
	// Dropped counts packets rejected by the parser, per rocev2.ParseError.
	Dropped [rocev2.NumParseErrors]atomic.Uint64
}

// Counter is one named counter value.
type Counter struct {
	Name  string
	Value uint64
}

// Snapshot returns every counter with its rxe-style name, in a stable order.
// Per-reason drop counters that share a name are summed.
func (c *Counters) Snapshot() []Counter {
	out := []Counter{
		{"sent_pkts", c.SentPkts.Load()},
		{"rcvd_pkts", c.RcvdPkts.Load()},
		{"duplicate_request", c.DuplicateRequest.Load()},
		{"out_of_seq_request", c.OutOfSeqRequest.Load()},
		{"rcvd_rnr_err", c.RcvdRNRErr.Load()},
		{"send_rnr_err", c.SendRNRErr.Load()},
		{"rcvd_seq_err", c.RcvdSeqErr.Load()},
		{"ack_deferred", c.AckDeferred.Load()},
		{"retry_exceeded_err", c.RetryExceededErr.Load()},
		{"retry_rnr_exceeded_err", c.RetryRNRExceededErr.Load()},
		{"completer_retry_err", c.CompleterRetryErr.Load()},
		{"send_err", c.SendErr.Load()},
		{"link_downed", c.LinkDowned.Load()},
		{"rdma_sends", c.RDMASends.Load()},
		{"rdma_recvs", c.RDMARecvs.Load()},
		{"retransmitted_pkts", c.RetransmittedPkts.Load()},
		{"sent_naks", c.SentNAKs.Load()},
		{"rcvd_naks", c.RcvdNAKs.Load()},
		{"rcvd_icrc_id_inferred", c.RcvdICRCIDInferred.Load()},
		{"rcvd_unknown_qp", c.RcvdUnknownQP.Load()},
		{"rcvd_wrong_qp_type", c.RcvdWrongQPType.Load()},
		{"rcvd_pkey_err", c.RcvdPKeyErr.Load()},
		{"rcvd_qp_state_drop", c.RcvdQPStateDrop.Load()},
		{"rcvd_addr_err", c.RcvdAddrErr.Load()},
		{"rcvd_ghost_resp", c.RcvdGhostResp.Load()},
		{"busy_polled_pkts", c.BusyPolledPkts.Load()},
		{"busy_poll_misses", c.BusyPollMisses.Load()},
		{"lent_waits", c.LentWaits.Load()},
		{"lent_wait_backstops", c.LentWaitBackstops.Load()},
		{"qkey_viol", c.QKeyViol.Load()},
		{"rcvd_drop_no_wqe", c.RcvdDropNoWQE.Load()},
		{"rcvd_drop_len", c.RcvdDropLen.Load()},
		{"rcvd_drop_access", c.RcvdDropAccess.Load()},
		{"rcvd_drop_seq", c.RcvdDropSeq.Load()},
	}
	idx := map[string]int{}
	for _, e := range rocev2.ParseErrors {
		name := e.CounterName()
		v := c.Dropped[e].Load()
		if i, ok := idx[name]; ok {
			out[i].Value += v
			continue
		}
		idx[name] = len(out)
		out = append(out, Counter{name, v})
	}
	return out
}

// Received returns how many datagrams the device has taken from its
// backend: those delivered (rcvd_pkts) and those dropped before delivery,
// each counted under one reason.
func (c *Counters) Received() uint64 {
	n := c.RcvdPkts.Load() + c.RcvdUnknownQP.Load() + c.RcvdPKeyErr.Load() +
		c.RcvdWrongQPType.Load() + c.RcvdQPStateDrop.Load() + c.RcvdAddrErr.Load()
	for i := range c.Dropped {
		n += c.Dropped[i].Load()
	}
	return n
}

// Get returns the value of the named counter and whether it exists.
func (c *Counters) Get(name string) (uint64, bool) {
	for _, e := range c.Snapshot() {
		if e.Name == name {
			return e.Value, true
		}
	}
	return 0, false
}
