package main

import (
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
)

// allAccess lets the peer WRITE, READ and run atomics on a buffer.
const allAccess = device.AccessLocalWrite | device.AccessRemoteWrite | device.AccessRemoteRead | device.AccessRemoteAtomic

// maxInline is the inline data a QP accepts: small SENDs are copied at post,
// as perftest does below its inline threshold.
const maxInline = 256

// maxRdAtomic is the READ/atomic depth both sides allow: the device's
// limit, as perftest sets out_reads (rxe's max_qp_rd_atom is 128 too).
const maxRdAtomic = device.MaxQPRdAtom

// qpConn is one test's RC connection: a QP with one CQ for sends and
// receives, and a registered buffer.
type qpConn struct {
	dev *device.Device
	pd  *device.PD
	cq  *cq.CQ
	qp  *qp.QP
	buf []byte
	mr  *device.MR
	psn rocev2.PSN
	ah  *qp.AddressHandle // UD: to the peer
}

// newQPConn creates the QP (RC, or UD for the UD test) in RESET with a
// buffer of bufLen bytes.
func newQPConn(dev *device.Device, typ qp.Type, bufLen, sendDepth, recvDepth int) (*qpConn, error) {
	c := &qpConn{dev: dev, pd: dev.AllocPD(), buf: make([]byte, max(bufLen, 64)), psn: qp.RandomPSN()}
	var err error
	if c.mr, err = c.pd.RegisterMR(c.buf, allAccess); err != nil {
		return nil, err
	}
	// Every send may be signaled and every receive completes: the CQ must
	// hold both queues, or it overflows and the QP fails.
	if c.cq, err = cq.New(min(sendDepth+recvDepth+16, cq.MaxDepth), cq.Config{}); err != nil {
		return nil, err
	}
	c.qp, err = qp.Create(c.pd, qp.InitAttr{
		Type: typ, SendCQ: c.cq, RecvCQ: c.cq,
		Cap: qp.Cap{MaxSendWR: sendDepth, MaxRecvWR: recvDepth, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: maxInline},
	})
	if err != nil {
		c.cq.Close()
		return nil, err
	}
	return c, nil
}

// endpoint returns this side's record for the peer.
// localEndpoint returns what this side tells its peer for one test: the
// QP's endpoint and, with withRaw, the port of a raw-UDP baseline socket
// opened with the device's GSO/GRO settings (the caller closes it).
func localEndpoint(cfg *config, n *node, c *qpConn, withRaw bool) (*endpoint, *rawSocket, error) {
	ep, err := c.endpoint()
	if err != nil || !withRaw {
		return ep, nil, err
	}
	gso, gro := n.features()
	raw, err := openRaw(netip.AddrPortFrom(cfg.local, 0), gso, gro)
	if err != nil {
		return nil, nil, err
	}
	raw.setSpin(cfg.spinFor(kindLat) > 0) // only the latency baseline reads one at a time
	ep.RawPort = raw.port()
	return ep, raw, nil
}

func (c *qpConn) endpoint() (*endpoint, error) {
	gid, err := c.dev.GID(1)
	if err != nil {
		return nil, err
	}
	return &endpoint{
		QPN: c.qp.QPN(), PSN: uint32(c.psn), GID: gid.Hex(), Port: c.dev.LocalAddr().Port(),
		RKey: c.mr.RKey(), VA: c.mr.VA(), Len: len(c.buf),
	}, nil
}

// connect moves the QP through INIT and RTR to RTS towards the peer, with
// perftest's attributes: min_rnr_timer 12, timeout 14, retry_cnt 7 and
// rnr_retry 7 (retry forever on RNR).
func (c *qpConn) connect(peer *endpoint, mtu rocev2.MTU) error {
	gid, err := parseGID(peer.GID)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if c.qp.Type() == qp.UD {
		return c.connectUD(peer, gid)
	}
	if err := c.qp.Modify(&qp.Attr{State: qp.Init, Port: 1, AccessFlags: allAccess},
		qp.MaskState|qp.MaskPKeyIndex|qp.MaskPort|qp.MaskAccessFlags); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if err := c.qp.Modify(&qp.Attr{
		State: qp.RTR, PathMTU: mtu, DestQPN: peer.QPN, RQPSN: rocev2.PSN(peer.PSN),
		MaxDestRdAtomic: maxRdAtomic, MinRNRTimer: 12,
		AH: qp.AH{DGID: gid, SGIDIndex: 1, HopLimit: 64, DestPort: peer.Port},
	}, qp.MaskState|qp.MaskAV|qp.MaskPathMTU|qp.MaskDestQPN|qp.MaskRQPSN|qp.MaskMaxDestRdAtomic|qp.MaskMinRNRTimer); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if err := c.qp.Modify(&qp.Attr{
		State: qp.RTS, SQPSN: c.psn, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: maxRdAtomic,
	}, qp.MaskState|qp.MaskSQPSN|qp.MaskTimeout|qp.MaskRetryCnt|qp.MaskRNRRetry|qp.MaskMaxQPRdAtomic); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	return nil
}

// connectUD moves a UD QP to RTS with the Q_Key, and makes the address
// handle to the peer.
func (c *qpConn) connectUD(peer *endpoint, gid device.GID) error {
	if err := c.qp.Modify(&qp.Attr{State: qp.Init, Port: 1, QKey: udQKey},
		qp.MaskState|qp.MaskPKeyIndex|qp.MaskPort|qp.MaskQKey); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if err := c.qp.Modify(&qp.Attr{State: qp.RTR}, qp.MaskState); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if err := c.qp.Modify(&qp.Attr{State: qp.RTS, SQPSN: c.psn}, qp.MaskState|qp.MaskSQPSN); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	ah, err := qp.CreateAH(c.pd, qp.AH{DGID: gid, SGIDIndex: 1, HopLimit: 64, DestPort: peer.Port})
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	c.ah = ah
	return nil
}

// sge returns an SGE over buf[off:off+n].
func (c *qpConn) sge(off, n int) qp.SGE {
	return qp.SGE{Addr: c.mr.VA() + uint64(off), Length: uint32(n), LKey: c.mr.LKey()}
}

// postRecvs posts n receives into buf[off:off+size], numbered from wrid.
func (c *qpConn) postRecvs(n, off, size int, wrid uint64) error {
	wrs := make([]qp.RecvWR, n)
	sgl := []qp.SGE{c.sge(off, size)}
	for i := range wrs {
		wrs[i] = qp.RecvWR{WRID: wrid + uint64(i), SGL: sgl}
	}
	_, err := c.qp.PostRecv(wrs)
	return err
}

// close destroys the QP and its CQ and deregisters the buffer.
func (c *qpConn) close() {
	_ = c.qp.Destroy()
	c.cq.Close()
	_ = c.mr.Deregister()
}

// wcError describes an error completion.
func wcError(wc *cq.WC) error {
	return fmt.Errorf("work completion error: %v (opcode %v, wr_id %d, qp %#x)", wc.Status, wc.Opcode, wc.WRID, wc.QPNum)
}

// negotiateMTU picks the path MTU: the one asked for, else the largest
// both ports have active.
func negotiateMTU(asked, local, remote int) (rocev2.MTU, error) {
	m := min(local, remote)
	if asked != 0 {
		if asked > m {
			return 0, fmt.Errorf("-m %d: above the active MTU (%d here, %d at the peer)", asked, local, remote)
		}
		m = asked
	}
	return rocev2.MTUFromBytes(m), nil
}

// mtuOf returns the IB MTU of a size in bytes.
func mtuOf(bytes int) rocev2.MTU { return rocev2.MTUFromBytes(bytes) }
