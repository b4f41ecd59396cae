package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rdmacm/cmwire"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
)

// UDPQKey is the Q_Key rdma_cm gives UD QPs of the UDP and IB port spaces
// (RDMA_UDP_QKEY).
const UDPQKey = 0x01234567

// UDEndpoint is a UD QP made for rdma_cm's UD port space, in RTS with
// UDPQKey, as rdma_create_qp makes it for a UDP ID.
type UDEndpoint struct {
	pd    *device.PD
	cq    *cq.CQ
	qp    *qp.QP
	ownPD bool
}

// NewUDEndpoint makes a UD QP on the CM's device (its PD, unless cfg
// names one, and one CQ for both queues).
func (c *CM) NewUDEndpoint(cfg QPConfig) (*UDEndpoint, error) {
	e := &UDEndpoint{pd: cfg.PD}
	if e.pd == nil {
		e.pd, e.ownPD = c.dev.AllocPD(), true
	}
	capa := cfg.Cap
	if capa.MaxSendWR == 0 && capa.MaxRecvWR == 0 {
		capa = qp.Cap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	}
	var err error
	if e.cq, err = cq.New(capa.MaxSendWR+capa.MaxRecvWR, cfg.CQConfig); err != nil {
		return nil, fmt.Errorf("rdmacm: %w", err)
	}
	e.qp, err = qp.Create(e.pd, qp.InitAttr{Type: qp.UD, SendCQ: e.cq, RecvCQ: e.cq, Cap: capa, SigAll: cfg.SigAll,
		OnAsyncEvent: cfg.OnAsyncEvent})
	if err == nil {
		err = e.qp.Modify(&qp.Attr{State: qp.Init, Port: 1, QKey: UDPQKey}, qp.MaskState|qp.MaskPKeyIndex|qp.MaskPort|qp.MaskQKey)
	}
	if err == nil {
		err = e.qp.Modify(&qp.Attr{State: qp.RTR}, qp.MaskState)
	}
	if err == nil {
		err = e.qp.Modify(&qp.Attr{State: qp.RTS, SQPSN: qp.RandomPSN()}, qp.MaskState|qp.MaskSQPSN)
	}
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("rdmacm: UD endpoint: %w", err)
	}
	return e, nil
}

// QP returns the endpoint's UD QP.
func (e *UDEndpoint) QP() *qp.QP { return e.qp }

// CQ returns the QP's CQ (send and receive).
func (e *UDEndpoint) CQ() *cq.CQ { return e.cq }

// PD returns the QP's protection domain.
func (e *UDEndpoint) PD() *device.PD { return e.pd }

// Close destroys the QP and its CQ.
func (e *UDEndpoint) Close() error {
	if e.qp != nil {
		_ = e.qp.Destroy()
	}
	if e.cq != nil {
		_ = e.cq.Close()
	}
	return nil
}

// UDPeer is a resolved UD service: where to send and with which Q_Key.
type UDPeer struct {
	// QPN and QKey are the remote QP's (from the SIDR_REP).
	QPN, QKey uint32
	// AH is the address vector to send to it with.
	AH qp.AH
	// RemoteAddr is the service's address and port.
	RemoteAddr netip.AddrPort
	// PrivateData is what the SIDR_REP carried.
	PrivateData []byte
}

// udResolve waits for a SIDR_REP.
type udResolve struct {
	done chan struct{}
	rep  *cmwire.SIDRRep
	err  error
}

func (u *udResolve) event(id *cmID, ev ownerEvent, e *eventData) {
	switch ev {
	case evSIDRRep:
		u.rep = e.sidr
	case evSIDRReqError:
		u.err = fmt.Errorf("%w: %w", ErrUnreachable, ErrTimeout)
	case evClosed:
		u.err = ErrClosed
	default:
		return
	}
	close(u.done)
}

// DialUD resolves the UD service at raddr (rdma_connect on a UD ID: a
// SIDR_REQ) and returns its QP number and Q_Key. A refusal is a
// *RejectedError with the SIDR status (errors.Is it ErrUnreachable).
func (d *Dialer) DialUD(ctx context.Context, raddr netip.AddrPort) (*UDPeer, error) {
	c := d.CM
	if c == nil {
		return nil, errors.New("rdmacm: dial UD: the Dialer has no CM")
	}
	if len(d.PrivateData) > cmwire.SIDRReqPrivateLen-cmwire.CMAHeaderLen {
		return nil, fmt.Errorf("rdmacm: dial UD: %d bytes of private data, a SIDR_REQ leaves %d", len(d.PrivateData),
			cmwire.SIDRReqPrivateLen-cmwire.CMAHeaderLen)
	}
	ps := d.PortSpace
	if ps == 0 {
		ps = cmwire.PortSpaceUDP
	}
	dst := netip.AddrPortFrom(raddr.Addr().Unmap(), raddr.Port())
	if !validPeer(dst.Addr()) || dst.Port() == 0 {
		return nil, fmt.Errorf("rdmacm: dial UD %v: not a unicast address and port", raddr)
	}
	if err := c.lock(); err != nil {
		return nil, err
	}
	src, err := c.localAddr(d.Source.Addr())
	var port uint16
	if err == nil {
		port, err = c.bindPort(ps, d.Source.Port())
	}
	if err != nil {
		c.unlock()
		return nil, fmt.Errorf("rdmacm: dial UD %v: %w", raddr, err)
	}
	defer func() {
		if c.lock() == nil {
			c.unbindPort(ps, port)
			c.unlock()
		}
	}()
	u := &udResolve{done: make(chan struct{})}
	id, ok := c.newID(u)
	if !ok {
		c.unlock()
		return nil, fmt.Errorf("rdmacm: dial UD: the CM holds %d connections (Config.MaxIDs)", c.cfg.MaxIDs)
	}
	local := netip.AddrPortFrom(src, port)
	roce := d.RoCEPort
	if roce == 0 {
		roce = rocev2.UDPPort
	}
	path, _ := c.route(local, dst)
	id.peer, id.tid = netip.AddrPortFrom(dst.Addr(), roce), c.formTID(id)
	pd := make([]byte, cmwire.CMAHeaderLen+len(d.PrivateData))
	hdr := cmwire.NewCMAHeader(local, dst)
	hdr.Put(pd)
	copy(pd[cmwire.CMAHeaderLen:], d.PrivateData)
	c.sendSIDRReq(id, &cmwire.SIDRReq{RequestID: id.localID, PKey: cmwire.GSIPKey,
		ServiceID: cmwire.ServiceID(ps, dst.Port()), PrivateData: pd}, convertToMS(c.cfg.CMResponseTimeout))
	c.unlock()

	select {
	case <-u.done:
	case <-ctx.Done():
	}
	if err := c.lock(); err != nil {
		return nil, err
	}
	c.release(id)
	c.unlock()
	select {
	case <-u.done:
	default:
		return nil, ctx.Err()
	}
	if u.err != nil {
		return nil, u.err
	}
	if u.rep.Status != cmwire.SIDRSuccess {
		return nil, &RejectedError{SIDRStatus: u.rep.Status, PrivateData: u.rep.PrivateData}
	}
	return &UDPeer{QPN: u.rep.QPN, QKey: u.rep.QKey, RemoteAddr: dst, PrivateData: u.rep.PrivateData,
		AH: qp.AH{DGID: device.GID(path.RemoteGID), SGIDIndex: c.sgidIndex(path.LocalGID), HopLimit: path.HopLimit,
			TClass: path.TrafficClass, FlowLabel: path.FlowLabel, DestPort: roce}}, nil
}

// AcceptUD answers a SIDR request (rdma_accept on a UD ID): the service is
// QP qpn with Q_Key qkey (0: UDPQKey), and privateData (at most 136
// bytes) goes in the SIDR_REP.
func (r *Request) AcceptUD(qpn, qkey uint32, privateData []byte) error {
	if !r.UD {
		return errors.New("rdmacm: accept UD: not a SIDR request (use Accept)")
	}
	if len(privateData) > cmwire.SIDRRepPrivateLen {
		return fmt.Errorf("rdmacm: accept UD: %d bytes of private data, a SIDR_REP holds %d", len(privateData), cmwire.SIDRRepPrivateLen)
	}
	if qkey == 0 {
		qkey = UDPQKey
	}
	c := r.l.cm
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
	c.sendSIDRRep(id, &cmwire.SIDRRep{Status: cmwire.SIDRSuccess, QPN: qpn & 0xFFFFFF, QKey: qkey, PrivateData: privateData})
	c.maybeFree(id)
	return nil
}

// PeerAH returns the address vector to answer the request's sender with:
// its address from the rdma_cm header, the UDP port its device receives
// on (its QP number comes with its first message: the completion's
// source QP).
func (r *Request) PeerAH() qp.AH {
	c := r.l.cm
	return qp.AH{DGID: device.GIDFromAddr(r.RemoteAddr.Addr()), SGIDIndex: c.sgidIndex(cmwire.GIDFromAddr(r.LocalAddr.Addr())),
		HopLimit: 64, DestPort: r.roce}
}
