package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/goroce/goroce/cmd/internal/cmtool"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rdmacm"
	"github.com/goroce/goroce/rocev2/device"
)

// The states of rping.c, which its messages print by number.
const (
	stIdle = iota + 1
	stConnectRequest
	stAddrResolved
	stRouteResolved
	stConnected
	stRDMAReadAdv
	stRDMAReadComplete
	stRDMAWriteAdv
	stRDMAWriteComplete
	stDisconnected
	stError
)

// sqDepth is RPING_SQ_DEPTH.
const sqDepth = 16

// out serializes the output of a persistent server's connections.
type out struct {
	mu             sync.Mutex
	stdout, stderr io.Writer
}

func (o *out) print(w io.Writer, format string, args ...any) {
	o.mu.Lock()
	fmt.Fprintf(w, format, args...)
	o.mu.Unlock()
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parse(args, stdout, stderr)
	if err != nil {
		return exitUsage
	}
	o := &out{stdout: stdout, stderr: stderr}
	devAddr := cfg.addr
	if !cfg.server {
		devAddr = cfg.source
		if !devAddr.IsValid() && cfg.addr.IsValid() {
			if devAddr, err = cmtool.RouteSource(cfg.addr); err != nil {
				o.print(stderr, "rdma_resolve_addr: %v\n", err)
				return exitFail
			}
		}
	}
	st, err := cfg.goroce.Open(devAddr)
	if err != nil {
		o.print(stderr, "rping: %v\n", err)
		return exitFail
	}
	defer st.Close(&cfg.goroce, stderr)
	if cfg.goroce.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.goroce.Timeout)
		defer cancel()
	}
	if cfg.server {
		return runServer(ctx, cfg, st, o)
	}
	return runClient(ctx, cfg, st, o)
}

// cb is rping's control block for one connection: its buffers and
// state.
type cb struct {
	cfg   *config
	o     *out
	conn  *rdmacm.Conn
	state int

	recvBuf, sendBuf []byte // struct rping_rdma_info: buf, rkey, size
	rdmaBuf          []byte // the sink of the ping (and the server's READ target)
	startBuf         []byte // the client's ping source
	recvMR, sendMR   *device.MR
	rdmaMR, startMR  *device.MR

	remoteRKey uint32
	remoteAddr uint64
	remoteLen  uint32
	wcs        []cq.WC
	ctx        context.Context
	live       context.Context // ctx, and cancelled when the connection ends (waitCtx)
}

const infoLen = 16

// setup registers the buffers (rping_setup_buffers) and posts the first
// receive, once the QP exists.
func (b *cb) setup(c *rdmacm.Conn) error {
	b.conn = c
	pd := c.PD()
	var err error
	b.recvBuf, b.sendBuf = make([]byte, infoLen), make([]byte, infoLen)
	if b.recvMR, err = pd.RegisterMR(b.recvBuf, device.AccessLocalWrite); err != nil {
		return err
	}
	if b.sendMR, err = pd.RegisterMR(b.sendBuf, 0); err != nil {
		return err
	}
	all := device.AccessLocalWrite | device.AccessRemoteRead | device.AccessRemoteWrite
	b.rdmaBuf = make([]byte, b.cfg.size)
	if b.rdmaMR, err = pd.RegisterMR(b.rdmaBuf, all); err != nil {
		return err
	}
	if !b.cfg.server {
		b.startBuf = make([]byte, b.cfg.size)
		if b.startMR, err = pd.RegisterMR(b.startBuf, all); err != nil {
			return err
		}
	}
	return b.postRecv()
}

func (b *cb) postRecv() error {
	_, err := b.conn.QP().PostRecv([]qp.RecvWR{{SGL: []qp.SGE{{Addr: b.recvMR.VA(), Length: infoLen, LKey: b.recvMR.LKey()}}}})
	return err
}

// qpConfig is rping_create_qp's QP: 16 sends, 2 receives, one CQ of 32.
var qpConfig = rdmacm.QPConfig{Cap: qp.Cap{MaxSendWR: sqDepth, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}}

// connParam is rping_init_conn_param's.
var connParam = rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}

func (b *cb) debugf(format string, args ...any) {
	if b.cfg.debug {
		b.o.print(b.o.stdout, format, args...)
	}
}

// postSend sends the info message (rping's sq_wr).
func (b *cb) postSend() error {
	_, err := b.conn.QP().PostSend([]qp.SendWR{{Opcode: qp.WRSend, Flags: qp.SendSignaled,
		SGL: []qp.SGE{{Addr: b.sendMR.VA(), Length: infoLen, LKey: b.sendMR.LKey()}}}})
	if err != nil {
		b.o.print(b.o.stderr, "post send error %d\n", -22)
	}
	return err
}

// postRDMA posts the READ or WRITE of the ping (rping's rdma_sq_wr).
func (b *cb) postRDMA(op qp.WROpcode, length uint32) error {
	_, err := b.conn.QP().PostSend([]qp.SendWR{{Opcode: op, Flags: qp.SendSignaled,
		SGL:        []qp.SGE{{Addr: b.rdmaMR.VA(), Length: length, LKey: b.rdmaMR.LKey()}},
		RemoteAddr: b.remoteAddr, RKey: b.remoteRKey}})
	if err != nil {
		b.o.print(b.o.stderr, "post send error %d\n", -22)
	}
	return err
}

// formatSend writes the address, rkey and size of buf into the send buffer
// (rping_format_send).
func (b *cb) formatSend(mr *device.MR) {
	binary.BigEndian.PutUint64(b.sendBuf[0:], mr.VA())
	binary.BigEndian.PutUint32(b.sendBuf[8:], mr.RKey())
	binary.BigEndian.PutUint32(b.sendBuf[12:], uint32(b.cfg.size))
	b.debugf("RDMA addr %x rkey %x len %d\n", mr.VA(), mr.RKey(), b.cfg.size)
}

// wait is sem_wait: it handles completions as rping's CQ thread does until
// one of them (a receive, a READ or WRITE, an error) or the end of the
// connection moves the state on.
func (b *cb) wait() {
	cqu := b.conn.RecvCQ()
	for {
		n := cqu.Poll(b.wcs)
		if n == 0 {
			select {
			case <-b.conn.Done():
				if cqu.Poll(b.wcs[:1]) == 0 { // nothing left behind the end
					b.disconnected()
					return
				}
				n = 1
			default:
				if cqu.Arm(false) {
					continue
				}
				if err := cqu.Wait(b.waitCtx()); err != nil {
					select {
					case <-b.conn.Done():
						continue
					default:
					}
					b.state = stError
					return
				}
				continue
			}
		}
		posted := false
		for _, wc := range b.wcs[:n] {
			if b.handle(&wc) {
				posted = true
			}
		}
		if posted {
			return
		}
	}
}

// waitCtx is what a wait for a completion waits with: the run's context,
// cancelled too when the connection ends, since the end may come after
// the wait looked at Done and the flushes it causes were polled (a QP
// moved to ERR by the peer's DREQ flushes before the CM says so), with
// nothing left to complete.
func (b *cb) waitCtx() context.Context {
	if b.live == nil {
		ctx, cancel := context.WithCancel(b.ctx)
		done := b.conn.Done()
		go func() {
			select {
			case <-done:
			case <-ctx.Done():
			}
			cancel()
		}()
		b.live = ctx
	}
	return b.live
}

// disconnected is rping's DISCONNECTED event.
func (b *cb) disconnected() {
	side := "client"
	if b.cfg.server {
		side = "server"
	}
	b.o.print(b.o.stderr, "%s DISCONNECT EVENT...\n", side)
	b.state = stDisconnected
}

// handle is rping_cq_event_handler for one completion; it reports whether
// the main loop's semaphore would be posted.
func (b *cb) handle(wc *cq.WC) bool {
	if wc.Status != cq.Success {
		if wc.Status == cq.WRFlushErr {
			return false // the QP went to ERR: the CM's event follows
		}
		b.o.print(b.o.stderr, "cq completion failed status %d\n", int(wc.Status))
		b.state = stError
		return true
	}
	switch wc.Opcode {
	case cq.OpSend:
		b.debugf("send completion\n")
		return false
	case cq.OpRDMAWrite:
		b.debugf("rdma write completion\n")
		b.state = stRDMAWriteComplete
	case cq.OpRDMARead:
		b.debugf("rdma read completion\n")
		b.state = stRDMAReadComplete
	case cq.OpRecv:
		b.debugf("recv completion\n")
		if wc.ByteLen != infoLen {
			b.o.print(b.o.stderr, "Received bogus data, size %d\n", wc.ByteLen)
			b.o.print(b.o.stderr, "recv wc error: %d\n", -1)
			b.state = stError
			return true
		}
		if b.cfg.server {
			b.remoteAddr = binary.BigEndian.Uint64(b.recvBuf[0:])
			b.remoteRKey = binary.BigEndian.Uint32(b.recvBuf[8:])
			b.remoteLen = binary.BigEndian.Uint32(b.recvBuf[12:])
			b.debugf("Received rkey %x addr %x len %d from peer\n", b.remoteRKey, b.remoteAddr, b.remoteLen)
			if b.state <= stConnected || b.state == stRDMAWriteComplete {
				b.state = stRDMAReadAdv
			} else {
				b.state = stRDMAWriteAdv
			}
		} else if b.state == stRDMAReadAdv {
			b.state = stRDMAWriteAdv
		} else {
			b.state = stRDMAWriteComplete
		}
		if err := b.postRecv(); err != nil {
			b.o.print(b.o.stderr, "post recv error: %d\n", -22)
			b.state = stError
		}
	default:
		b.debugf("unknown!!!!! completion\n")
		b.state = stError
	}
	return true
}

// cString is the NUL-terminated string at the start of b.
func cString(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

// cmaError prints a failed connection as rping's CM event handler does;
// rping then exits at once with status 255 (exit(-1) from its CM thread).
func cmaError(o *out, err error) int {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		o.print(o.stderr, "rping: %v\n", err)
		return exitFail
	}
	name, status := cmtool.EventName(err)
	o.print(o.stderr, "cma event %s, error %d\n", name, status)
	o.print(o.stderr, "rping: %v\n", err)
	return exitFail
}

func newCB(ctx context.Context, cfg *config, o *out) *cb {
	return &cb{cfg: cfg, o: o, state: stIdle, wcs: make([]cq.WC, 2*sqDepth), ctx: ctx}
}
