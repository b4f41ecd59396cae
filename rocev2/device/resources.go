package device

import (
	"cmp"
	"slices"

	"github.com/goroce/goroce/cq"
)

// A kernel RDMA device lists its live objects to any tool (rdma res show
// qp|cq|mr|pd, over the RDMA netlink family); a goroce device does so to
// Resources, and through Publish to roce-devinfo's `res show` in other
// processes. The device knows its queue pairs (its QP table, whatever
// created them) and its memory regions; protection domains and CQs are no
// objects it keeps, so it finds them through their users: a PD appears
// while a QP or a region of it lives, a CQ while a QP completes into it.

// QPResource is a queue pair as rdma res show qp shows it.
type QPResource struct {
	LQPN uint32
	// Connected: an RC or UC queue pair, which has a peer (RQPN), a
	// receive PSN and a path migration state; the kernel shows those for
	// RC and UC only.
	Connected bool
	RQPN      uint32
	Type      string // "RC", "UC", "UD"
	State     string // "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"
	// Port is the port the QP is bound to: 1 from INIT on, 0 in RESET
	// (rdma shows link DEV/-).
	Port int
	// SQPSN is the next PSN the requester sends, RQPSN the next the
	// responder expects (rxe's req.psn and resp.psn).
	SQPSN, RQPSN uint32
	PathMigState string // "MIGRATED", "REARM", "ARMED"
	PathMTU      int    // bytes
	PDN          uint32
}

// QPUses is what a queue pair uses, through which the device finds its
// protection domains and CQs.
type QPUses struct {
	PD             *PD
	SendCQ, RecvCQ *cq.CQ
}

// ResourceReporter is a QPHandler that describes itself for the resource
// views (qp.QP is one). Resource takes the queue pair's own lock; the
// device calls it with none of its own held.
type ResourceReporter interface {
	Resource() (QPResource, QPUses)
}

// CQResource is a completion queue as rdma res show cq shows it.
type CQResource struct {
	CQN   uint32
	CQE   int // its depth
	Users int // the device's queue pairs that complete into it
}

// MRResource is a memory region as rdma res show mr shows it.
type MRResource struct {
	MRN        uint32
	RKey, LKey uint32
	IOVA       uint64
	Len        uint64
	PDN        uint32
}

// PDResource is a protection domain as rdma res show pd shows it.
type PDResource struct {
	PDN   uint32
	Users int // the device's queue pairs and memory regions in it
}

// Resources is a snapshot of a device's live objects, each list sorted by
// number.
type Resources struct {
	QPs []QPResource
	CQs []CQResource
	MRs []MRResource
	PDs []PDResource
}

// PDN returns the protection domain's number on its device.
func (pd *PD) PDN() uint32 { return pd.id }

// MRN returns the region's number on its device.
func (mr *MR) MRN() uint32 { return mr.mrn }

// Resources lists the device's queue pairs, the CQs they complete into,
// its memory regions and the protection domains these belong to. A queue
// pair whose handler is no ResourceReporter is listed by number alone.
func (d *Device) Resources() Resources {
	var r Resources
	cqs := map[*cq.CQ]int{}
	pds := map[uint32]int{}
	for i := range d.qps.slots {
		s := d.qps.slots[i].Load()
		if s == nil {
			continue
		}
		q := QPResource{LQPN: s.qpn, Type: "UNKNOWN", State: "UNKNOWN"}
		var uses QPUses
		if rr, ok := s.h.(ResourceReporter); ok {
			q, uses = rr.Resource()
			q.LQPN = s.qpn
		}
		for _, c := range uniqueCQs(uses.SendCQ, uses.RecvCQ) {
			cqs[c]++
		}
		if uses.PD != nil {
			q.PDN = uses.PD.id
			pds[uses.PD.id]++
		}
		r.QPs = append(r.QPs, q)
	}
	for _, mr := range d.mrs.regions() {
		r.MRs = append(r.MRs, MRResource{MRN: mr.mrn, RKey: mr.rkey, LKey: mr.lkey, IOVA: mr.va, Len: uint64(len(mr.buf)), PDN: mr.pd.id})
		pds[mr.pd.id]++
	}
	for c, n := range cqs {
		r.CQs = append(r.CQs, CQResource{CQN: c.ID(), CQE: c.Depth(), Users: n})
	}
	for id, n := range pds {
		r.PDs = append(r.PDs, PDResource{PDN: id, Users: n})
	}
	slices.SortFunc(r.QPs, func(a, b QPResource) int { return cmp.Compare(a.LQPN, b.LQPN) })
	slices.SortFunc(r.CQs, func(a, b CQResource) int { return cmp.Compare(a.CQN, b.CQN) })
	slices.SortFunc(r.MRs, func(a, b MRResource) int { return cmp.Compare(a.MRN, b.MRN) })
	slices.SortFunc(r.PDs, func(a, b PDResource) int { return cmp.Compare(a.PDN, b.PDN) })
	return r
}

// uniqueCQs returns a QP's CQs, the one CQ once when both are the same.
func uniqueCQs(send, recv *cq.CQ) []*cq.CQ {
	switch {
	case send == nil && recv == nil:
		return nil
	case send == recv || recv == nil:
		return []*cq.CQ{send}
	case send == nil:
		return []*cq.CQ{recv}
	}
	return []*cq.CQ{send, recv}
}
