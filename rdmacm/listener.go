package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/rdmacm/cmwire"
)

// DefaultBacklog is a listener's backlog when ListenConfig gives none.
const DefaultBacklog = 128

// MaxBacklog bounds a listener's backlog (librdmacm's default
// max_backlog).
const MaxBacklog = 1024

// ListenConfig configures a listener.
type ListenConfig struct {
	// Addr is the address and rdma_cm port to listen on. The address is
	// the device's or unspecified (any: the device's, of either family).
	// Port 0 takes a free port.
	Addr netip.AddrPort
	// PortSpace is the rdma_cm port space (0: PortSpaceTCP, RC
	// connections; PortSpaceUDP takes SIDR requests for UD; PortSpaceIB
	// takes RC, or UD with UD set).
	PortSpace cmwire.PortSpace
	// UD makes a PortSpaceIB listener take SIDR requests.
	UD bool
	// Backlog bounds the requests that wait for Accept (0:
	// DefaultBacklog; at most MaxBacklog). A request beyond it is dropped
	// without an answer, as Linux drops it: the peer retries.
	Backlog int
}

// Listener takes connection requests (REQ) or, for UD, service ID
// resolution requests (SIDR_REQ) for one rdma_cm port.
type Listener struct {
	cm      *CM
	addr    netip.AddrPort
	ps      cmwire.PortSpace
	ud      bool
	sid     uint64
	pending chan *Request
	closed  bool // guarded by cm.mu
	done    chan struct{}
}

// Listen starts listening (rdma_bind_addr and rdma_listen).
func (c *CM) Listen(cfg ListenConfig) (*Listener, error) {
	ps := cfg.PortSpace
	if ps == 0 {
		ps = cmwire.PortSpaceTCP
	}
	ud := ps == cmwire.PortSpaceUDP || (ps == cmwire.PortSpaceIB && cfg.UD)
	if ps != cmwire.PortSpaceTCP && ps != cmwire.PortSpaceUDP && ps != cmwire.PortSpaceIB {
		return nil, fmt.Errorf("rdmacm: listen: port space %#04x is not TCP, UDP or IB", uint16(ps))
	}
	backlog := cfg.Backlog
	if backlog <= 0 {
		backlog = DefaultBacklog
	}
	backlog = min(backlog, MaxBacklog)
	if err := c.lock(); err != nil {
		return nil, err
	}
	defer c.unlock()
	addr := cfg.Addr.Addr()
	if addr.IsValid() && !addr.IsUnspecified() {
		if _, err := c.localAddr(addr); err != nil {
			return nil, fmt.Errorf("rdmacm: listen on %v: %w", cfg.Addr, err)
		}
	}
	port, err := c.bindPort(ps, cfg.Addr.Port())
	if err != nil {
		return nil, fmt.Errorf("rdmacm: listen on %v: %w", cfg.Addr, err)
	}
	l := &Listener{cm: c, addr: netip.AddrPortFrom(addr, port), ps: ps, ud: ud, sid: cmwire.ServiceID(ps, port),
		pending: make(chan *Request, backlog), done: make(chan struct{})}
	c.listeners[l.sid] = l
	return l, nil
}

// Addr returns the address and port the listener listens on.
func (l *Listener) Addr() netip.AddrPort { return l.addr }

// Close stops listening. Requests not yet accepted are rejected.
func (l *Listener) Close() error {
	if err := l.cm.lock(); err != nil {
		return nil
	}
	l.closeLocked()
	l.cm.unlock()
	return nil
}

func (l *Listener) closeLocked() {
	if l.closed {
		return
	}
	l.closed = true
	close(l.done)
	c := l.cm
	if c.listeners[l.sid] == l {
		delete(c.listeners, l.sid)
	}
	c.unbindPort(l.ps, l.addr.Port())
	for {
		select {
		case r := <-l.pending:
			if r.id != nil {
				c.release(r.id)
				r.id = nil
			}
		default:
			return
		}
	}
}

// Accept waits for the next request. A request must be answered
// (Request.Accept or Reject); the peer resends its REQ meanwhile and gives
// up after its retries.
func (l *Listener) Accept(ctx context.Context) (*Request, error) {
	for {
		select {
		case r := <-l.pending:
			if r.live() {
				return r, nil
			}
		case <-l.done:
			return nil, ErrListenerClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Request is a connection request (a REQ) or, on a UD listener, a SIDR
// request, waiting for its answer.
type Request struct {
	l  *Listener
	id *cmID // guarded by cm.mu; nil once answered or gone

	// RemoteAddr is the peer's address and rdma_cm port, LocalAddr ours,
	// from the rdma_cm header.
	RemoteAddr, LocalAddr netip.AddrPort
	// PrivateData is the application's part of the request's private
	// data (after the rdma_cm header).
	PrivateData []byte
	// Param is what the peer offers, from our point of view (rdma_cm's
	// event): its initiator depth is our responder resources and its
	// responder resources our initiator depth.
	Param ConnParam
	// RemoteQPN is the peer's QP (0 for a SIDR request).
	RemoteQPN uint32
	// UD reports a SIDR request, answered with AcceptUD.
	UD bool
	// roce is the UDP port the peer's device receives on.
	roce uint16
}

// live reports whether the request can still be answered.
func (r *Request) live() bool {
	c := r.l.cm
	if c.lock() != nil {
		return false
	}
	defer c.unlock()
	return r.id != nil
}

// event is the pending request's ib_cm handler (cm.mu held): a REJ or
// the CM's end takes it away.
func (r *Request) event(id *cmID, ev ownerEvent, _ *eventData) {
	if ev == evRejReceived || ev == evClosed {
		r.id = nil
	}
}

// reject refuses a REQ before it is a Request (rdma_cm's handler failed:
// ib_cm sends REJ consumer defined). c.mu held.
func (c *CM) rejectEarly(id *cmID) {
	c.sendREJ(id, cmwire.RejConsumerDefined, nil, nil)
	c.forget(id)
}

// request is rdma_cm's cma_ib_req_handler for a REQ ib_cm matched to l:
// the QP type and the rdma_cm header are checked, and the request waits in
// the backlog (c.mu held).
func (l *Listener) request(id *cmID, req *cmwire.REQ, m cmwire.MAD) {
	c := l.cm
	if l.ud || (req.TransportType != cmwire.TransportRC || req.ExtTransportType != 0) {
		c.rejectEarly(id) // cma_ib_check_req_qp_type
		return
	}
	hdr, ok := l.checkHeader(req.PrivateData)
	if !ok {
		c.rejectEarly(id)
		return
	}
	r := &Request{l: l, id: id, RemoteAddr: netip.AddrPortFrom(hdr.Src, hdr.Port),
		LocalAddr:   netip.AddrPortFrom(hdr.Dst, l.addr.Port()),
		PrivateData: append([]byte(nil), req.PrivateData[cmwire.CMAHeaderLen:]...),
		Param: ConnParam{ResponderResources: req.InitiatorDepth, InitiatorDepth: req.ResponderResources,
			RetryCount: req.RetryCount, RNRRetryCount: req.RNRRetryCount, FlowControl: req.FlowControl},
		RemoteQPN: req.LocalQPN, roce: id.peer.Port()}
	id.owner = r
	select {
	case l.pending <- r:
	default:
		// The backlog is full: librdmacm's ucma refuses with -ENOMEM, and
		// ib_cm then drops the REQ without a REJ so that the peer retries.
		c.Counters.ListenOverflow.Add(1)
		c.forget(id)
		return
	}
	// rdma_cm's delayed MRA: none on the wire, but a duplicate REQ now
	// gets an MRA (cm_dup_req_handler).
	id.state, id.svcTimeout = stMRAReqSent, mraServiceTimeout
}

// checkHeader is rdma_cm's check of the header a REQ or SIDR_REQ opens
// with (cma_save_ip_info, validate_net_dev, cma_match_private_data).
func (l *Listener) checkHeader(pd []byte) (cmwire.CMAHeader, bool) {
	c := l.cm
	hdr, err := cmwire.ParseCMAHeader(pd)
	if err != nil || hdr.Version != cmwire.CMAVersion || !validPeer(hdr.Src) || !validPeer(hdr.Dst) {
		c.Counters.BadRDMACMHeader.Add(1)
		return hdr, false
	}
	own := c.dev.LocalAddr().Addr().Unmap()
	if hdr.Dst.Is4() != own.Is4() {
		c.Counters.BadRDMACMHeader.Add(1)
		return hdr, false
	}
	if a := l.addr.Addr(); a.IsValid() && !a.IsUnspecified() && hdr.Dst != a.Unmap().WithZone("") {
		return hdr, false // bound to another address of ours: no listener for it
	}
	return hdr, true
}

// AcceptConfig says how an accepted connection is made.
type AcceptConfig struct {
	QP QPConfig
	// Param is ours; nil: librdmacm's default for rdma_accept without
	// parameters (the peer's offer within the device's limits, retries 7).
	Param *ConnParam
	// Prepare runs once the QP exists (in INIT), before the REP: post the
	// receives the peer's first SENDs need.
	Prepare func(*Conn) error
	// PrivateData goes in the REP (at most 196 bytes).
	PrivateData []byte
}

// Accept accepts the connection (rdma_accept): the QP is made and moved
// to RTS, the REP sent, and Accept returns once the peer's RTU has
// established the connection. A cancelled ctx gives up (a REJ).
func (r *Request) Accept(ctx context.Context, cfg AcceptConfig) (*Conn, error) {
	if r.UD {
		return nil, errors.New("rdmacm: accept: a SIDR request is answered with AcceptUD")
	}
	if len(cfg.PrivateData) > cmwire.REPPrivateLen {
		return nil, fmt.Errorf("rdmacm: accept: %d bytes of private data, a REP holds %d", len(cfg.PrivateData), cmwire.REPPrivateLen)
	}
	c := r.l.cm
	conn := c.newConn(r.l.ps)
	conn.local, conn.remote, conn.peerPrivate = r.LocalAddr, r.RemoteAddr, r.PrivateData
	param := r.Param
	if cfg.Param != nil {
		param = *cfg.Param
	} else {
		param.RetryCount, param.RNRRetryCount = 7, 7
	}
	param.ResponderResources = min(param.ResponderResources, uint8(min(c.dev.Attr().MaxQPRdAtom, 255)))
	param.InitiatorDepth = min(param.InitiatorDepth, uint8(min(c.dev.Attr().MaxQPInitRdAtom, 255)))
	param.RetryCount, param.RNRRetryCount = min(param.RetryCount, 7), min(param.RNRRetryCount, 7)

	if err := c.lock(); err != nil {
		return nil, err
	}
	id := r.id
	if id == nil || (id.state != stMRAReqSent && id.state != stReqRcvd) {
		c.unlock()
		return nil, ErrRequestGone
	}
	id.owner, conn.id = conn, id
	r.id = nil
	id.respRes, id.initDepth = param.ResponderResources, param.InitiatorDepth
	id.rqPSN = randomPSN()
	c.unlock()

	fail := func(err error) (*Conn, error) {
		if c.lock() == nil {
			if conn.id != nil {
				c.release(conn.id)
				conn.id = nil
			}
			c.unlock()
		}
		conn.toError()
		_ = conn.destroy()
		return nil, err
	}
	if err := conn.makeQP(&cfg.QP, initAccess(param.ResponderResources)); err != nil {
		return fail(err)
	}
	if cfg.Prepare != nil {
		if err := cfg.Prepare(conn); err != nil {
			return fail(err)
		}
	}
	if err := c.lock(); err != nil {
		return fail(err)
	}
	if conn.id == nil || (id.state != stMRAReqSent && id.state != stReqRcvd) {
		c.unlock()
		return fail(ErrPeerGone)
	}
	s := c.snapshot(id)
	c.unlock()
	if err := conn.connectQP(s); err != nil {
		return fail(fmt.Errorf("rdmacm: accept: the QP refused the request's parameters: %w", err))
	}
	if err := c.lock(); err != nil {
		return fail(err)
	}
	if conn.id == nil || (id.state != stMRAReqSent && id.state != stReqRcvd) {
		c.unlock()
		return fail(ErrPeerGone)
	}
	id.localQPN = conn.qp.QPN()
	conn.param = param
	ch := conn.setup
	id.state = stRepSent
	c.sendREP(id, &cmwire.REP{LocalCommID: id.localID, RemoteCommID: id.remoteID, LocalQPN: id.localQPN,
		StartingPSN: id.rqPSN, ResponderResources: param.ResponderResources, InitiatorDepth: param.InitiatorDepth,
		TargetACKDelay: uint8(c.dev.Attr().LocalCAAckDelay), FlowControl: param.FlowControl,
		RNRRetryCount: param.RNRRetryCount, LocalCAGUID: c.nodeGUID(), PrivateData: cfg.PrivateData})
	c.unlock()
	if err := conn.waitSetup(ctx, ch); err != nil {
		return fail(err)
	}
	return conn, nil
}

// Reject refuses the request (rdma_reject): a REJ with reason consumer
// defined and privateData (at most 148 bytes), or for a SIDR request a
// SIDR_REP with status reject.
func (r *Request) Reject(privateData []byte) error {
	c := r.l.cm
	if len(privateData) > cmwire.REJPrivateLen {
		return fmt.Errorf("rdmacm: reject: %d bytes of private data, a REJ holds %d", len(privateData), cmwire.REJPrivateLen)
	}
	if err := c.lock(); err != nil {
		return err
	}
	defer c.unlock()
	id := r.id
	if id == nil {
		return ErrRequestGone
	}
	r.id = nil
	id.owner, id.released = nil, true
	if r.UD {
		c.sendSIDRRep(id, &cmwire.SIDRRep{Status: cmwire.SIDRReject, PrivateData: privateData})
	} else {
		c.sendREJ(id, cmwire.RejConsumerDefined, nil, privateData)
	}
	c.maybeFree(id)
	return nil
}
