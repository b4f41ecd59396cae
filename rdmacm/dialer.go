package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/rdmacm/cmwire"
	"github.com/goroce/goroce/rocev2"
)

// Dialer makes RC connections through a CM (rdma_resolve_addr,
// rdma_resolve_route, rdma_connect).
type Dialer struct {
	CM *CM
	// PortSpace is the rdma_cm port space (0: PortSpaceTCP).
	PortSpace cmwire.PortSpace
	// Source is the local address and port to connect from (zero: the
	// device's address and an ephemeral port), as rping's -I.
	Source netip.AddrPort
	// RoCEPort is the UDP port the peer's device receives on (0: 4791).
	RoCEPort uint16
	// QP says how the connection's QP and CQs are made.
	QP QPConfig
	// Param is what the connection asks for (nil: librdmacm's defaults
	// without parameters: the device's limits, retry counts 7).
	Param *ConnParam
	// Prepare runs once the QP exists (in INIT), before the REQ: post the
	// receives the peer's first SENDs need.
	Prepare func(*Conn) error
	// PrivateData goes in the REQ after the rdma_cm header (at most 56
	// bytes).
	PrivateData []byte
}

// MaxREQPrivateData is how much private data an application may put in a
// REQ: what the rdma_cm header leaves.
const MaxREQPrivateData = cmwire.REQPrivateLen - cmwire.CMAHeaderLen

// Dial connects to the listener at raddr (its address and rdma_cm port).
// It returns once the connection is established: the peer's REP came, the
// QP is in RTS, the RTU is sent. A rejection is a *RejectedError, no
// answer ErrUnreachable wrapping ErrTimeout; a cancelled ctx gives up (a
// REJ with reason timeout tells the peer).
func (d *Dialer) Dial(ctx context.Context, raddr netip.AddrPort) (*Conn, error) {
	c := d.CM
	if c == nil {
		return nil, errors.New("rdmacm: dial: the Dialer has no CM")
	}
	if len(d.PrivateData) > MaxREQPrivateData {
		return nil, fmt.Errorf("rdmacm: dial: %d bytes of private data, a REQ leaves %d after the rdma_cm header", len(d.PrivateData), MaxREQPrivateData)
	}
	ps := d.PortSpace
	if ps == 0 {
		ps = cmwire.PortSpaceTCP
	}
	if ps != cmwire.PortSpaceTCP && ps != cmwire.PortSpaceIB {
		return nil, fmt.Errorf("rdmacm: dial: port space %v makes no RC connections (UD: DialUD)", ps)
	}
	dst := netip.AddrPortFrom(raddr.Addr().Unmap(), raddr.Port())
	if !validPeer(dst.Addr()) || dst.Port() == 0 {
		return nil, fmt.Errorf("rdmacm: dial %v: not a unicast address and port", raddr)
	}
	param := defaultParam()
	if d.Param != nil {
		param = *d.Param
	}
	attr := c.dev.Attr()
	if param.ResponderResources == MaxResources {
		param.ResponderResources = uint8(min(attr.MaxQPRdAtom, 254))
	}
	if param.InitiatorDepth == MaxResources {
		param.InitiatorDepth = uint8(min(attr.MaxQPInitRdAtom, 254))
	}
	if int(param.ResponderResources) > attr.MaxQPRdAtom || int(param.InitiatorDepth) > attr.MaxQPInitRdAtom {
		return nil, fmt.Errorf("rdmacm: dial: responder resources %d / initiator depth %d above the device's %d / %d (EINVAL)",
			param.ResponderResources, param.InitiatorDepth, attr.MaxQPRdAtom, attr.MaxQPInitRdAtom)
	}
	param.RetryCount, param.RNRRetryCount = min(param.RetryCount, 7), min(param.RNRRetryCount, 7)

	// Address resolution: the source is the device's address.
	if err := c.lock(); err != nil {
		return nil, err
	}
	src, err := c.localAddr(d.Source.Addr())
	if err == nil && src.Is4() != dst.Addr().Is4() {
		err = fmt.Errorf("rdmacm: dial %v from %v: address families differ", raddr, src)
	}
	var port uint16
	if err == nil {
		port, err = c.bindPort(ps, d.Source.Port())
	}
	c.unlock()
	if err != nil {
		return nil, fmt.Errorf("rdmacm: dial %v: %w", raddr, err)
	}
	conn := c.newConn(ps)
	conn.local, conn.remote, conn.boundPort = netip.AddrPortFrom(src, port), dst, true
	conn.param = param
	fail := func(err error) (*Conn, error) {
		conn.toError()
		if c.lock() == nil {
			if conn.id != nil {
				c.release(conn.id)
				conn.id = nil
			}
			c.unbindPort(ps, port)
			c.unlock()
		}
		_ = conn.destroy()
		return nil, err
	}
	if err := conn.makeQP(&d.QP, 0); err != nil {
		return fail(err)
	}
	if d.Prepare != nil {
		if err := d.Prepare(conn); err != nil {
			return fail(err)
		}
	}

	if err := c.lock(); err != nil {
		return fail(err)
	}
	id, ok := c.newID(conn)
	if !ok {
		c.unlock()
		return fail(fmt.Errorf("rdmacm: dial: the CM holds %d connections (Config.MaxIDs)", c.cfg.MaxIDs))
	}
	conn.id = id
	path, mtu := c.route(conn.local, dst)
	roce := d.RoCEPort
	if roce == 0 {
		roce = rocev2.UDPPort
	}
	plt := c.cfg.PacketLifeTime
	id.peer = netip.AddrPortFrom(dst.Addr(), roce)
	id.sid, id.tid, id.path = cmwire.ServiceID(ps, dst.Port()), c.formTID(id), path
	id.localQPN, id.rqPSN, id.pathMTU = conn.qp.QPN(), randomPSN(), uint8(mtu)
	id.respRes, id.initDepth, id.retryCount = param.ResponderResources, param.InitiatorDepth, param.RetryCount
	id.avTimeout = plt + 1
	id.timeoutMS = 2*convertToMS(plt) + convertToMS(c.cfg.CMResponseTimeout)
	pd := make([]byte, cmwire.CMAHeaderLen+len(d.PrivateData))
	hdr := cmwire.NewCMAHeader(conn.local, dst)
	hdr.Put(pd)
	copy(pd[cmwire.CMAHeaderLen:], d.PrivateData)
	ch := conn.setup
	id.state = stReqSent
	c.sendREQ(id, &cmwire.REQ{
		LocalCommID: id.localID, ServiceID: id.sid, LocalCAGUID: c.nodeGUID(), LocalQPN: id.localQPN,
		ResponderResources: param.ResponderResources, InitiatorDepth: param.InitiatorDepth,
		RemoteCMResponseTimeout: c.cfg.CMResponseTimeout, TransportType: cmwire.TransportRC,
		FlowControl: param.FlowControl, StartingPSN: id.rqPSN, LocalCMResponseTimeout: c.cfg.CMResponseTimeout,
		RetryCount: param.RetryCount, PKey: cmwire.GSIPKey, PathMTU: uint8(mtu), RNRRetryCount: param.RNRRetryCount,
		MaxCMRetries: c.cfg.MaxCMRetries, Primary: path, PrivateData: pd,
	})
	c.unlock()
	if err := conn.waitSetup(ctx, ch); err != nil {
		return fail(err)
	}
	return conn, nil
}
