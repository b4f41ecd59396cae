package qp

import "github.com/goroce/goroce/rocev2/device"

// Resource describes the QP for the device's resource views (rdma res
// show qp): the fields the kernel fills from ib_query_qp, SQ PSN and RQ
// PSN being the requester's next PSN and the responder's expected one, as
// rxe reports them.
func (q *QP) Resource() (device.QPResource, device.QPUses) {
	q.mu.Lock()
	defer q.unlock()
	r := device.QPResource{
		LQPN: q.qpn, Type: q.typ.String(), State: q.state.String(),
		SQPSN: uint32(q.req.psn), PathMTU: q.attr.PathMTU.Bytes(), PDN: q.pd.PDN(),
	}
	if q.state == stateDestroyed {
		r.State = "ERR" // being destroyed: the last moment it is listed
	}
	if q.state != Reset {
		r.Port = max(int(q.attr.Port), 1)
	}
	if q.typ == RC || q.typ == UC {
		r.Connected = true
		r.RQPN, r.RQPSN = q.attr.DestQPN, uint32(q.resp.epsn)
		r.PathMigState = "MIGRATED" // goroce has no alternate path
	}
	return r, device.QPUses{PD: q.pd, SendCQ: q.sendCQ, RecvCQ: q.recvCQ}
}
