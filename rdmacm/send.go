package rdmacm

import (
	"encoding/binary"
	"net/netip"

	"github.com/goroce/goroce/rdmacm/cmwire"
)

// The messages the CM sends, formatted as ib_cm formats them
// (cm_format_*). c.mu is held throughout.

// newMAD returns a scratch MAD with a CM header.
func (c *CM) newMAD(attr cmwire.AttrID, tid uint64) cmwire.MAD {
	return cmwire.NewCM(c.scratch[:], attr, tid, 0)
}

// formTID is ib_cm's cm_form_tid: the agent's hi_tid and the local ID.
func (c *CM) formTID(id *cmID) uint64 { return uint64(c.hiTID)<<32 | uint64(id.localID) }

// nodeGUID is the device's node GUID, as the CM puts it in its messages.
func (c *CM) nodeGUID() uint64 { return c.dev.Attr().NodeGUID }

func (c *CM) sendREQ(id *cmID, req *cmwire.REQ) {
	m := c.newMAD(cmwire.AttrREQ, id.tid)
	req.Encode(m)
	c.post(id, m, id.timeoutMS)
}

func (c *CM) sendREP(id *cmID, rep *cmwire.REP) {
	m := c.newMAD(cmwire.AttrREP, id.tid)
	rep.Encode(m)
	c.post(id, m, id.timeoutMS)
}

// sendRTU sends the RTU and establishes the connection (ib_send_cm_rtu).
func (c *CM) sendRTU(id *cmID, pd []byte) {
	id.state = stEstablished
	id.private = pd
	c.formatRTU(id, id.peer)
}

func (c *CM) formatRTU(id *cmID, dst netip.AddrPort) {
	m := c.newMAD(cmwire.AttrRTU, id.tid)
	(&cmwire.RTU{LocalCommID: id.localID, RemoteCommID: id.remoteID, PrivateData: id.private}).Encode(m)
	c.sendMAD(m, dst)
}

func (c *CM) sendMRA(id *cmID, kind cmwire.MessageKind, dst netip.AddrPort) {
	m := c.newMAD(cmwire.AttrMRA, id.tid)
	(&cmwire.MRA{LocalCommID: id.localID, RemoteCommID: id.remoteID, MessageMRAed: kind,
		ServiceTimeout: id.svcTimeout, PrivateData: id.private}).Encode(m)
	c.sendMAD(m, dst)
}

// sendREJ is cm_send_rej_locked: an ID being set up (or whose REP waits)
// rejects; it reports whether the state allows it.
func (c *CM) sendREJ(id *cmID, reason cmwire.RejReason, ari, pd []byte) bool {
	old := id.state
	switch old {
	case stReqSent, stMRAReqRcvd, stReqRcvd, stMRAReqSent, stRepRcvd, stMRARepSent:
		c.cancel(id)
		id.state = stIdle
		c.removeRemote(id)
	case stRepSent, stMRARepRcvd:
		c.cancel(id)
		c.enterTimewait(id)
	default:
		return false
	}
	rej := cmwire.REJ{LocalCommID: id.localID, RemoteCommID: id.remoteID, MessageRejected: cmwire.MsgOther,
		Reason: reason, ARILength: uint8(len(ari)), ARI: ari, PrivateData: pd}
	switch old {
	case stReqRcvd:
		rej.LocalCommID, rej.MessageRejected = 0, cmwire.MsgREQ
	case stMRAReqSent:
		rej.MessageRejected = cmwire.MsgREQ
	case stRepRcvd, stMRARepSent:
		rej.MessageRejected = cmwire.MsgREP
	}
	m := c.newMAD(cmwire.AttrREJ, id.tid)
	rej.Encode(m)
	c.sendMAD(m, id.peer)
	c.Counters.RejectsSent.Add(1)
	return true
}

// guidARI is the ARI of a REJ with reason timeout: the node GUID, big endian.
func (c *CM) guidARI() []byte { return binary.BigEndian.AppendUint64(nil, c.nodeGUID()) }

// issueREJ answers a received message with a REJ for which no ID exists
// (cm_issue_rej): the IDs are the received message's, swapped.
func (c *CM) issueREJ(rcv cmwire.MAD, from netip.AddrPort, reason cmwire.RejReason, kind cmwire.MessageKind, ari []byte) {
	local, remote := cmwire.CommIDs(rcv) // a REQ's second word is reserved: 0
	m := c.newMAD(cmwire.AttrREJ, rcv.TID())
	(&cmwire.REJ{LocalCommID: remote, RemoteCommID: local, MessageRejected: kind, Reason: reason,
		ARILength: uint8(len(ari)), ARI: ari}).Encode(m)
	c.sendMAD(m, from)
	c.Counters.RejectsSent.Add(1)
}

// sendDREQ is cm_send_dreq_locked: an established connection asks to end.
func (c *CM) sendDREQ(id *cmID, pd []byte) bool {
	if id.state != stEstablished {
		return false
	}
	m := c.newMAD(cmwire.AttrDREQ, c.formTID(id))
	(&cmwire.DREQ{LocalCommID: id.localID, RemoteCommID: id.remoteID, RemoteQPNEECN: id.remoteQPN, PrivateData: pd}).Encode(m)
	id.state = stDREQSent
	c.post(id, m, id.timeoutMS)
	return true
}

// sendDREP is cm_send_drep_locked: a DREQ is answered and the ID waits out
// timewait.
func (c *CM) sendDREP(id *cmID, pd []byte) bool {
	if id.state != stDREQRcvd {
		return false
	}
	id.private = pd
	c.enterTimewait(id)
	c.formatDREP(id, id.peer)
	return true
}

func (c *CM) formatDREP(id *cmID, dst netip.AddrPort) {
	m := c.newMAD(cmwire.AttrDREP, id.tid)
	(&cmwire.DREP{LocalCommID: id.localID, RemoteCommID: id.remoteID, PrivateData: id.private}).Encode(m)
	c.sendMAD(m, dst)
}

// issueDREP answers a DREQ for which no ID exists (cm_issue_drep).
func (c *CM) issueDREP(rcv cmwire.MAD, from netip.AddrPort) {
	local, remote := cmwire.CommIDs(rcv)
	m := c.newMAD(cmwire.AttrDREP, rcv.TID())
	(&cmwire.DREP{LocalCommID: remote, RemoteCommID: local}).Encode(m)
	c.sendMAD(m, from)
}

func (c *CM) sendSIDRReq(id *cmID, req *cmwire.SIDRReq, timeoutMS int) {
	m := c.newMAD(cmwire.AttrSIDRReq, id.tid)
	req.Encode(m)
	id.state = stSIDRReqSent
	c.post(id, m, timeoutMS)
}

// sendSIDRRep is cm_send_sidr_rep_locked: the SIDR request is answered and
// forgotten.
func (c *CM) sendSIDRRep(id *cmID, rep *cmwire.SIDRRep) bool {
	if id.state != stSIDRReqRcvd {
		return false
	}
	rep.RequestID, rep.ServiceID = id.remoteID, id.sid
	m := c.newMAD(cmwire.AttrSIDRRep, id.tid)
	rep.Encode(m)
	c.sendMAD(m, id.peer)
	id.state = stIdle
	if id.sidrKey != nil {
		delete(c.sidrs, *id.sidrKey)
		id.sidrKey = nil
	}
	return true
}
