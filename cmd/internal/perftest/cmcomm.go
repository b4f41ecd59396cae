package perftest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rdmacm"
	"github.com/goroce/goroce/rocev2/device"
)

// perftest's channel over the RDMA CM (-z, and -R): an RC connection made
// with rdma_cm on the test's port, one SEND each way per exchange, as
// rdma_write_data and rdma_read_data do; the address records go as the
// binary struct pingpong_dest (rdma_write_keys), not as text.

// cmRecordLen is sizeof(struct pingpong_dest) of perftest 4.5 to 25.x
// (HAVE_ENDIAN: each field big-endian): lid, out_reads, qpn, psn, rkey,
// 4 bytes of padding, vaddr, the GID, srqn, gid_index.
const cmRecordLen = 56

// cmBufLen is what goroce posts to receive a message of the channel: the
// peer's comm buffer (perftest's rdma_ctx buff_size is the cycle buffer,
// a page), so that whatever a peer sends fits.
const cmBufLen = 4096

// Retries of the client's connection of the test's QPs: the server listens
// for them only after the exchange before (rdma_cm_client_connection).
const (
	cmConnectTries = 10
	cmConnectDelay = 100 * time.Millisecond
)

// marshalCM is rdma_write_keys's record.
func (d *dest) marshalCM() []byte {
	b := make([]byte, cmRecordLen)
	binary.BigEndian.PutUint32(b[0:], uint32(d.lid))
	binary.BigEndian.PutUint32(b[4:], uint32(d.outReads))
	binary.BigEndian.PutUint32(b[8:], d.qpn)
	binary.BigEndian.PutUint32(b[12:], d.psn)
	binary.BigEndian.PutUint32(b[16:], d.rkey)
	binary.BigEndian.PutUint64(b[24:], d.vaddr)
	copy(b[32:48], d.gid[:])
	binary.BigEndian.PutUint32(b[48:], d.srqn)
	// gid_index (52): perftest's own, which the peer overwrites with its
	// own before it reads ours; goroce sends 0.
	return b
}

// parseDestCM is rdma_read_keys. The fields are C ints: a value out of
// its wire field's range is refused, as parseDest refuses text that is
// not hex of the field's width.
func parseDestCM(b []byte) (dest, error) {
	if len(b) < cmRecordLen {
		return dest{}, fmt.Errorf("%w: %d bytes, not %d", errRecord, len(b), cmRecordLen)
	}
	u32 := func(off int) uint32 { return binary.BigEndian.Uint32(b[off:]) }
	d := dest{lid: uint16(u32(0)), outReads: int(int32(u32(4))), qpn: u32(8), psn: u32(12), rkey: u32(16),
		vaddr: binary.BigEndian.Uint64(b[24:]), srqn: u32(48)}
	copy(d.gid[:], b[32:48])
	if u32(0) > 0xFFFF || d.qpn > 0xFFFFFF || d.psn > 0xFFFFFF || d.outReads < 0 || d.outReads > 0xFFFF {
		return dest{}, fmt.Errorf("%w: lid %#x qpn %#x psn %#x out_reads %d", errRecord, u32(0), d.qpn, d.psn, d.outReads)
	}
	return d, nil
}

// cmLink is the channel's connection: its own CQs (so that a SEND's
// completion and the peer's next message never wait in one queue) and a
// region of two buffers, the receive's and the send's.
type cmLink struct {
	conn           *rdmacm.Conn
	sendCQ, recvCQ *cq.CQ
	mr             *device.MR
	buf            []byte
	timeout        time.Duration
	wcs            [1]cq.WC
}

// cmChannel makes what a channel's connection needs, before the CM makes
// its QP: perftest's comm rdma_ctx (tx and rx depth 1).
func cmChannel(dev *device.Device, timeout time.Duration) (*cmLink, rdmacm.QPConfig, error) {
	l := &cmLink{timeout: timeout, buf: make([]byte, 2*cmBufLen)}
	pd := dev.AllocPD()
	var err error
	if l.mr, err = pd.RegisterMR(l.buf, device.AccessLocalWrite); err != nil {
		return nil, rdmacm.QPConfig{}, err
	}
	if l.sendCQ, err = cq.New(4, cq.Config{}); err != nil {
		l.mr.Deregister()
		return nil, rdmacm.QPConfig{}, err
	}
	if l.recvCQ, err = cq.New(4, cq.Config{}); err != nil {
		l.sendCQ.Close()
		l.mr.Deregister()
		return nil, rdmacm.QPConfig{}, err
	}
	return l, rdmacm.QPConfig{PD: pd, SendCQ: l.sendCQ, RecvCQ: l.recvCQ,
		Cap: qp.Cap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}, nil
}

// cmParam is what perftest's rdma_server_connect and rdma_client_connect
// ask for the channel, and rdma_cm_route_handler and its server side for
// the test's QPs: responder resources and initiator depth only for READ
// and atomics, -u's retry count (7), RNR retries 7.
func (p *params) cmParam() *rdmacm.ConnParam {
	cp := &rdmacm.ConnParam{RetryCount: 7, RNRRetryCount: 7}
	if p.t.verb == Read || p.t.verb == Atomic {
		cp.ResponderResources, cp.InitiatorDepth = uint8(min(p.outReads, 255)), uint8(min(p.outReads, 255))
	}
	return cp
}

// postRecv is post_one_recv_wqe: the one receive the channel keeps posted.
func (l *cmLink) postRecv(c *rdmacm.Conn) error {
	_, err := c.QP().PostRecv([]qp.RecvWR{{WRID: 1, SGL: []qp.SGE{{Addr: l.mr.VA(), Length: cmBufLen, LKey: l.mr.LKey()}}}})
	return err
}

// wait takes the next completion of ch, bounded by the timeout. A peer
// that goes away moves the QP to ERR, which flushes the one receive (or
// the SEND) waited for: the wait ends with its status.
func (l *cmLink) wait(ch *cq.CQ) (*cq.WC, error) {
	ctx := context.Background()
	if l.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.timeout)
		defer cancel()
	}
	for {
		if ch.Poll(l.wcs[:]) == 1 {
			return &l.wcs[0], nil
		}
		if ch.Arm(false) {
			continue
		}
		select {
		case <-l.conn.Done():
			if ch.Poll(l.wcs[:]) == 1 {
				return &l.wcs[0], nil
			}
			return nil, errors.New("the peer disconnected the rdma_cm channel (did it fail? see its output)")
		default:
		}
		if err := ch.Wait(ctx); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return nil, errStalled
			}
			return nil, err
		}
	}
}

// write is rdma_write_data: one signaled SEND of b, and its completion.
func (l *cmLink) write(b []byte) error {
	if len(b) > cmBufLen {
		return fmt.Errorf("a message of %d bytes does not fit the channel's buffer", len(b))
	}
	copy(l.buf[cmBufLen:], b)
	if _, err := l.conn.QP().PostSend([]qp.SendWR{{WRID: 2, Opcode: qp.WRSend, Flags: qp.SendSignaled,
		SGL: []qp.SGE{{Addr: l.mr.VA() + cmBufLen, Length: uint32(len(b)), LKey: l.mr.LKey()}}}}); err != nil {
		return fmt.Errorf("Function ibv_post_send failed: %w", err)
	}
	wc, err := l.wait(l.sendCQ)
	if err != nil {
		return err
	}
	if wc.Status != cq.Success || wc.Opcode != cq.OpSend {
		return fmt.Errorf(" Bad wc status %d", int(wc.Status))
	}
	return nil
}

// read is rdma_read_data: the next message, of exactly n bytes (perftest
// copies n bytes whatever came; goroce refuses a message of another size,
// whose rest would be stale bytes), and the receive posted again.
func (l *cmLink) read(n int) ([]byte, error) {
	wc, err := l.wait(l.recvCQ)
	if err != nil {
		return nil, err
	}
	if wc.Status != cq.Success || wc.Opcode != cq.OpRecv {
		return nil, fmt.Errorf("Bad wc status -- %d -- %d ", int(wc.Status), wc.WRID)
	}
	if int(wc.ByteLen) != n {
		return nil, fmt.Errorf("the peer sent %d bytes where perftest's exchange has %d", wc.ByteLen, n)
	}
	out := append([]byte(nil), l.buf[:n]...)
	if err := l.postRecv(l.conn); err != nil {
		return nil, fmt.Errorf("Couldn't post send : %w", err)
	}
	return out, nil
}

func (l *cmLink) close() error {
	var err error
	if l.conn != nil {
		err = l.conn.Close()
	}
	l.sendCQ.Close()
	l.recvCQ.Close()
	l.mr.Deregister()
	return err
}

// dialCM is rdma_client_connect for the channel: one connection to the
// server's port, its receive posted before the REQ.
func dialCM(ctx context.Context, cm *rdmacm.CM, p *params, server netip.Addr) (*comm, error) {
	l, qc, err := cmChannel(cm.Device(), p.timeout)
	if err != nil {
		return nil, fmt.Errorf(" Unable to create the resources needed by comm struct: %w", err)
	}
	d := rdmacm.Dialer{CM: cm, RoCEPort: p.udpPort, QP: qc, Param: p.cmParam(), Prepare: l.postRecv}
	conn, err := d.Dial(ctx, netip.AddrPortFrom(server, uint16(p.port)))
	if err != nil {
		l.close()
		return nil, fmt.Errorf("Couldn't connect to %s:%d through rdma_cm: %w\n Unable to perform rdma_client function", server, p.port, err)
	}
	l.conn = conn
	return &comm{cm: l, client: true, timeout: p.timeout}, nil
}

// acceptCM is rdma_server_connect for the channel: one connection on the
// port, whose listener then goes (rdma_destroy_id), so that the test's
// QPs can listen on the port again.
func acceptCM(ctx context.Context, ln *rdmacm.Listener, dev *device.Device, p *params) (*comm, error) {
	defer ln.Close()
	req, err := ln.Accept(ctx)
	if err != nil {
		return nil, fmt.Errorf("rdma_get_cm_events failed: %w\n Unable to perform rdma_server function", err)
	}
	l, qc, err := cmChannel(dev, p.timeout)
	if err != nil {
		req.Reject(nil)
		return nil, fmt.Errorf(" Unable to create the resources needed by comm struct: %w", err)
	}
	conn, err := req.Accept(ctx, rdmacm.AcceptConfig{QP: qc, Param: p.cmParam(), Prepare: l.postRecv})
	if err != nil {
		l.close()
		return nil, fmt.Errorf("Function rdma_accept failed: %w\n Unable to perform rdma_server function", err)
	}
	l.conn = conn
	return &comm{cm: l, timeout: p.timeout}, nil
}

// cmContext is the context of a -R run's CM operations: bounded by
// --timeout when given.
func (p *params) cmContext() (context.Context, context.CancelFunc) {
	if p.timeout > 0 {
		return context.WithTimeout(context.Background(), p.timeout)
	}
	return context.WithCancel(context.Background())
}

// connectCM is create_rdma_cm_connection: a barrier, the test's QPs
// connected through the CM (the server accepts -q connections on the
// test's port, the client makes them, trying again while the server is
// not yet listening), a barrier. The QPs are the connections'; their
// CQs and PD are the context's.
func (s *session) connectCM() error {
	p, c := s.p, s.c
	ctx, cancel := p.cmContext()
	defer cancel()
	qc := rdmacm.QPConfig{PD: c.pd, SendCQ: c.sendCQ, RecvCQ: c.recvCQ,
		Cap: qp.Cap{MaxSendWR: p.txDepth, MaxRecvWR: p.rxDepth, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: max(p.inline, 0)}}
	zero := dest{}
	var ln *rdmacm.Listener
	if !p.isClient() {
		// goroce listens before the barrier, perftest after it: a client
		// that comes at once finds the listener (else it tries again).
		var err error
		ln, err = s.cm.Listen(rdmacm.ListenConfig{Addr: netip.AddrPortFrom(netip.Addr{}, uint16(p.port)), Backlog: p.numQPs})
		if err != nil {
			return fmt.Errorf("Failed to listen on RDMA CM server listen ID: %w\nFailed to create RDMA CM connection.", err)
		}
		defer ln.Close()
	}
	if _, err := s.comm.handshake(&zero); err != nil {
		return fmt.Errorf("%w\nFailed to sync between client and server before creating RDMA CM connection.", err)
	}
	for i := range p.numQPs {
		var conn *rdmacm.Conn
		var err error
		if p.isClient() {
			conn, err = s.dialTestQP(ctx, qc)
		} else {
			var req *rdmacm.Request
			if req, err = ln.Accept(ctx); err == nil {
				conn, err = req.Accept(ctx, rdmacm.AcceptConfig{QP: qc, Param: p.cmParam()})
			}
		}
		if err != nil {
			return fmt.Errorf("RDMA CM connection %d: %w\nFailed to create RDMA CM connection.", i, err)
		}
		c.conns = append(c.conns, conn)
		c.qps = append(c.qps, conn.QP())
	}
	if !p.isClient() {
		// rdma_cm_connection_request_handler: the RNR timer perftest's
		// ctx_connect would set.
		for _, q := range c.qps {
			_ = q.Modify(&qp.Attr{MinRNRTimer: 12}, qp.MaskMinRNRTimer)
		}
	}
	if _, err := s.comm.handshake(&zero); err != nil {
		return fmt.Errorf("%w\nFailed to sync between client and server after creating RDMA CM connection.", err)
	}
	return nil
}

// dialTestQP is one of rdma_cm_client_connection's tries, again while the
// server's CM rejects or does not answer.
func (s *session) dialTestQP(ctx context.Context, qc rdmacm.QPConfig) (*rdmacm.Conn, error) {
	p := s.p
	server := s.serverAddr
	d := rdmacm.Dialer{CM: s.cm, RoCEPort: p.udpPort, QP: qc, Param: p.cmParam()}
	for try := 1; ; try++ {
		conn, err := d.Dial(ctx, netip.AddrPortFrom(server, uint16(p.port)))
		if err == nil {
			return conn, nil
		}
		var rej *rdmacm.RejectedError
		if try == cmConnectTries || ctx.Err() != nil || !errors.As(err, &rej) {
			return nil, fmt.Errorf("%w\nFailed to connect RDMA CM client, tried %d times.", err, try)
		}
		time.Sleep(cmConnectDelay)
	}
}
