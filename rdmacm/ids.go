package rdmacm

import (
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/goroce/goroce/rdmacm/cmwire"
)

// idState is a CM ID's state, as ib_cm's enum ib_cm_state.
type idState uint8

const (
	stIdle idState = iota
	stListen
	stReqSent
	stReqRcvd
	stMRAReqSent
	stMRAReqRcvd
	stRepSent
	stRepRcvd
	stMRARepSent
	stMRARepRcvd
	stEstablished
	stDREQSent
	stDREQRcvd
	stTimewait
	stSIDRReqSent
	stSIDRReqRcvd
)

var stateNames = [...]string{"IDLE", "LISTEN", "REQ_SENT", "REQ_RCVD", "MRA_REQ_SENT", "MRA_REQ_RCVD", "REP_SENT",
	"REP_RCVD", "MRA_REP_SENT", "MRA_REP_RCVD", "ESTABLISHED", "DREQ_SENT", "DREQ_RCVD", "TIMEWAIT",
	"SIDR_REQ_SENT", "SIDR_REQ_RCVD"}

func (s idState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "STATE?"
}

// remoteKey names a peer's connection end as ib_cm's rb-trees do: a
// communication ID or a QP number, with the peer's CA GUID.
type remoteKey struct {
	n    uint32
	guid uint64
}

// sidrKey names a peer's SIDR request: its request ID and address.
type sidrKey struct {
	id   uint32
	addr netip.Addr
}

// cmID is one end of a connection (or of a SIDR exchange) in the CM: the
// state ib_cm keeps in struct cm_id_private. Every field is guarded by
// CM.mu.
type cmID struct {
	localID  uint32 // local communication ID, as on the wire
	remoteID uint32
	state    idState
	sid      uint64 // service ID
	tid      uint64 // transaction ID of our messages (the REQ's for the passive side)
	peer     netip.AddrPort

	remoteGUID uint64
	remoteQPN  uint32
	localQPN   uint32
	transport  uint8 // cmwire.TransportRC or UC
	sqPSN      uint32
	rqPSN      uint32
	timeoutMS  int // a REQ's, REP's or DREQ's wait for its answer
	maxRetries uint8
	respRes    uint8 // responder resources (max_dest_rd_atomic)
	initDepth  uint8 // initiator depth (max_rd_atomic)
	retryCount uint8
	rnrRetry   uint8
	pathMTU    uint8
	avTimeout  uint8 // the QP's local ACK timeout exponent (cm_av.timeout)
	svcTimeout uint8 // what a resent MRA says
	path       cmwire.Path
	private    []byte // what a resent RTU, DREP or MRA carries

	// inRemoteID and inRemoteQPN: the ID is in the CM's remote tables
	// (between REQ_RCVD/REP_RCVD and TIMEWAIT), under these keys.
	inRemoteID, inRemoteQPN bool
	remoteIDKey, qpnKey     remoteKey
	sidrKey                 *sidrKey

	msg         *outMsg   // the message that waits for an answer (REQ, REP, DREQ, SIDR_REQ)
	timewaitEnd time.Time // when TIMEWAIT ends

	// owner is told of the ID's events (an rdma_cm connection, a UD
	// resolution); nil for an ID that answers alone (timewait).
	owner owner
	// released: the owner is done with the ID; it goes once IDLE.
	released bool
}

// ownerEvent is an ib_cm event for an ID's owner.
type ownerEvent uint8

const (
	evReqError ownerEvent = iota + 1 // the REQ got no answer
	evRepError                       // the REP got no RTU
	evRepReceived
	evEstablished // RTU received (passive)
	evDREQReceived
	evDREPReceived
	evDREQError
	evRejReceived
	evTimewaitExit
	evSIDRRep
	evSIDRReqError
	evClosed // the CM closed under the ID
)

// owner is what an ID reports its events to. event runs with CM.mu held:
// it records and defers (CM.after), never blocks or calls out.
type owner interface {
	event(id *cmID, ev ownerEvent, e *eventData)
}

// eventData is what a message brought along with its event.
type eventData struct {
	rep    *cmwire.REP
	rej    *cmwire.REJ
	sidr   *cmwire.SIDRRep
	pd     []byte // private data (a copy)
	status error  // why an operation failed
}

// newID allocates an ID with a fresh local communication ID: ib_cm takes
// the next free index and XORs it with a random operand, so that IDs are
// unique while alive and unpredictable. c.mu is held.
func (c *CM) newID(o owner) (*cmID, bool) {
	if len(c.ids) >= c.cfg.MaxIDs {
		return nil, false
	}
	for {
		c.nextIdx++
		local := c.nextIdx ^ c.idXor
		if c.nextIdx == 0 || local == 0 || c.ids[local] != nil {
			continue
		}
		id := &cmID{localID: local, owner: o, maxRetries: c.cfg.MaxCMRetries}
		c.ids[local] = id
		return id, true
	}
}

// acquire returns the ID with local ID local whose remote ID is remote, as
// ib_cm's cm_acquire_id (remote 0 matches an ID that knows none yet).
func (c *CM) acquire(local, remote uint32) *cmID {
	id := c.ids[local]
	if id == nil || id.remoteID != remote {
		return nil
	}
	return id
}

// insertRemoteID records the ID under the peer's communication ID; it
// returns the ID already there (a duplicate) instead.
func (c *CM) insertRemoteID(id *cmID, k remoteKey) *cmID {
	if cur := c.remoteIDs[k]; cur != nil {
		return cur
	}
	c.remoteIDs[k], id.remoteIDKey, id.inRemoteID = id, k, true
	return nil
}

// insertRemoteQPN records the ID under the peer's QP; it returns the ID
// already there (a stale connection) instead.
func (c *CM) insertRemoteQPN(id *cmID, k remoteKey) *cmID {
	if cur := c.remoteQPNs[k]; cur != nil {
		return cur
	}
	c.remoteQPNs[k], id.qpnKey, id.inRemoteQPN = id, k, true
	return nil
}

// removeRemote takes the ID out of the remote tables (cm_remove_remote).
func (c *CM) removeRemote(id *cmID) {
	if id.inRemoteID {
		delete(c.remoteIDs, id.remoteIDKey)
		id.inRemoteID = false
	}
	if id.inRemoteQPN {
		delete(c.remoteQPNs, id.qpnKey)
		id.inRemoteQPN = false
	}
}

// resetToIdle moves the ID to IDLE (cm_reset_to_idle), freeing it if its
// owner is done with it.
func (c *CM) resetToIdle(id *cmID) {
	id.state = stIdle
	c.removeRemote(id)
	c.maybeFree(id)
}

// maybeFree forgets an IDLE ID its owner released.
func (c *CM) maybeFree(id *cmID) {
	if id.state != stIdle || !id.released {
		return
	}
	c.cancel(id)
	c.removeRemote(id)
	if id.sidrKey != nil {
		delete(c.sidrs, *id.sidrKey)
		id.sidrKey = nil
	}
	if c.ids[id.localID] == id {
		delete(c.ids, id.localID)
	}
}

// randomOperand returns the XOR operand of local IDs and the TID's upper
// half (a MAD agent's hi_tid), both random per CM.
func randomOperand() uint32 { return rand.Uint32() }
