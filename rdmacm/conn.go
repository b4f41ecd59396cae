package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rdmacm/cmwire"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
)

// MaxResources asks for as many responder resources or as deep an
// initiator depth as the device allows (librdmacm's RDMA_MAX_RESP_RES and
// RDMA_MAX_INIT_DEPTH).
const MaxResources = 0xFF

// ConnParam is what a connection asks for (struct rdma_conn_param).
type ConnParam struct {
	// ResponderResources is how many RDMA READs and atomics the peer may
	// have outstanding at us; InitiatorDepth how many we may have at the
	// peer. MaxResources: the device's limit.
	ResponderResources uint8
	InitiatorDepth     uint8
	// RetryCount and RNRRetryCount are the QPs' retry_cnt and rnr_retry
	// (at most 7; 7 RNR retries is "forever").
	RetryCount    uint8
	RNRRetryCount uint8
	// FlowControl is the end-to-end flow control flag of the REQ and REP.
	FlowControl bool
}

// defaultParam is librdmacm's when an application passes no parameters.
func defaultParam() ConnParam {
	return ConnParam{ResponderResources: MaxResources, InitiatorDepth: MaxResources, RetryCount: 7, RNRRetryCount: 7}
}

// QPConfig says how a connection's QP and CQs are made.
type QPConfig struct {
	// PD is the protection domain of the QP (nil: a new one, which the
	// connection owns and which its Close frees).
	PD *device.PD
	// Cap sizes the QP (zero: 16 send and 16 receive WRs of one SGE).
	Cap qp.Cap
	// SendCQ and RecvCQ are the CQs to use (nil: one new CQ for both,
	// deep enough for both queues, which the connection owns).
	SendCQ, RecvCQ *cq.CQ
	// SigAll makes every send signaled.
	SigAll bool
	// OnAsyncEvent receives the QP's asynchronous events.
	OnAsyncEvent func(qp.Event)
	// CQConfig is the configuration of a CQ the connection makes.
	CQConfig cq.Config
}

// EventType is a connection's event (rdma_cm's event types it can meet
// once connected).
type EventType uint8

const (
	// EventDisconnected: the connection ended (the peer's DREQ, our DREQ's
	// answer or its timeout, a REJ, the CM closing).
	EventDisconnected EventType = iota + 1
	// EventTimewaitExit: the connection's timewait ended; its QP number
	// may be reused by a peer without meeting its old packets.
	EventTimewaitExit
)

func (t EventType) String() string {
	switch t {
	case EventDisconnected:
		return "DISCONNECTED"
	case EventTimewaitExit:
		return "TIMEWAIT_EXIT"
	}
	return "EVENT?"
}

// Event is one event of a connection.
type Event struct {
	Type EventType
	// Err says why, when the event is not the orderly end of a connection.
	Err error
	// PrivateData is what the peer's message carried (DREQ, DREP, REJ).
	PrivateData []byte
}

// Conn is an RC connection made through the CM: its QP, CQs and PD, and
// the CM state that ends it.
type Conn struct {
	cm     *CM
	pd     *device.PD
	sendCQ *cq.CQ
	recvCQ *cq.CQ
	qp     *qp.QP
	ownPD  bool
	ownCQ  bool

	local, remote netip.AddrPort
	ps            cmwire.PortSpace
	param         ConnParam
	peerPrivate   []byte

	events chan Event

	// Guarded by cm.mu.
	id        *cmID
	setup     chan error // the outcome of Dial or Accept (buffered)
	done      chan struct{}
	ended     bool
	closed    bool
	boundPort bool // the local port is the connection's own (active side)

	closeOnce sync.Once
}

// QP returns the connection's queue pair.
func (c *Conn) QP() *qp.QP { return c.qp }

// SendCQ and RecvCQ return the QP's CQs (the same CQ unless QPConfig named two).
func (c *Conn) SendCQ() *cq.CQ { return c.sendCQ }

// RecvCQ returns the QP's receive CQ.
func (c *Conn) RecvCQ() *cq.CQ { return c.recvCQ }

// PD returns the QP's protection domain.
func (c *Conn) PD() *device.PD { return c.pd }

// LocalAddr returns the connection's local address and rdma_cm port.
func (c *Conn) LocalAddr() netip.AddrPort { return c.local }

// RemoteAddr returns the peer's address and rdma_cm port.
func (c *Conn) RemoteAddr() netip.AddrPort { return c.remote }

// PeerPrivateData returns the private data of the peer's REP (active
// side) or REQ (passive side, after the rdma_cm header).
func (c *Conn) PeerPrivateData() []byte { return c.peerPrivate }

// Param returns the connection's negotiated parameters, as its QP has
// them: its responder resources, initiator depth and retry counts.
func (c *Conn) Param() ConnParam { return c.param }

// Events returns the connection's events. They are also dropped when
// nobody reads them (the channel holds 4); Done is the reliable signal.
func (c *Conn) Events() <-chan Event { return c.events }

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

func (c *CM) newConn(ps cmwire.PortSpace) *Conn {
	return &Conn{cm: c, ps: ps, events: make(chan Event, 4), setup: make(chan error, 1), done: make(chan struct{})}
}

// makeQP creates the connection's PD, CQs and RC QP, in INIT as rdma_cm
// leaves it (ucma_init_conn_qp) with access flags: what ib_cm grants at
// RTR. It runs without cm.mu.
func (c *Conn) makeQP(cfg *QPConfig, access device.Access) error {
	c.pd, c.ownPD = cfg.PD, false
	if c.pd == nil {
		c.pd, c.ownPD = c.cm.dev.AllocPD(), true
	} else if c.pd.Device() != c.cm.dev {
		return errors.New("rdmacm: the QPConfig's PD belongs to another device")
	}
	capa := cfg.Cap
	if capa.MaxSendWR == 0 && capa.MaxRecvWR == 0 {
		capa = qp.Cap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	}
	c.sendCQ, c.recvCQ = cfg.SendCQ, cfg.RecvCQ
	if c.sendCQ == nil || c.recvCQ == nil {
		if c.sendCQ != nil || c.recvCQ != nil {
			return errors.New("rdmacm: QPConfig names one CQ: give both SendCQ and RecvCQ, or neither")
		}
		ch, err := cq.New(capa.MaxSendWR+capa.MaxRecvWR, cfg.CQConfig)
		if err != nil {
			return fmt.Errorf("rdmacm: %w", err)
		}
		c.sendCQ, c.recvCQ, c.ownCQ = ch, ch, true
	}
	q, err := qp.Create(c.pd, qp.InitAttr{Type: qp.RC, SendCQ: c.sendCQ, RecvCQ: c.recvCQ, Cap: capa,
		SigAll: cfg.SigAll, OnAsyncEvent: cfg.OnAsyncEvent})
	if err != nil {
		return fmt.Errorf("rdmacm: %w", err)
	}
	c.qp = q
	return q.Modify(&qp.Attr{State: qp.Init, Port: 1, AccessFlags: access},
		qp.MaskState|qp.MaskPKeyIndex|qp.MaskPort|qp.MaskAccessFlags)
}

// initAccess is what ib_cm's cm_init_qp_init_attr grants: remote writes,
// and reads and atomics when the connection has responder resources.
func initAccess(respRes uint8) device.Access {
	a := device.AccessRemoteWrite
	if respRes > 0 {
		a |= device.AccessRemoteRead | device.AccessRemoteAtomic
	}
	return a
}

// qpSnapshot is what the QP's RTR and RTS need of the ID, taken under
// cm.mu so that the modify runs without it.
type qpSnapshot struct {
	path                 cmwire.Path
	peer                 netip.AddrPort
	mtu                  rocev2.MTU
	remoteQPN            uint32
	rqPSN, sqPSN         uint32
	respRes, initDepth   uint8
	retryCount, rnrRetry uint8
	avTimeout            uint8
}

func (c *CM) snapshot(id *cmID) qpSnapshot {
	mtu := min(rocev2.MTU(id.pathMTU), c.dev.Port().ActiveMTU)
	if !mtu.Valid() {
		mtu = rocev2.MTU256
	}
	return qpSnapshot{path: id.path, peer: id.peer, mtu: mtu, remoteQPN: id.remoteQPN, rqPSN: id.rqPSN, sqPSN: id.sqPSN,
		respRes: min(id.respRes, device.MaxQPRdAtom), initDepth: min(id.initDepth, device.MaxQPRdAtom),
		retryCount: min(id.retryCount, 7), rnrRetry: min(id.rnrRetry, 7), avTimeout: id.avTimeout}
}

// connectQP moves the QP through INIT (again, with ib_cm's access flags),
// RTR and RTS as rdma_cm does before a REP (passive) or an RTU (active):
// cm_init_qp_rtr_attr and cm_init_qp_rts_attr's attributes.
func (c *Conn) connectQP(s qpSnapshot) error {
	q := c.qp
	if err := q.Modify(&qp.Attr{State: qp.Init, AccessFlags: initAccess(s.respRes)}, qp.MaskState|qp.MaskAccessFlags); err != nil {
		return err
	}
	av := qp.AH{DGID: device.GID(s.path.RemoteGID), SGIDIndex: c.cm.sgidIndex(s.path.LocalGID), HopLimit: s.path.HopLimit,
		TClass: s.path.TrafficClass, FlowLabel: s.path.FlowLabel, DestPort: s.peer.Port()}
	if err := q.Modify(&qp.Attr{State: qp.RTR, AH: av, PathMTU: s.mtu, DestQPN: s.remoteQPN,
		RQPSN: rocev2.PSN(s.rqPSN), MaxDestRdAtomic: s.respRes, MinRNRTimer: 0},
		qp.MaskState|qp.MaskAV|qp.MaskPathMTU|qp.MaskDestQPN|qp.MaskRQPSN|qp.MaskMaxDestRdAtomic|qp.MaskMinRNRTimer); err != nil {
		return err
	}
	return q.Modify(&qp.Attr{State: qp.RTS, SQPSN: rocev2.PSN(s.sqPSN), Timeout: s.avTimeout, RetryCnt: s.retryCount,
		RNRRetry: s.rnrRetry, MaxRdAtomic: s.initDepth},
		qp.MaskState|qp.MaskSQPSN|qp.MaskTimeout|qp.MaskRetryCnt|qp.MaskRNRRetry|qp.MaskMaxQPRdAtomic)
}

// toError moves the QP to ERR (cma_modify_qp_err): what is posted
// completes with WR_FLUSH_ERR. Without cm.mu.
func (c *Conn) toError() {
	if c.qp != nil {
		_ = c.qp.Modify(&qp.Attr{State: qp.Err}, qp.MaskState)
	}
}

// event is the connection's ib_cm event handler (cm.mu held); what it
// does to the QP and tells the application happens after unlock.
func (c *Conn) event(id *cmID, ev ownerEvent, e *eventData) {
	cm := c.cm
	switch ev {
	case evRepReceived: // active: the peer accepted
		// rdma_cm answers with a delayed MRA (none on the wire), then
		// connects the QP and sends the RTU.
		id.state, id.svcTimeout = stMRARepSent, mraServiceTimeout
		c.peerPrivate = e.pd
		c.param.ResponderResources, c.param.InitiatorDepth = id.respRes, id.initDepth
		c.param.RNRRetryCount = id.rnrRetry
		s := cm.snapshot(id)
		cm.later(func() { c.finishActive(s) })
	case evEstablished: // passive: the RTU came
		c.signal(nil)
	case evReqError, evRepError:
		c.signal(fmt.Errorf("%w: %w", ErrUnreachable, e.status))
		cm.later(c.toError)
	case evRejReceived:
		err := &RejectedError{Reason: e.rej.Reason, PrivateData: e.pd}
		if !c.signal(err) {
			c.end(Event{Type: EventDisconnected, Err: err, PrivateData: e.pd})
		}
		cm.later(c.toError)
	case evDREQReceived:
		// The peer disconnects: rdma_cm reports it, and the application's
		// rdma_disconnect moves the QP to ERR and answers with the DREP.
		// goroce does both for it.
		pd := e.pd
		cm.later(func() {
			c.toError()
			if cm.lock() != nil {
				return
			}
			if c.id == id {
				cm.sendDREP(id, nil)
			}
			c.end(Event{Type: EventDisconnected, PrivateData: pd})
			cm.unlock()
		})
	case evDREPReceived:
		c.end(Event{Type: EventDisconnected, PrivateData: e.pd})
	case evDREQError:
		c.end(Event{Type: EventDisconnected, Err: fmt.Errorf("rdmacm: disconnect: %w", ErrTimeout)})
	case evTimewaitExit:
		c.emit(Event{Type: EventTimewaitExit})
	case evClosed:
		if !c.signal(ErrClosed) {
			c.end(Event{Type: EventDisconnected, Err: ErrClosed})
		}
		cm.later(c.toError)
	}
}

// finishActive is rdma_cm's answer to a REP: the QP to RTR and RTS, then
// the RTU (cma_rep_recv), or a REJ if the QP refuses.
func (c *Conn) finishActive(s qpSnapshot) {
	err := c.connectQP(s)
	cm := c.cm
	if cm.lock() != nil {
		return
	}
	defer cm.unlock()
	id := c.id
	if id == nil || (id.state != stMRARepSent && id.state != stRepRcvd) {
		return // rejected, closed or cancelled meanwhile: that path reports it
	}
	if err != nil {
		cm.sendREJ(id, cmwire.RejConsumerDefined, nil, nil)
		cm.later(c.toError)
		c.signal(fmt.Errorf("rdmacm: connect: the QP refused the peer's parameters: %w", err))
		return
	}
	cm.sendRTU(id, nil)
	c.signal(nil)
}

// signal reports the outcome of connection setup once; it reports whether
// setup was still waiting (cm.mu held).
func (c *Conn) signal(err error) bool {
	if c.setup == nil {
		return false
	}
	c.setup <- err
	c.setup = nil
	return true
}

// end marks the connection ended and tells the application (cm.mu held).
func (c *Conn) end(ev Event) {
	if c.ended {
		return
	}
	c.ended = true
	// The peer hung up before the RTU: the setup fails.
	c.signal(fmt.Errorf("rdmacm: the peer disconnected before the connection was established: %w", ErrDisconnected))
	close(c.done)
	c.emit(ev)
}

func (c *Conn) emit(ev Event) {
	select {
	case c.events <- ev:
	default:
	}
}

// waitSetup waits for the outcome of connection setup; a cancelled ctx
// abandons it (the ID is destroyed as ib_cm destroys it: a REJ).
func (c *Conn) waitSetup(ctx context.Context, ch chan error) error {
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
	}
	cm := c.cm
	if cm.lock() == nil {
		c.setup = nil
		cm.unlock()
	}
	select {
	case err := <-ch: // it finished after all
		return err
	default:
	}
	return ctx.Err()
}

// Disconnect ends the connection (rdma_disconnect): the QP moves to ERR,
// a DREQ goes to the peer (or the DREP, if the peer asked first). Done is
// closed when the peer answers, or when the DREQ's retries run out.
func (c *Conn) Disconnect() error {
	c.toError()
	cm := c.cm
	if err := cm.lock(); err != nil {
		return err
	}
	defer cm.unlock()
	id := c.id
	if id == nil {
		return ErrDisconnected
	}
	if cm.sendDREQ(id, nil) || cm.sendDREP(id, nil) {
		if id.state == stTimewait {
			c.end(Event{Type: EventDisconnected})
		}
		return nil
	}
	return fmt.Errorf("rdmacm: disconnect: connection in state %v: %w", id.state, ErrDisconnected)
}

// Close disconnects if still connected, destroys the QP and what the
// connection made (PD, CQ), and lets the CM forget the connection once its
// disconnect has run its course. It does not wait for the peer.
func (c *Conn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		cm := c.cm
		c.toError()
		if cm.lock() == nil {
			if id := c.id; id != nil {
				if !cm.sendDREQ(id, nil) {
					cm.sendDREP(id, nil)
				}
				cm.release(id)
				c.id = nil
			}
			if c.boundPort {
				cm.unbindPort(c.ps, c.local.Port())
			}
			c.end(Event{Type: EventDisconnected, Err: ErrDisconnected})
			cm.unlock()
		}
		err = c.destroy()
	})
	return err
}

// destroy frees the QP, and the CQ and PD if the connection made them.
func (c *Conn) destroy() error {
	var err error
	if c.qp != nil {
		if e := c.qp.Destroy(); e != nil && !errors.Is(e, qp.ErrDestroyed) {
			err = e
		}
	}
	if c.ownCQ && c.sendCQ != nil {
		_ = c.sendCQ.Close()
	}
	return err
}

// release is ib_destroy_cm_id for an ID whose owner is done with it: an ID
// still being set up is rejected (cm_destroy_id), one established or
// disconnecting runs its disconnect to the end without an owner (c.mu
// held).
func (c *CM) release(id *cmID) {
	id.owner, id.released = nil, true
	switch id.state {
	case stReqSent, stMRAReqRcvd:
		c.sendREJ(id, cmwire.RejTimeout, c.guidARI(), nil)
	case stReqRcvd, stMRAReqSent, stRepRcvd, stMRARepSent, stRepSent, stMRARepRcvd:
		c.sendREJ(id, cmwire.RejConsumerDefined, nil, nil)
	case stSIDRReqSent:
		c.cancel(id)
		id.state = stIdle
	case stSIDRReqRcvd:
		c.sendSIDRRep(id, &cmwire.SIDRRep{Status: cmwire.SIDRReject})
	}
	c.maybeFree(id)
}
