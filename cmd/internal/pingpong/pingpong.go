package pingpong

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
)

// Work request IDs, as in the originals: pending is a bit set of them.
const (
	recvWRID = 1
	sendWRID = 2
)

// udQKey is the Q_Key of ud_pingpong's QPs and sends.
const udQKey = 0x11111111

// pingpong is struct pingpong_context: the QPs (one, or srq_pingpong's
// -q sharing an SRQ), one CQ for everything, and one buffer that every send
// reads and every receive fills.
type pingpong struct {
	k    *Kind
	dev  *device.Device
	pd   *device.PD
	buf  []byte
	mr   *device.MR
	cq   *cq.CQ
	poll *device.Poller // busy-polls cq, receiving on this goroutine when it is empty
	qps  []*qp.QP
	srq  *qp.SRQ
	ah   *qp.AddressHandle // ud_pingpong's, to the peer
	opts *options

	sendFlags qp.SendFlags
	pending   []int // per QP
	qpIndex   map[uint32]int
	recvWRs   []qp.RecvWR // rx_depth identical receives, posted in slices
	sendWRs   [][1]qp.SendWR
	rem       []dest   // the peer's addresses, once exchanged
	grhErrs   []string // ud_pingpong -c: GRH areas that were wrong
}

// newPingpong is pp_init_ctx: buffer, PD, MR, CQ, SRQ, QPs, and the QPs in
// INIT. The caller has opened the device.
func newPingpong(k *Kind, dev *device.Device, o *options) (*pingpong, error) {
	p := &pingpong{k: k, dev: dev, pd: dev.AllocPD(), opts: o, sendFlags: qp.SendSignaled}
	if k.srq && o.numQP > o.rxDepth {
		return nil, fail(fmt.Sprintf("rx_depth %d is too small for %d QPs -- must have at least one receive per QP.", o.rxDepth, o.numQP), nil)
	}
	if k.srq && o.numQP >= maxQP {
		return nil, fail(fmt.Sprintf("num_qp %d must be less than %d", o.numQP, maxQP), nil)
	}
	if k.typ == qp.UD {
		if mtu := dev.Port().ActiveMTU.Bytes(); o.size > mtu {
			return nil, fail(fmt.Sprintf("Requested size larger than port MTU (%d)", mtu), nil)
		}
	}
	n := o.size + k.grhLen()
	if k.srq {
		// srq_pingpong's QPs send from the buffer their receives fill,
		// concurrently: goroce sends from a second half instead, which
		// puts the same bytes on the wire without a data race.
		n = 2 * o.size
	}
	p.buf = make([]byte, n)
	if !k.srq {
		for i := range p.buf {
			p.buf[i] = 0x7b // the original's memset(buf, 0x7b, size); srq_pingpong's is 0
		}
	}
	if o.odp {
		// Go memory is never pinned, so every region is "on demand" already
		// (-O's implicit one too, and -P's prefetch has nothing to fetch).
		fmt.Fprintln(os.Stderr, "note: -o/-O/-P: goroce memory regions need no pinning; on-demand paging changes nothing")
	}
	if o.ts {
		return nil, fail("The device isn't completion timestamp capable", nil)
	}
	if o.dm {
		return nil, fail("Device doesn't support dm allocation", nil)
	}
	var err error
	if p.mr, err = p.pd.RegisterMR(p.buf, device.AccessLocalWrite); err != nil {
		return nil, fail("Couldn't register MR", err)
	}
	nqp, cqe := 1, o.rxDepth+1
	if k.srq {
		nqp, cqe = o.numQP, o.rxDepth+o.numQP
	}
	if p.cq, err = cq.New(cqe, cq.Config{}); err != nil {
		return nil, fail("Couldn't create CQ", err)
	}
	p.poll = dev.NewPoller(p.cq)
	if k.srq {
		if p.srq, err = qp.CreateSRQ(p.pd, qp.SRQInitAttr{Attr: qp.SRQAttr{MaxWR: o.rxDepth, MaxSGE: 1}}); err != nil {
			return nil, fail("Couldn't create SRQ", err)
		}
	}
	p.qpIndex = make(map[uint32]int, nqp)
	for i := range nqp {
		ia := qp.InitAttr{
			Type: k.typ, SendCQ: p.cq, RecvCQ: p.cq, SRQ: p.srq,
			Cap: qp.Cap{MaxSendWR: 1, MaxRecvWR: o.rxDepth, MaxSendSGE: 1, MaxRecvSGE: 1},
		}
		q, err := qp.Create(p.pd, ia)
		if err != nil {
			if k.srq {
				return nil, fail(fmt.Sprintf("Couldn't create QP[%d]", i), err)
			}
			return nil, fail("Couldn't create QP", err)
		}
		p.qps = append(p.qps, q)
		p.qpIndex[q.QPN()] = i
		// Like the original, send inline whenever the QP's (queried)
		// inline capacity holds the whole message.
		if q.Query().Cap.MaxInlineData >= o.size {
			p.sendFlags |= qp.SendInline
		}
	}
	for i, q := range p.qps {
		attr := qp.Attr{State: qp.Init, PKeyIndex: 0, Port: uint8(o.ibPort), AccessFlags: 0, QKey: udQKey}
		mask := qp.MaskState | qp.MaskPKeyIndex | qp.MaskPort | qp.MaskAccessFlags
		if k.typ == qp.UD {
			mask = qp.MaskState | qp.MaskPKeyIndex | qp.MaskPort | qp.MaskQKey
		}
		if err := q.Modify(&attr, mask); err != nil {
			if k.srq {
				return nil, fail(fmt.Sprintf("Failed to modify QP[%d] to INIT", i), err)
			}
			return nil, fail("Failed to modify QP to INIT", err)
		}
	}
	recv := []qp.SGE{{Addr: p.mr.VA(), Length: uint32(o.size + k.grhLen()), LKey: p.mr.LKey()}}
	p.recvWRs = make([]qp.RecvWR, o.rxDepth)
	for i := range p.recvWRs {
		p.recvWRs[i] = qp.RecvWR{WRID: recvWRID, SGL: recv}
	}
	send := []qp.SGE{{Addr: p.mr.VA() + uint64(p.sendOff()), Length: uint32(o.size), LKey: p.mr.LKey()}}
	p.sendWRs = make([][1]qp.SendWR, nqp)
	for i := range p.sendWRs {
		p.sendWRs[i][0] = qp.SendWR{WRID: sendWRID, Opcode: qp.WRSend, Flags: p.sendFlags, SGL: send}
		if p.sendFlags&qp.SendInline != 0 {
			p.sendWRs[i][0].Inline = p.buf[p.sendOff():]
		}
	}
	p.pending = make([]int, nqp)
	return p, nil
}

// sendOff is where in buf sends read from: past the GRH area for UD, in
// the second half for srq_pingpong.
func (p *pingpong) sendOff() int {
	if p.k.srq {
		return p.opts.size
	}
	return p.k.grhLen()
}

// received is the part of buf receives fill with the payload.
func (p *pingpong) received() []byte {
	return p.buf[p.k.grhLen() : p.k.grhLen()+p.opts.size]
}

// close is pp_close_ctx. Once it has returned, nothing writes buf.
func (p *pingpong) close() {
	for _, q := range p.qps {
		q.Destroy()
	}
	p.qps = nil
	if p.srq != nil {
		p.srq.Destroy()
		p.srq = nil
	}
	if p.cq != nil {
		p.cq.Close()
		p.cq = nil
	}
	if p.mr != nil {
		p.mr.Deregister()
		p.mr = nil
	}
}

// postRecv is pp_post_recv: it posts n receives (to the SRQ for
// srq_pingpong) and returns how many went.
func (p *pingpong) postRecv(n int) int {
	var posted int
	if p.srq != nil {
		posted, _ = p.srq.PostRecv(p.recvWRs[:n])
	} else {
		posted, _ = p.qps[0].PostRecv(p.recvWRs[:n])
	}
	return posted
}

// postSend is pp_post_send: one signaled SEND of the whole buffer (past the
// GRH area) on QP i.
func (p *pingpong) postSend(i int) error {
	_, err := p.qps[i].PostSend(p.sendWRs[i][:])
	return err
}

// connect is pp_connect_ctx: each QP towards its peer, with the original's
// attributes (RTR then RTS; for UD an address handle). A GRH is used only
// if the peer sent a GID (its interface ID is not zero); without one RTR
// (or the AH) fails, since RoCE needs it. srq_pingpong uses the first
// peer's GID for every QP, as the original does.
func (p *pingpong) connect(my, rem []dest) error {
	var ah qp.AH
	if !isZero(rem[0].gid[8:]) {
		ah = qp.AH{
			DGID: rem[0].gid, SGIDIndex: uint8(p.opts.gidIdx), HopLimit: 1,
			DestPort: p.opts.udpPort, // goroce: the peer's port is not in the message
		}
	}
	if p.k.typ == qp.UD {
		q := p.qps[0]
		if err := q.Modify(&qp.Attr{State: qp.RTR}, qp.MaskState); err != nil {
			return fail("Failed to modify QP to RTR", err)
		}
		if err := q.Modify(&qp.Attr{State: qp.RTS, SQPSN: rocev2.PSN(my[0].psn)}, qp.MaskState|qp.MaskSQPSN); err != nil {
			return fail("Failed to modify QP to RTS", err)
		}
		var err error
		if p.ah, err = qp.CreateAH(p.pd, ah); err != nil {
			return fail("Failed to create AH", fmt.Errorf("%w%s", err, p.gidHint(&rem[0])))
		}
		for i := range p.sendWRs {
			p.sendWRs[i][0].AH, p.sendWRs[i][0].RemoteQPN, p.sendWRs[i][0].RemoteQKey = p.ah, rem[0].qpn, udQKey
		}
		return nil
	}
	for i, q := range p.qps {
		which := ""
		if p.k.srq {
			which = fmt.Sprintf("[%d]", i)
		}
		attr := qp.Attr{
			State: qp.RTR, PathMTU: p.opts.mtu, DestQPN: rem[i].qpn, RQPSN: rocev2.PSN(rem[i].psn),
			MaxDestRdAtomic: 1, MinRNRTimer: 12, AH: ah,
		}
		mask := qp.MaskState | qp.MaskAV | qp.MaskPathMTU | qp.MaskDestQPN | qp.MaskRQPSN
		if p.k.typ == qp.RC {
			mask |= qp.MaskMaxDestRdAtomic | qp.MaskMinRNRTimer
		}
		if err := q.Modify(&attr, mask); err != nil {
			return fail("Failed to modify QP"+which+" to RTR", fmt.Errorf("%w%s", err, p.gidHint(&rem[0])))
		}
		attr = qp.Attr{State: qp.RTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: rocev2.PSN(my[i].psn), MaxRdAtomic: 1}
		mask = qp.MaskState | qp.MaskSQPSN
		if p.k.typ == qp.RC {
			mask |= qp.MaskTimeout | qp.MaskRetryCnt | qp.MaskRNRRetry | qp.MaskMaxQPRdAtomic
		}
		if err := q.Modify(&attr, mask); err != nil {
			return fail("Failed to modify QP"+which+" to RTS", err)
		}
	}
	return nil
}

// gidHint explains the usual causes of an RTR failure on RoCE: a side that
// runs without -g sends no GID, so no GRH can be built, and a side that runs
// with -g 0 sends its link-local GID, which is no IP address to send to.
// rem is the peer's address, nil if the exchange failed before it came.
func (p *pingpong) gidHint(rem *dest) string {
	use := "use -g 1 (the RoCEv2 GID of " + p.dev.LocalAddr().Addr().String() + ")"
	switch {
	case p.opts.gidIdx < 0:
		return "\nhint: RoCE needs a GID on both sides: " + use
	case rem != nil && isZero(rem.gid[8:]):
		return "\nhint: the peer sent no GID: run it with -g 1 too"
	case p.opts.gidIdx != 1 || rem != nil && rem.gid[0] == 0xfe && rem.gid[1]&0xc0 == 0x80:
		return "\nhint: GID index 0 is the link-local GID, which goroce cannot send to: " + use + " on both sides"
	}
	return ""
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// counts are the loop's progress: sends and receives completed, receives
// outstanding.
type counts struct{ scnt, rcnt, routs int }

// parseWC is parse_single_wc: count the completion, refill receives when
// only one is left (srq_pingpong: one per QP), and post the QP's next send
// once both its previous send and the receive of the answer are complete.
func (p *pingpong) parseWC(wc *cq.WC, c *counts) error {
	if wc.Status != cq.Success {
		return fail(fmt.Sprintf("Failed status %s (%d) for wr_id %d", wc.Status.Text(), wc.Status, int(wc.WRID)), nil)
	}
	i, ok := p.qpIndex[wc.QPNum]
	if !ok {
		return fail(fmt.Sprintf("Couldn't find QPN %06x", wc.QPNum), nil)
	}
	refill := 1
	if p.k.srq {
		refill = p.opts.numQP
	}
	switch wc.WRID {
	case sendWRID:
		c.scnt++
	case recvWRID:
		if p.opts.chk && p.k.typ == qp.UD {
			// Before our next send: only then may the peer send again
			// into this buffer.
			p.checkGRH()
		}
		c.routs--
		if c.routs <= refill {
			c.routs += p.postRecv(p.opts.rxDepth - c.routs)
			if c.routs < p.opts.rxDepth {
				return fail(fmt.Sprintf("Couldn't post receive (%d)", c.routs), nil)
			}
		}
		c.rcnt++
	default:
		return fail(fmt.Sprintf("Completion for unknown wr_id %d", int(wc.WRID)), nil)
	}
	p.pending[i] &^= int(wc.WRID)
	if c.scnt < p.opts.iters && p.pending[i] == 0 {
		if err := p.postSend(i); err != nil {
			return fail("Couldn't post send", err)
		}
		p.pending[i] = recvWRID | sendWRID
	}
	return nil
}

// checkGRH checks the GRH area of the message just received (ud_pingpong
// -c): the IP header it came in, from the peer's address to ours.
func (p *pingpong) checkGRH() {
	if len(p.grhErrs) >= 8 {
		return
	}
	src, dst, ok := rocev2.GRHSource(p.buf)
	want, local := p.rem[0].gid.Addr(), p.dev.LocalAddr().Addr()
	switch {
	case !ok:
		p.grhErrs = append(p.grhErrs, fmt.Sprintf("invalid GRH: no IPv4 or IPv6 header in % x", p.buf[:rocev2.GRHLen]))
	case src.Unmap() != want.Unmap() || dst.Unmap() != local.Unmap():
		p.grhErrs = append(p.grhErrs, fmt.Sprintf("invalid GRH: from %v to %v, want from %v to %v", src, dst, want, local))
	}
}

// errStalled reports that the peer went quiet for longer than -timeout.
var errStalled = errors.New("no completion within -timeout: is the peer still running?")

// run is the ping-pong loop: with -e it sleeps on CQ events (wait, re-arm,
// poll up to two once; srq_pingpong: up to rx_depth + -q), otherwise it
// polls for them until it gets some. It returns when iters sends and
// receives have completed.
func (p *pingpong) run(c *counts) error {
	wcs := make([]cq.WC, 2)
	if p.k.srq {
		wcs = make([]cq.WC, p.opts.numQP+p.opts.rxDepth)
	}
	idle := time.Now()
	for c.rcnt < p.opts.iters || c.scnt < p.opts.iters {
		var ne int
		if p.opts.events {
			if err := p.waitEvent(); err != nil {
				return fail("Failed to get cq_event", err)
			}
			p.poll.Arm(false) // completions already there are polled just below
			ne = p.poll.Poll(wcs[:])
		} else {
			var err error
			if ne, err = p.busyPoll(wcs[:], idle); err != nil {
				return err
			}
		}
		for i := range wcs[:ne] {
			if err := p.parseWC(&wcs[i], c); err != nil {
				return fmt.Errorf("%w\nparse WC failed %d", err, ne)
			}
		}
		if ne > 0 {
			idle = time.Now()
		}
	}
	return nil
}

// spinPolls is how many empty polls the busy-poll loop makes before it
// starts sleeping a microsecond between polls.
const spinPolls = 64

// busyPoll is the original's busy poll (ibv_poll_cq until it returns something).
// Unlike rxe, whose packet processing preempts a spinning application from
// softirq context, a goroce device is a goroutine woken by the Go runtime's
// network poller, and a goroutine that never blocks keeps the runtime from
// polling the network on its P: with every CPU busy (say, both ends of a
// ping-pong on two CPUs) packets then wait for the runtime's 10 ms backstop
// and an iteration takes milliseconds. So after a short spin poll sleeps a
// microsecond between polls, which parks it just long enough for the runtime
// to run the device. It still never arms the CQ or waits for an event.
func (p *pingpong) busyPoll(wcs []cq.WC, idle time.Time) (int, error) {
	for spins := 0; ; spins++ {
		if ne := p.poll.Poll(wcs); ne > 0 {
			return ne, nil
		}
		if spins < spinPolls {
			continue
		}
		time.Sleep(time.Microsecond)
		if p.opts.timeout > 0 && time.Since(idle) > p.opts.timeout {
			return 0, fail("poll CQ failed", errStalled)
		}
	}
}

// waitEvent is ibv_get_cq_event, bounded by -timeout when one is set.
func (p *pingpong) waitEvent() error {
	ctx := context.Background()
	if p.opts.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.opts.timeout)
		defer cancel()
	}
	if err := p.cq.Wait(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return errStalled
		}
		return err
	}
	return nil
}

// report prints the original's two summary lines. The original keeps the
// elapsed microseconds in a float, so the same float32 arithmetic is used
// here to print the same digits.
func report(w io.Writer, size, iters int, elapsed time.Duration) {
	usec := float32(elapsed.Microseconds())
	bytes := int64(size) * int64(iters) * 2
	fmt.Fprintf(w, "%d bytes in %.2f seconds = %.2f Mbit/sec\n",
		bytes, float64(usec)/1000000., float64(bytes)*8./float64(usec))
	fmt.Fprintf(w, "%d iters in %.2f seconds = %.2f usec/iter\n",
		iters, float64(usec)/1000000., float64(usec/float32(iters)))
}

// fillPattern writes what the client sends with -c. Byte 0 of every page is
// 0, which is all the original writes (buf[i] = i / page_size % sizeof(char))
// and all an rdma-core server checks; goroce fills the other bytes with a
// counter so that a goroce peer can check every byte.
func fillPattern(buf []byte, pageSize int) {
	for i := range buf {
		buf[i] = patternByte(i, pageSize)
	}
}

func patternByte(i, pageSize int) byte {
	if i%pageSize == 0 {
		return 0
	}
	return byte(i%251) + 1 // 251 is prime: a misplaced MTU-sized chunk shows
}

// checkPattern is the -c check of a received buffer. It first does the
// original's check (byte 0 of every page is 0, "invalid data in page N"),
// then checks the other bytes: against goroce's counter if the buffer
// carries it, else against fill, what an rdma-core client's buffer holds
// (0x7b; srq_pingpong's 0). It returns one line per problem, at most a few.
func checkPattern(buf []byte, pageSize int, fill byte) []string {
	var bad []string
	for i := 0; i < len(buf); i += pageSize {
		if buf[i] != 0 {
			bad = append(bad, fmt.Sprintf("invalid data in page %d", i/pageSize))
		}
	}
	goroce := len(buf) > 1 && buf[1] == patternByte(1, pageSize)
	for i := range buf {
		if i%pageSize == 0 {
			continue
		}
		want := fill
		if goroce {
			want = patternByte(i, pageSize)
		}
		if buf[i] != want {
			bad = append(bad, fmt.Sprintf("invalid data at offset %d: got 0x%02x, want 0x%02x", i, buf[i], want))
			if len(bad) >= 8 {
				break
			}
		}
	}
	return bad
}
