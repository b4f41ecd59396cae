package rdmacm

import (
	"net/netip"

	"github.com/goroce/goroce/rdmacm/cmwire"
)

// onSIDRReq is cm_sidr_req_handler, then rdma_cm's request handling.
func (c *CM) onSIDRReq(m cmwire.MAD, from netip.AddrPort) {
	req := cmwire.DecodeSIDRReq(m)
	k := sidrKey{req.RequestID, from.Addr()}
	if c.sidrs[k] != nil {
		c.dup(cmwire.AttrSIDRReq)
		return
	}
	id, ok := c.newID(nil)
	if !ok {
		c.Counters.TooManyIDs.Add(1)
		return
	}
	id.remoteID, id.sid, id.tid, id.peer = req.RequestID, req.ServiceID, m.TID(), from
	c.sidrs[k], id.sidrKey = id, &k
	id.state = stSIDRReqRcvd
	l := c.listeners[req.ServiceID]
	if l == nil || l.closed {
		c.sendSIDRRep(id, &cmwire.SIDRRep{Status: cmwire.SIDRUnsupported})
		c.forget(id)
		return
	}
	l.sidrRequest(id, &req)
}

// sidrRequest is rdma_cm's handling of a SIDR_REQ ib_cm matched to l. A
// failure answers SIDR_REP with status reject (cm_destroy_id of an ID in
// SIDR_REQ_RCVD); unlike a REQ, a full backlog does so too.
func (l *Listener) sidrRequest(id *cmID, req *cmwire.SIDRReq) {
	c := l.cm
	reject := func() {
		c.sendSIDRRep(id, &cmwire.SIDRRep{Status: cmwire.SIDRReject})
		c.forget(id)
	}
	if !l.ud {
		reject()
		return
	}
	hdr, ok := l.checkHeader(req.PrivateData)
	if !ok {
		reject()
		return
	}
	r := &Request{l: l, id: id, UD: true, RemoteAddr: netip.AddrPortFrom(hdr.Src, hdr.Port),
		LocalAddr:   netip.AddrPortFrom(hdr.Dst, l.addr.Port()),
		PrivateData: append([]byte(nil), req.PrivateData[cmwire.CMAHeaderLen:]...), roce: id.peer.Port()}
	id.owner = r
	select {
	case l.pending <- r:
	default:
		c.Counters.ListenOverflow.Add(1)
		reject()
	}
}

// onSIDRRep is cm_sidr_rep_handler.
func (c *CM) onSIDRRep(m cmwire.MAD) {
	rep := cmwire.DecodeSIDRRep(m)
	id := c.acquire(rep.RequestID, 0)
	if id == nil {
		c.Counters.NoID.Add(1)
		return
	}
	if id.state != stSIDRReqSent {
		c.Counters.WrongState.Add(1)
		return
	}
	id.state = stIdle
	c.cancel(id)
	r := rep
	r.Info = append(cmwire.Bytes(nil), rep.Info...)
	r.PrivateData = append(cmwire.Bytes(nil), rep.PrivateData...)
	c.notify(id, evSIDRRep, &eventData{sidr: &r, pd: r.PrivateData})
	c.maybeFree(id)
}
