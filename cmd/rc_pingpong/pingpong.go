package main

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

// Work request IDs, as in the original: pending is a bit set of them.
const (
	recvWRID = 1
	sendWRID = 2
)

// pingpong is struct pingpong_context: one RC QP, one CQ for both queues,
// and one buffer that every send reads and every receive fills.
type pingpong struct {
	dev  *device.Device
	pd   *device.PD
	buf  []byte
	mr   *device.MR
	cq   *cq.CQ
	poll *device.Poller // busy-polls cq, receiving on this goroutine when it is empty
	qp   *qp.QP
	opts *options

	sendFlags qp.SendFlags
	pending   int
	recvWRs   []qp.RecvWR // rx_depth identical receives, posted in slices
	sendWR    [1]qp.SendWR
}

// newPingpong is pp_init_ctx: buffer, PD, MR, CQ, QP, and the QP in INIT.
// The caller has opened the device.
func newPingpong(dev *device.Device, o *options) (*pingpong, error) {
	p := &pingpong{dev: dev, pd: dev.AllocPD(), opts: o, sendFlags: qp.SendSignaled}
	p.buf = make([]byte, o.size)
	for i := range p.buf {
		p.buf[i] = 0x7b // the original's memset(buf, 0x7b, size)
	}
	if o.odp {
		// Go memory is never pinned, so every region is "on demand" already.
		fmt.Fprintln(os.Stderr, "note: -o: goroce memory regions need no pinning; on-demand paging changes nothing")
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
	if p.cq, err = cq.New(o.rxDepth+1, cq.Config{}); err != nil {
		return nil, fail("Couldn't create CQ", err)
	}
	p.poll = dev.NewPoller(p.cq)
	p.qp, err = qp.Create(p.pd, qp.InitAttr{
		Type: qp.RC, SendCQ: p.cq, RecvCQ: p.cq,
		Cap: qp.Cap{MaxSendWR: 1, MaxRecvWR: o.rxDepth, MaxSendSGE: 1, MaxRecvSGE: 1},
	})
	if err != nil {
		return nil, fail("Couldn't create QP", err)
	}
	// Like the original, send inline whenever the QP's (queried) inline
	// capacity holds the whole message.
	if p.qp.Query().Cap.MaxInlineData >= o.size {
		p.sendFlags |= qp.SendInline
	}
	err = p.qp.Modify(&qp.Attr{State: qp.Init, PKeyIndex: 0, Port: uint8(o.ibPort), AccessFlags: 0},
		qp.MaskState|qp.MaskPKeyIndex|qp.MaskPort|qp.MaskAccessFlags)
	if err != nil {
		return nil, fail("Failed to modify QP to INIT", err)
	}
	sge := []qp.SGE{{Addr: p.mr.VA(), Length: uint32(o.size), LKey: p.mr.LKey()}}
	p.recvWRs = make([]qp.RecvWR, o.rxDepth)
	for i := range p.recvWRs {
		p.recvWRs[i] = qp.RecvWR{WRID: recvWRID, SGL: sge}
	}
	p.sendWR[0] = qp.SendWR{WRID: sendWRID, Opcode: qp.WRSend, Flags: p.sendFlags, SGL: sge}
	if p.sendFlags&qp.SendInline != 0 {
		p.sendWR[0].Inline = p.buf
	}
	return p, nil
}

// close is pp_close_ctx.
func (p *pingpong) close() {
	if p.qp != nil {
		p.qp.Destroy()
	}
	if p.cq != nil {
		p.cq.Close()
	}
	if p.mr != nil {
		p.mr.Deregister()
	}
}

// postRecv is pp_post_recv: it posts n receives and returns how many went.
func (p *pingpong) postRecv(n int) int {
	posted, _ := p.qp.PostRecv(p.recvWRs[:n])
	return posted
}

// postSend is pp_post_send: one signaled SEND of the whole buffer.
func (p *pingpong) postSend() error {
	_, err := p.qp.PostSend(p.sendWR[:])
	return err
}

// connect is pp_connect_ctx: RTR towards rem, then RTS, with the original's
// attributes. A GRH is used only if the peer sent a GID (its interface ID is
// not zero); without one the RTR transition fails, since RoCE needs it.
func (p *pingpong) connect(myPSN uint32, rem dest) error {
	attr := qp.Attr{
		State: qp.RTR, PathMTU: p.opts.mtu, DestQPN: rem.qpn, RQPSN: rocev2.PSN(rem.psn),
		MaxDestRdAtomic: 1, MinRNRTimer: 12,
	}
	if !isZero(rem.gid[8:]) {
		attr.AH = qp.AH{
			DGID: rem.gid, SGIDIndex: uint8(p.opts.gidIdx), HopLimit: 1,
			DestPort: p.opts.udpPort, // goroce: the peer's port is not in the message
		}
	}
	err := p.qp.Modify(&attr, qp.MaskState|qp.MaskAV|qp.MaskPathMTU|qp.MaskDestQPN|
		qp.MaskRQPSN|qp.MaskMaxDestRdAtomic|qp.MaskMinRNRTimer)
	if err != nil {
		return fail("Failed to modify QP to RTR", fmt.Errorf("%w%s", err, p.gidHint(&rem)))
	}
	attr = qp.Attr{State: qp.RTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: rocev2.PSN(myPSN), MaxRdAtomic: 1}
	err = p.qp.Modify(&attr, qp.MaskState|qp.MaskTimeout|qp.MaskRetryCnt|qp.MaskRNRRetry|
		qp.MaskSQPSN|qp.MaskMaxQPRdAtomic)
	if err != nil {
		return fail("Failed to modify QP to RTS", err)
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
// only one is left, and post the next send once both the previous send and
// the receive of the answer are complete.
func (p *pingpong) parseWC(wc *cq.WC, c *counts) error {
	if wc.Status != cq.Success {
		return fail(fmt.Sprintf("Failed status %s (%d) for wr_id %d", wc.Status, wc.Status, int(wc.WRID)), nil)
	}
	switch wc.WRID {
	case sendWRID:
		c.scnt++
	case recvWRID:
		c.routs--
		if c.routs <= 1 {
			c.routs += p.postRecv(p.opts.rxDepth - c.routs)
			if c.routs < p.opts.rxDepth {
				return fail(fmt.Sprintf("Couldn't post receive (%d)", c.routs), nil)
			}
		}
		c.rcnt++
	default:
		return fail(fmt.Sprintf("Completion for unknown wr_id %d", int(wc.WRID)), nil)
	}
	p.pending &^= int(wc.WRID)
	if c.scnt < p.opts.iters && p.pending == 0 {
		if err := p.postSend(); err != nil {
			return fail("Couldn't post send", err)
		}
		p.pending = recvWRID | sendWRID
	}
	return nil
}

// errStalled reports that the peer went quiet for longer than -timeout.
var errStalled = errors.New("no completion within -timeout: is the peer still running?")

// run is the ping-pong loop: with -e it sleeps on CQ events (wait, re-arm,
// poll up to two once), otherwise it polls for up to two completions until
// it gets some. It returns when iters sends and receives have completed.
func (p *pingpong) run(c *counts) error {
	var wcs [2]cq.WC
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
// carries it, else against the 0x7b fill an rdma-core client sends. It
// returns one line per problem, at most a few.
func checkPattern(buf []byte, pageSize int) []string {
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
		want := byte(0x7b)
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
