package rdmacm

import (
	"encoding/binary"
	"net/netip"

	"github.com/goroce/goroce/rdmacm/cmwire"
)

// receive handles one MAD from QP 1 (c.mu held): Linux's MAD checks, then
// ib_cm's handler of its attribute.
func (c *CM) receive(m cmwire.MAD, from netip.AddrPort) {
	h := m.Header()
	switch cmwire.Check(&h) {
	case cmwire.Deliver:
	case cmwire.Respond:
		reply := cmwire.MAD(c.scratch[:])
		copy(reply, m)
		cmwire.Unmatched(reply)
		c.sendMAD(reply, from)
		c.Counters.Answered.Add(1)
		return
	case cmwire.DropBaseVersion:
		c.Counters.DropBaseVersion.Add(1)
		return
	case cmwire.DropSMI:
		c.Counters.DropSMI.Add(1)
		return
	case cmwire.DropCMMethod:
		c.Counters.DropCMMethod.Add(1)
		return
	case cmwire.DropAttr:
		c.Counters.DropAttr.Add(1)
		return
	default:
		c.Counters.DropNoAgent.Add(1)
		return
	}
	c.Counters.RxMsgs[attrIndex(h.AttrID)].Add(1)
	switch h.AttrID {
	case cmwire.AttrREQ:
		c.onREQ(m, from)
	case cmwire.AttrMRA:
		c.onMRA(m)
	case cmwire.AttrREJ:
		c.onREJ(m)
	case cmwire.AttrREP:
		c.onREP(m, from)
	case cmwire.AttrRTU:
		c.onRTU(m)
	case cmwire.AttrDREQ:
		c.onDREQ(m, from)
	case cmwire.AttrDREP:
		c.onDREP(m)
	case cmwire.AttrSIDRReq:
		c.onSIDRReq(m, from)
	case cmwire.AttrSIDRRep:
		c.onSIDRRep(m)
	default: // LAP, APR: Linux does not take alternate paths on RoCE
		c.Counters.NoRoCEPaths.Add(1)
	}
}

// dup counts a duplicate of attr.
func (c *CM) dup(attr cmwire.AttrID) { c.Counters.RxDuplicates[attrIndex(attr)].Add(1) }

// forget drops an ID that never became visible.
func (c *CM) forget(id *cmID) {
	c.removeRemote(id)
	id.state, id.released = stIdle, true
	c.maybeFree(id)
}

// onREQ is cm_req_handler with cm_match_req, then rdma_cm's request
// handling (Listener.request).
func (c *CM) onREQ(m cmwire.MAD, from netip.AddrPort) {
	req := cmwire.DecodeREQ(m)
	id, ok := c.newID(nil)
	if !ok {
		c.Counters.TooManyIDs.Add(1) // Linux's -ENOMEM: nothing is sent, the peer retries
		return
	}
	id.remoteID, id.sid, id.tid, id.peer = req.LocalCommID, req.ServiceID, m.TID(), from
	id.timeoutMS = convertToMS(req.LocalCMResponseTimeout)
	id.maxRetries = req.MaxCMRetries
	id.remoteQPN, id.remoteGUID = req.LocalQPN, req.LocalCAGUID
	id.initDepth, id.respRes = req.ResponderResources, req.InitiatorDepth
	id.pathMTU, id.sqPSN = req.PathMTU, req.StartingPSN
	id.retryCount, id.rnrRetry, id.transport = req.RetryCount, req.RNRRetryCount, req.TransportType
	id.state = stReqRcvd

	if cur := c.insertRemoteID(id, remoteKey{req.LocalCommID, req.LocalCAGUID}); cur != nil {
		c.forget(id)
		c.dupREQ(cur, from)
		return
	}
	if cur := c.insertRemoteQPN(id, remoteKey{req.LocalQPN, req.LocalCAGUID}); cur != nil {
		// The peer's QP already has a connection here: the peer lost it
		// (a reboot, a crash). Refuse the new one and end the old.
		c.forget(id)
		c.issueREJ(m, from, cmwire.RejStaleConn, cmwire.MsgREQ, nil)
		c.Counters.StaleConns.Add(1)
		c.sendDREQ(cur, nil)
		return
	}
	l := c.listeners[req.ServiceID]
	if l == nil || l.closed {
		c.forget(id)
		c.issueREJ(m, from, cmwire.RejInvalidServiceID, cmwire.MsgREQ, nil)
		return
	}
	// The path back, as cm_format_paths_from_req turns the REQ's around.
	p := req.Primary
	plt := p.LocalACKTimeout
	if plt > 0 {
		plt--
	}
	id.path = cmwire.Path{LocalLID: p.RemoteLID, RemoteLID: p.LocalLID, LocalGID: p.RemoteGID, RemoteGID: p.LocalGID,
		FlowLabel: p.FlowLabel, PacketRate: p.PacketRate, TrafficClass: p.TrafficClass, HopLimit: p.HopLimit, SL: p.SL}
	id.avTimeout = plt + 1
	if !c.ownGID(p.RemoteGID) {
		// cm_init_av_by_path finds no GID of ours to send from.
		gid, _ := c.dev.GID(0)
		id.state = stReqRcvd
		c.sendREJ(id, cmwire.RejInvalidGID, gid[:], nil)
		c.forget(id)
		return
	}
	l.request(id, &req, m)
}

// ownGID reports whether g is one of the device's GIDs.
func (c *CM) ownGID(g cmwire.GID) bool {
	for _, e := range c.dev.GIDs() {
		if cmwire.GID(e.GID) == g {
			return true
		}
	}
	return false
}

// dupREQ is cm_dup_req_handler.
func (c *CM) dupREQ(id *cmID, from netip.AddrPort) {
	c.dup(cmwire.AttrREQ)
	switch id.state {
	case stMRAReqSent:
		c.sendMRA(id, cmwire.MsgREQ, from)
	case stTimewait:
		m := c.newMAD(cmwire.AttrREJ, id.tid)
		(&cmwire.REJ{LocalCommID: id.localID, RemoteCommID: id.remoteID, MessageRejected: cmwire.MsgOther,
			Reason: cmwire.RejStaleConn}).Encode(m)
		c.sendMAD(m, from)
		c.Counters.RejectsSent.Add(1)
	}
}

// onREP is cm_rep_handler.
func (c *CM) onREP(m cmwire.MAD, from netip.AddrPort) {
	rep := cmwire.DecodeREP(m)
	id := c.acquire(rep.RemoteCommID, 0)
	if id == nil {
		c.dupREP(&rep, from)
		return
	}
	if id.state != stReqSent && id.state != stMRAReqRcvd {
		c.Counters.WrongState.Add(1)
		return
	}
	if c.insertRemoteID(id, remoteKey{rep.LocalCommID, rep.LocalCAGUID}) != nil {
		c.Counters.WrongState.Add(1) // a duplicate REP from another peer ID
		return
	}
	if cur := c.insertRemoteQPN(id, remoteKey{rep.LocalQPN, rep.LocalCAGUID}); cur != nil {
		c.removeRemote(id)
		c.issueREJ(m, from, cmwire.RejStaleConn, cmwire.MsgREP, nil)
		c.Counters.StaleConns.Add(1)
		c.sendDREQ(cur, nil)
		return
	}
	id.state = stRepRcvd
	id.remoteID, id.remoteQPN, id.remoteGUID = rep.LocalCommID, rep.LocalQPN, rep.LocalCAGUID
	id.initDepth, id.respRes = rep.ResponderResources, rep.InitiatorDepth
	id.sqPSN, id.rnrRetry = rep.StartingPSN, rep.RNRRetryCount
	id.avTimeout = ackTimeout(rep.TargetACKDelay, id.avTimeout-1)
	c.cancel(id)
	r := rep
	r.PrivateData = append(cmwire.Bytes(nil), rep.PrivateData...)
	c.notify(id, evRepReceived, &eventData{rep: &r, pd: r.PrivateData})
}

// dupREP is cm_dup_rep_handler: a REP for a connection past its REQ gets
// the RTU (or the MRA) again; one for no connection is dropped.
func (c *CM) dupREP(rep *cmwire.REP, from netip.AddrPort) {
	id := c.acquire(rep.RemoteCommID, rep.LocalCommID)
	if id == nil {
		c.Counters.NoID.Add(1)
		return
	}
	c.dup(cmwire.AttrREP)
	switch id.state {
	case stEstablished:
		c.formatRTU(id, from)
	case stMRARepSent:
		c.sendMRA(id, cmwire.MsgREP, from)
	}
}

// onRTU is cm_rtu_handler.
func (c *CM) onRTU(m cmwire.MAD) {
	rtu := cmwire.DecodeRTU(m)
	id := c.acquire(rtu.RemoteCommID, rtu.LocalCommID)
	if id == nil {
		c.Counters.NoID.Add(1)
		return
	}
	if id.state != stRepSent && id.state != stMRARepRcvd {
		c.dup(cmwire.AttrRTU)
		return
	}
	id.state = stEstablished
	c.cancel(id)
	c.notify(id, evEstablished, &eventData{pd: append([]byte(nil), rtu.PrivateData...)})
}

// onMRA is cm_mra_handler: the peer needs longer; the wait for its answer
// is stretched.
func (c *CM) onMRA(m cmwire.MAD) {
	mra := cmwire.DecodeMRA(m)
	var id *cmID
	switch mra.MessageMRAed {
	case cmwire.MsgREQ:
		id = c.acquire(mra.RemoteCommID, 0)
	case cmwire.MsgREP, cmwire.MsgOther:
		id = c.acquire(mra.RemoteCommID, mra.LocalCommID)
	}
	if id == nil {
		c.Counters.NoID.Add(1)
		return
	}
	timeout := convertToMS(mra.ServiceTimeout) + convertToMS(id.avTimeout)
	switch {
	case id.state == stReqSent && mra.MessageMRAed == cmwire.MsgREQ && c.stretch(id, timeout):
		id.state = stMRAReqRcvd
	case id.state == stRepSent && mra.MessageMRAed == cmwire.MsgREP && c.stretch(id, timeout):
		id.state = stMRARepRcvd
	case id.state == stMRAReqRcvd || id.state == stMRARepRcvd:
		c.dup(cmwire.AttrMRA)
		return
	default:
		c.Counters.WrongState.Add(1)
		return
	}
	id.setMsgState(id.state)
}

// onREJ is cm_rej_handler.
func (c *CM) onREJ(m cmwire.MAD) {
	rej := cmwire.DecodeREJ(m)
	var id *cmID
	switch {
	case rej.Reason == cmwire.RejTimeout:
		// The peer gave up on its REQ: it names itself by its ID and GUID.
		guid := binary.BigEndian.Uint64(rej.ARI[:8])
		if cur := c.remoteIDs[remoteKey{rej.LocalCommID, guid}]; cur != nil {
			id = c.acquire(cur.localID, cur.remoteID)
		}
	case rej.MessageRejected == cmwire.MsgREQ:
		id = c.acquire(rej.RemoteCommID, 0)
	default:
		id = c.acquire(rej.RemoteCommID, rej.LocalCommID)
	}
	if id == nil {
		c.Counters.NoID.Add(1)
		return
	}
	switch id.state {
	case stReqSent, stMRAReqRcvd, stRepSent, stMRARepRcvd, stReqRcvd, stMRAReqSent:
		c.cancel(id)
		if rej.Reason == cmwire.RejStaleConn {
			c.enterTimewait(id)
		} else {
			c.resetToIdle(id)
		}
	case stDREQSent, stRepRcvd, stMRARepSent, stEstablished:
		c.cancel(id)
		c.enterTimewait(id)
	default:
		c.Counters.WrongState.Add(1)
		return
	}
	r := rej
	r.ARI = append(cmwire.Bytes(nil), rej.ARI...)
	r.PrivateData = append(cmwire.Bytes(nil), rej.PrivateData...)
	c.notify(id, evRejReceived, &eventData{rej: &r, pd: r.PrivateData})
	c.maybeFree(id)
}

// onDREQ is cm_dreq_handler.
func (c *CM) onDREQ(m cmwire.MAD, from netip.AddrPort) {
	dreq := cmwire.DecodeDREQ(m)
	id := c.acquire(dreq.RemoteCommID, dreq.LocalCommID)
	if id == nil {
		// Gone already (or never here): the peer still wants its DREP.
		c.dup(cmwire.AttrDREQ)
		c.issueDREP(m, from)
		return
	}
	if id.localQPN != dreq.RemoteQPNEECN {
		c.Counters.WrongQPN.Add(1)
		return
	}
	switch id.state {
	case stRepSent, stDREQSent:
		c.cancel(id)
	case stEstablished, stMRARepRcvd:
	case stTimewait:
		c.dup(cmwire.AttrDREQ)
		c.formatDREP(id, from)
		return
	case stDREQRcvd:
		c.dup(cmwire.AttrDREQ)
		return
	default:
		c.Counters.WrongState.Add(1)
		return
	}
	id.state = stDREQRcvd
	id.tid = m.TID()
	c.notify(id, evDREQReceived, &eventData{pd: append([]byte(nil), dreq.PrivateData...)})
}

// onDREP is cm_drep_handler.
func (c *CM) onDREP(m cmwire.MAD) {
	drep := cmwire.DecodeDREP(m)
	id := c.acquire(drep.RemoteCommID, drep.LocalCommID)
	if id == nil {
		c.Counters.NoID.Add(1)
		return
	}
	if id.state != stDREQSent && id.state != stDREQRcvd {
		c.Counters.WrongState.Add(1)
		return
	}
	c.enterTimewait(id)
	c.notify(id, evDREPReceived, &eventData{pd: append([]byte(nil), drep.PrivateData...)})
}
