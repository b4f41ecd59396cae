package perftest

import (
	"fmt"
	"time"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rdmacm"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
)

// ctx is perftest's pingpong_context: one buffer and region for every QP,
// laid out as perftest lays it out (QP i sends from slot i and is written to
// and read from at slot numQPs+i, each slot BUFF_SIZE long), one send CQ and
// one receive CQ, the QPs, and for UD an address handle per QP.
type ctx struct {
	p        *params
	dev      *device.Device
	pd       *device.PD
	buf      []byte
	mr       *device.MR
	slot     int // BUFF_SIZE(size, cycle_buffer)
	sendCQ   *cq.CQ
	recvCQ   *cq.CQ
	sendPoll *device.Poller
	recvPoll *device.Poller
	qps      []*qp.QP
	conns    []*rdmacm.Conn // -R: the connections the QPs are (connectCM)
	ahs      []*qp.AddressHandle
	curMTU   rocev2.MTU

	// What the runs fill: perftest's tposted and tcompleted, in
	// nanoseconds on the monotonic clock.
	tposted, tcompleted []int64
	epoch               time.Time
	itersDone           int // duration runs: what the sample counted
}

// now is get_cycles: nanoseconds since the run's epoch.
func (c *ctx) now() int64 { return int64(time.Since(c.epoch)) }

func (p *params) isClient() bool { return p.server != "" }

// access is the region's and the QPs' remote rights for the verb.
func (p *params) access() device.Access {
	switch p.t.verb {
	case Write:
		return device.AccessRemoteWrite
	case Read:
		return device.AccessRemoteRead
	case Atomic:
		return device.AccessRemoteAtomic
	}
	return 0
}

// newCtx is alloc_ctx and ctx_init: buffer, PD, region, CQs, QPs in INIT.
func newCtx(p *params, dev *device.Device) (*ctx, error) {
	c := &ctx{p: p, dev: dev, pd: dev.AllocPD(), epoch: time.Now()}
	c.slot = max(p.size, p.cycleBuffer)
	n := 2 * p.numQPs * c.slot
	if p.conn == UD {
		n += p.cacheLineSize
	}
	c.buf = make([]byte, n)
	var err error
	if c.mr, err = c.pd.RegisterMR(c.buf, device.AccessLocalWrite|p.access()); err != nil {
		return nil, fmt.Errorf("Couldn't allocate MR: %w", err)
	}
	tx, rx := p.txDepth*p.numQPs, p.rxDepth*p.numQPs
	if c.sendCQ, err = cq.New(max(tx, 1)+16, cq.Config{}); err != nil {
		return nil, fmt.Errorf("Couldn't create CQ: %w", err)
	}
	c.recvCQ = c.sendCQ
	if p.t.verb == Send {
		if c.recvCQ, err = cq.New(max(rx, 1)+16, cq.Config{}); err != nil {
			return nil, fmt.Errorf("Couldn't create a receiver CQ: %w", err)
		}
	}
	c.sendPoll, c.recvPoll = dev.NewPoller(c.sendCQ), dev.NewPoller(c.recvCQ)
	typ := map[ConnType]qp.Type{RC: qp.RC, UC: qp.UC, UD: qp.UD}[p.conn]
	if p.workCM {
		return c, nil // the CM makes the QPs (connectCM)
	}
	for range p.numQPs {
		q, err := qp.Create(c.pd, qp.InitAttr{
			Type: typ, SendCQ: c.sendCQ, RecvCQ: c.recvCQ,
			Cap: qp.Cap{MaxSendWR: p.txDepth, MaxRecvWR: p.rxDepth, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: max(p.inline, 0)},
		})
		if err != nil {
			return nil, fmt.Errorf(" Unable to create QP: %w", err)
		}
		c.qps = append(c.qps, q)
		attr := qp.Attr{State: qp.Init, Port: uint8(p.ibPort), QKey: defQKey}
		mask := qp.MaskState | qp.MaskPKeyIndex | qp.MaskPort
		if p.conn == UD {
			mask |= qp.MaskQKey
		} else {
			attr.AccessFlags = p.access()
			if p.t.verb == Send {
				attr.AccessFlags = device.AccessRemoteWrite | device.AccessLocalWrite
			}
			mask |= qp.MaskAccessFlags
		}
		if err := q.Modify(&attr, mask); err != nil {
			return nil, fmt.Errorf("Failed to modify QP to INIT: %w", err)
		}
	}
	return c, nil
}

// close destroys what newCtx made (destroy_ctx).
func (c *ctx) close() {
	for _, conn := range c.conns {
		conn.Close() // a DREQ if still connected; the QP destroyed
	}
	if c.conns == nil {
		for _, q := range c.qps {
			q.Destroy()
		}
	}
	c.qps, c.conns = nil, nil
	if c.sendCQ != nil {
		c.sendCQ.Close()
	}
	if c.recvCQ != nil && c.recvCQ != c.sendCQ {
		c.recvCQ.Close()
	}
	if c.mr != nil {
		c.mr.Deregister()
	}
}

// myDests is set_up_connection: each QP's record. The remote side of QP i
// is slot numQPs+i.
func (c *ctx) myDests(gid device.GID) []dest {
	out := make([]dest, len(c.qps))
	for i, q := range c.qps {
		out[i] = dest{
			qpn: q.QPN(), psn: uint32(qp.RandomPSN()), rkey: c.mr.RKey(), outReads: c.p.outReads,
			vaddr: c.mr.VA() + uint64((len(c.qps)+i)*c.slot), gid: gid,
		}
	}
	return out
}

// connect is ctx_connect: every QP to RTR towards its peer (RC and UC with
// the path, RC with max_dest_rd_atomic our outstanding reads), and to RTS
// on a client or in a latency test (RC with max_rd_atomic the peer's);
// for UD an address handle where this side sends.
func (c *ctx) connect(my, rem []dest) error {
	p := c.p
	sends := p.t.kind == Lat || p.isClient()
	for i, q := range c.qps {
		ah := qp.AH{DGID: rem[i].gid, SGIDIndex: uint8(p.gidIndex), HopLimit: 1, DestPort: p.udpPort}
		attr := qp.Attr{State: qp.RTR}
		mask := qp.MaskState
		if p.conn != UD {
			attr.AH, attr.PathMTU, attr.DestQPN, attr.RQPSN = ah, c.curMTU, rem[i].qpn, rocev2.PSN(rem[i].psn)
			mask |= qp.MaskAV | qp.MaskPathMTU | qp.MaskDestQPN | qp.MaskRQPSN
			if p.conn == RC {
				attr.MaxDestRdAtomic = uint8(min(my[i].outReads, device.MaxQPRdAtom))
				attr.MinRNRTimer = 12
				mask |= qp.MaskMaxDestRdAtomic | qp.MaskMinRNRTimer
			}
		}
		if err := q.Modify(&attr, mask); err != nil {
			return fmt.Errorf("Failed to modify QP %d to RTR: %w", q.QPN(), err)
		}
		if sends {
			attr = qp.Attr{State: qp.RTS, SQPSN: rocev2.PSN(my[i].psn)}
			mask = qp.MaskState | qp.MaskSQPSN
			if p.conn == RC {
				attr.Timeout, attr.RetryCnt, attr.RNRRetry = uint8(p.qpTimeout), 7, 7
				attr.MaxRdAtomic = uint8(min(rem[i].outReads, device.MaxQPRdAtom))
				mask |= qp.MaskTimeout | qp.MaskRetryCnt | qp.MaskRNRRetry | qp.MaskMaxQPRdAtomic
			}
			if err := q.Modify(&attr, mask); err != nil {
				return fmt.Errorf("Failed to modify QP to RTS: %w", err)
			}
		}
		if p.conn == UD && sends {
			h, err := qp.CreateAH(c.pd, ah)
			if err != nil {
				return fmt.Errorf("Failed to create AH for UD: %w", err)
			}
			c.ahs = append(c.ahs, h)
		}
	}
	return nil
}

// inc is perftest's INC: a message's step through the cycle buffer, in
// whole cache lines.
func (c *ctx) inc(size int) int {
	cl := c.p.cacheLineSize
	return (size + cl - 1) / cl * cl
}

// recvLen is the receive buffer of a SEND test: the size, and for UD the
// GRH area before it.
func (c *ctx) recvLen() int {
	if c.p.conn == UD {
		return c.p.size + udAddition
	}
	return c.p.size
}

// recvAddr is where QP i's receives land (ctx_set_recv_wqes): its remote
// slot, moved for UD so that the payload after the GRH area stays aligned.
func (c *ctx) recvAddr(i int) uint64 {
	a := c.mr.VA() + uint64((len(c.qps)+i)*c.slot)
	if c.p.conn == UD {
		a += uint64(c.p.cacheLineSize - udAddition)
	}
	return a
}

// postRecvs posts rx_depth receives on every QP (ctx_set_recv_wqes).
func (c *ctx) postRecvs() error {
	for i, q := range c.qps {
		wr := []qp.RecvWR{{WRID: uint64(i), SGL: []qp.SGE{{Addr: c.recvAddr(i), Length: uint32(c.recvLen()), LKey: c.mr.LKey()}}}}
		for j := range c.p.rxDepth {
			if _, err := q.PostRecv(wr); err != nil {
				return fmt.Errorf("Couldn't post recv Qp = %d: counter=%d: %w", i, j, err)
			}
		}
	}
	return nil
}

// sendWR is QP i's work request (ctx_set_send_wqes), signaled.
func (c *ctx) sendWR(i int, rem []dest) qp.SendWR {
	p := c.p
	local := c.mr.VA() + uint64(i*c.slot)
	wr := qp.SendWR{WRID: uint64(i), Flags: qp.SendSignaled, SGL: []qp.SGE{{Addr: local, Length: uint32(p.size), LKey: c.mr.LKey()}}}
	switch p.t.verb {
	case Send:
		wr.Opcode = qp.WRSend
		if p.conn == UD {
			wr.AH, wr.RemoteQPN, wr.RemoteQKey = c.ahs[i], rem[i].qpn, defQKey
		}
	case Write:
		wr.Opcode, wr.RemoteAddr, wr.RKey = qp.WRRDMAWrite, rem[i].vaddr, rem[i].rkey
	case Read:
		wr.Opcode, wr.RemoteAddr, wr.RKey = qp.WRRDMARead, rem[i].vaddr, rem[i].rkey
	case Atomic:
		wr.Opcode, wr.RemoteAddr, wr.RKey = qp.WRAtomicFetchAdd, rem[i].vaddr, rem[i].rkey
		wr.CompareAdd = atomicAddValue
		if p.atomic == CmpAndSwap {
			wr.Opcode, wr.CompareAdd, wr.Swap = qp.WRAtomicCmpAndSwp, 0, atomicSwapVal
		}
	}
	if (p.t.verb == Send || p.t.verb == Write) && p.size <= p.inline {
		wr.Flags |= qp.SendInline
		wr.Inline = c.buf[i*c.slot : i*c.slot+p.size]
	}
	return wr
}
