package perftest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2/device"
)

// errStalled reports that the peer went quiet for longer than -timeout.
var errStalled = errors.New("no progress within -timeout: is the peer still running?")

// Duration runs go through perftest's states: a warm-up margin, the
// sample, a cool-down margin, the end. perftest moves between them on
// SIGALRM; here the loops look at the clock.
type durState uint8

const (
	startState durState = iota
	sampleState
	stopState
	endState
)

// durClock is a duration run's clock. step returns the state, and at the
// start and end of the sample records tposted[0] and tcompleted[0] as
// catch_alarm does.
type durClock struct {
	c       *ctx
	on      bool
	started bool
	start   time.Time
	state   durState
}

func (c *ctx) newDurClock() *durClock {
	return &durClock{c: c, on: c.p.duration > 0}
}

// begin starts the clock (alarm(margin) in perftest).
func (d *durClock) begin() {
	if d.on && !d.started {
		d.started, d.start = true, time.Now()
		d.step()
	}
}

func (d *durClock) step() durState {
	if !d.on || !d.started {
		return d.state
	}
	p := d.c.p
	el := time.Since(d.start)
	for {
		switch d.state {
		case startState:
			if el < p.margin {
				return d.state
			}
			d.state = sampleState
			d.c.tposted[0] = d.c.now()
		case sampleState:
			if el < p.duration-p.margin {
				return d.state
			}
			d.state = stopState
			d.c.tcompleted[0] = d.c.now()
		case stopState:
			if el < p.duration {
				return d.state
			}
			d.state = endState
		default:
			return d.state
		}
	}
}

func (d *durClock) ended() bool    { return d.on && d.step() == endState }
func (d *durClock) sampling() bool { return d.on && d.step() == sampleState }

// spinPolls is how many empty polls a busy-poll loop makes before it sleeps
// a microsecond between polls (see pingpong's busyPoll: with every CPU
// spinning, the Go runtime polls the network only when a goroutine parks).
const spinPolls = 64

// idler paces a busy-poll loop and enforces -timeout: idle is called on
// every empty poll, progress on every useful one.
type idler struct {
	timeout time.Duration
	spins   int
	since   time.Time
}

func (c *ctx) newIdler() *idler { return &idler{timeout: c.p.timeout, since: time.Now()} }

func (i *idler) progress() { i.spins, i.since = 0, time.Now() }

func (i *idler) idle() error {
	if i.spins++; i.spins < spinPolls {
		return nil
	}
	time.Sleep(time.Microsecond)
	if i.timeout > 0 && time.Since(i.since) > i.timeout {
		return errStalled
	}
	return nil
}

// waitEvent is ctx_notify_events: sleep until the CQ has a completion
// (the poller's arm reports one already there), bounded by -timeout.
func (c *ctx) waitEvent(pl *device.Poller) error {
	if pl.Arm(false) {
		return nil
	}
	ctx := context.Background()
	if c.p.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.p.timeout)
		defer cancel()
	}
	if err := pl.CQ().Wait(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return errStalled
		}
		return fmt.Errorf("Couldn't get CQ event: %w", err)
	}
	return nil
}

// sender holds the QPs' work requests as ctx_set_send_wqes sets them up,
// with the addresses the runs advance.
type sender struct {
	c       *ctx
	wrs     [][1]qp.SendWR
	sges    [][1]qp.SGE
	myAddr  []uint64
	remAddr []uint64
}

func (c *ctx) newSender(rem []dest) *sender {
	s := &sender{c: c}
	n := len(c.qps)
	s.wrs, s.sges = make([][1]qp.SendWR, n), make([][1]qp.SGE, n)
	s.myAddr, s.remAddr = make([]uint64, n), make([]uint64, n)
	for i := range n {
		wr := c.sendWR(i, rem)
		s.sges[i][0] = wr.SGL[0]
		wr.SGL = s.sges[i][:]
		s.wrs[i][0] = wr
		s.myAddr[i], s.remAddr[i] = wr.SGL[0].Addr, wr.RemoteAddr
	}
	return s
}

// advance is increase_loc_addr and increase_rem_addr: the next message of
// QP i goes one cache-line-rounded step further through the cycle buffer,
// back to the start every cycle_buffer/step messages, when two fit.
func (s *sender) advance(i, cnt int) {
	c := s.c
	if c.p.size > c.p.cycleBuffer/2 {
		return
	}
	step := c.inc(c.p.size)
	wrap := (cnt+1)%(c.p.cycleBuffer/step) == 0
	s.sges[i][0].Addr += uint64(step)
	if wrap {
		s.sges[i][0].Addr = s.myAddr[i]
	}
	if c.p.t.verb != Send {
		s.wrs[i][0].RemoteAddr += uint64(step)
		if wrap {
			s.wrs[i][0].RemoteAddr = s.remAddr[i]
		}
	}
}

func (s *sender) post(i int) error {
	_, err := s.c.qps[i].PostSend(s.wrs[i][:])
	return err
}

func sendError(wc *cq.WC, scnt, ccnt int) error {
	return fmt.Errorf(" Completion with error at client\n Failed status %d: wr_id %d syndrom 0x%x\n scnt=%d, ccnt=%d",
		wc.Status, int(wc.WRID), 0, scnt, ccnt)
}

func recvError(wc *cq.WC, rcnt int) error {
	return fmt.Errorf(" Completion with error at server\n Failed status %d: wr_id %d syndrom 0x%x\n rcnt=%d",
		wc.Status, int(wc.WRID), 0, rcnt)
}

// runBW is run_iter_bw: every QP keeps up to tx_depth messages in flight,
// asking for a completion only every cq_mod messages (and on the last),
// each completion counting cq_mod. It returns the iterations to report:
// the -n iterations, or those completed in a duration run's sample.
func (c *ctx) runBW(s *sender) (int, error) {
	p := c.p
	nq := len(c.qps)
	scnt, ccnt := make([]int, nq), make([]int, nq)
	for i := range s.wrs {
		s.wrs[i][0].Flags |= qp.SendSignaled
		s.sges[i][0].Addr = s.myAddr[i]
		s.wrs[i][0].RemoteAddr = s.remAddr[i]
		s.sges[i][0].Length = uint32(p.size)
	}
	dur := c.newDurClock()
	dur.begin()
	iters := p.iters
	if dur.on {
		iters = 0
	}
	tot := iters * nq
	totS, totC, sampled := 0, 0, 0
	if !dur.on && p.noPeak {
		c.tposted[0] = c.now()
	}
	wcs := make([]cq.WC, cachePoll)
	idle := c.newIdler()
	for totS < tot || totC < tot || dur.on && !dur.ended() {
		for i := range nq {
			for (scnt[i] < iters || dur.on) && scnt[i]-ccnt[i] < p.txDepth && !dur.ended() {
				wr := &s.wrs[i][0]
				if scnt[i]%p.cqMod == 0 && p.cqMod > 1 && !(!dur.on && scnt[i] == iters-1) {
					wr.Flags &^= qp.SendSignaled
				}
				if !p.noPeak {
					c.tposted[totS] = c.now()
				}
				if err := s.post(i); err != nil {
					return 0, fmt.Errorf("Couldn't post send: qp %d scnt=%d \n%w", i, scnt[i], err)
				}
				scnt[i]++
				totS++
				if scnt[i]%p.cqMod == p.cqMod-1 || !dur.on && scnt[i] == iters-1 {
					wr.Flags |= qp.SendSignaled
				}
				s.advance(i, scnt[i])
			}
		}
		if totC < tot || dur.on && totC < totS {
			if p.events {
				if err := c.waitEvent(c.sendPoll); err != nil {
					return 0, err
				}
			}
			ne := c.sendPoll.Poll(wcs)
			if ne == 0 {
				if err := idle.idle(); err != nil {
					return 0, fmt.Errorf("poll CQ failed: %w", err)
				}
				continue
			}
			idle.progress()
			for k := range wcs[:ne] {
				wc := &wcs[k]
				if wc.Status != cq.Success {
					return 0, sendError(wc, totS, totC)
				}
				i := int(wc.WRID)
				ccnt[i] += p.cqMod
				totC += p.cqMod
				if !p.noPeak {
					if totC > tot {
						c.tcompleted[tot-1] = c.now()
					} else {
						c.tcompleted[totC-1] = c.now()
					}
				}
				if dur.sampling() {
					sampled += p.cqMod
				}
			}
		}
	}
	if !dur.on && p.noPeak {
		c.tcompleted[0] = c.now()
	}
	if dur.on {
		return sampled, nil
	}
	return p.iters, nil
}

// receiver holds the QPs' receive requests as ctx_set_recv_wqes sets them
// up, with the addresses the runs advance.
type receiver struct {
	c     *ctx
	wrs   [][1]qp.RecvWR
	sges  [][1]qp.SGE
	first []uint64
}

func (c *ctx) newReceiver() *receiver {
	r := &receiver{c: c}
	n := len(c.qps)
	r.wrs, r.sges, r.first = make([][1]qp.RecvWR, n), make([][1]qp.SGE, n), make([]uint64, n)
	for i := range n {
		r.first[i] = c.recvAddr(i)
		r.sges[i][0] = qp.SGE{Addr: r.first[i], Length: uint32(c.recvLen()), LKey: c.mr.LKey()}
		r.wrs[i][0] = qp.RecvWR{WRID: uint64(i), SGL: r.sges[i][:]}
	}
	return r
}

// advance is increase_loc_addr on QP i's receive.
func (r *receiver) advance(i, cnt int) {
	c := r.c
	if c.recvLen() > c.p.cycleBuffer/2 {
		return
	}
	r.sges[i][0].Addr += uint64(c.inc(c.p.size))
	if (cnt+1)%(c.p.cycleBuffer/c.inc(c.p.size)) == 0 {
		r.sges[i][0].Addr = r.first[i]
	}
}

func (r *receiver) post(i int) error {
	_, err := r.c.qps[i].PostRecv(r.wrs[i][:])
	return err
}

// postAll is ctx_set_recv_wqes: rx_depth receives on every QP.
func (r *receiver) postAll() error {
	for i := range r.wrs {
		r.sges[i][0].Addr = r.first[i]
		r.sges[i][0].Length = uint32(r.c.recvLen())
		for j := range r.c.p.rxDepth {
			if err := r.post(i); err != nil {
				return fmt.Errorf("Couldn't post recv Qp = %d: counter=%d\n%w", i, j, err)
			}
			r.advance(i, j)
		}
	}
	return nil
}

// runBWServer is run_iter_bw_server: count the receives, reposting while
// more are due; the clock starts at the first one. Like perftest's
// check_alive, a server that gets nothing for two minutes (or -timeout)
// stops and reports what it got.
func (c *ctx) runBWServer(r *receiver, stderr func(string)) (int, error) {
	p := c.p
	nq := len(c.qps)
	rcntQP := make([]int, nq)
	dur := c.newDurClock()
	iters := p.iters
	if dur.on {
		iters = 0
	}
	tot := iters * nq
	rcnt, sampled := 0, 0
	first := true
	wcs := make([]cq.WC, cachePoll)
	stall := 120 * time.Second
	if p.timeout > 0 {
		stall = p.timeout
	}
	idle := &idler{since: time.Now()}
	for rcnt < tot || dur.on && !dur.ended() {
		if p.events {
			if err := c.waitEvent(c.recvPoll); err != nil {
				return 0, err
			}
		}
		ne := c.recvPoll.Poll(wcs)
		if ne == 0 {
			_ = idle.idle()
			if !dur.on && time.Since(idle.since) > stall {
				stderr(fmt.Sprintf(" Did not get Message for %d Seconds, exiting..\n Total Received=%d, Total Iters Required=%d\n", int(stall.Seconds()), rcnt, tot))
				break
			}
			continue
		}
		idle.progress()
		if first {
			first = false
			if dur.on {
				dur.begin()
			} else {
				c.tposted[0] = c.now()
			}
		}
		for k := range wcs[:ne] {
			wc := &wcs[k]
			i := int(wc.WRID)
			if wc.Status != cq.Success {
				return 0, recvError(wc, rcntQP[i])
			}
			rcntQP[i]++
			rcnt++
			if dur.sampling() {
				sampled++
			}
			if dur.on || rcntQP[i]+p.rxDepth <= iters {
				if err := r.post(i); err != nil {
					return 0, fmt.Errorf("Couldn't post recv Qp=%d rcnt=%d\n%w", i, rcntQP[i], err)
				}
				r.advance(i, rcntQP[i]+p.rxDepth)
			}
		}
	}
	if !dur.on {
		c.tcompleted[0] = c.now()
		if rcnt < tot {
			return rcnt / nq, nil
		}
		return p.iters, nil
	}
	return sampled, nil
}

// runLatSend is run_iter_lat_send: a ping-pong of SENDs, the server
// answering each message the client sends; tposted times every send.
func (c *ctx) runLatSend(s *sender, r *receiver) (int, error) {
	p := c.p
	wr := &s.wrs[0][0]
	s.sges[0][0].Length = uint32(p.size)
	wr.Flags = 0
	dur := c.newDurClock()
	dur.begin()
	iters := p.iters
	if dur.on {
		iters = 0
	}
	scnt, rcnt, sampled := 0, 0, 0
	var wc [1]cq.WC
	idle := c.newIdler()
	for scnt < iters || rcnt < iters || dur.on && !dur.ended() {
		if (rcnt < iters || dur.on) && !(scnt < 1 && p.isClient()) {
			if p.events {
				if err := c.waitEvent(c.recvPoll); err != nil {
					return 0, err
				}
			}
			for {
				ne := c.recvPoll.Poll(wc[:])
				if dur.ended() {
					break
				}
				if ne > 0 {
					idle.progress()
					if wc[0].Status != cq.Success {
						return 0, recvError(&wc[0], rcnt)
					}
					rcnt++
					if dur.sampling() {
						sampled++
					}
					if dur.on || rcnt+p.rxDepth <= iters {
						if err := r.post(int(wc[0].WRID)); err != nil {
							return 0, fmt.Errorf("Couldn't post recv: rcnt=%d\n%w", rcnt, err)
						}
					}
					break
				}
				if p.events {
					break
				}
				if err := idle.idle(); err != nil {
					return 0, fmt.Errorf("poll CQ failed: %w", err)
				}
			}
		}
		if scnt < iters || dur.on && !dur.ended() {
			if !dur.on {
				c.tposted[scnt] = c.now()
			}
			scnt++
			signal := scnt%p.cqMod == 0 || !dur.on && scnt == iters
			if signal {
				wr.Flags |= qp.SendSignaled
			}
			if dur.ended() {
				break
			}
			if err := s.post(0); err != nil {
				return 0, fmt.Errorf("Couldn't post send: scnt=%d \n%w", scnt, err)
			}
			if signal {
				if p.events {
					if err := c.waitEvent(c.sendPoll); err != nil {
						return 0, err
					}
				}
				for c.sendPoll.Poll(wc[:]) == 0 {
					if err := idle.idle(); err != nil {
						return 0, fmt.Errorf("poll CQ failed: %w", err)
					}
				}
				idle.progress()
				if wc[0].Status != cq.Success {
					return 0, sendError(&wc[0], scnt, scnt)
				}
				wr.Flags &^= qp.SendSignaled
			}
		}
	}
	if dur.on {
		return sampled, nil
	}
	return p.iters, nil
}

// runLatWrite is run_iter_lat_write: each side RDMA-writes its message
// into the peer's buffer, the last byte the count of messages so far, and
// waits for the peer's to show up in its own buffer before the next (the
// server writes first). The buffer is read and written under the region's
// lock, the device writing it concurrently.
func (c *ctx) runLatWrite(s *sender) (int, error) {
	p := c.p
	s.sges[0][0].Length = uint32(p.size)
	s.wrs[0][0].Flags = qp.SendSignaled
	postBuf := c.mr.VA() + uint64(p.size-1)
	pollBuf := c.mr.VA() + uint64(len(c.qps)*c.slot+p.size-1)
	dur := c.newDurClock()
	dur.begin()
	iters := p.iters
	if dur.on {
		iters = 0
	}
	scnt, ccnt, rcnt, sampled := 0, 0, 0, 0
	var b [1]byte
	var wc [1]cq.WC
	stash := 0 // completions polled while waiting for the peer's byte
	idle := c.newIdler()
	for scnt < iters || ccnt < iters || rcnt < iters || dur.on && !dur.ended() {
		if (rcnt < iters || dur.on) && !(scnt < 1 && !p.isClient()) {
			rcnt++
			for {
				if err := c.mr.ReadSync(pollBuf, b[:]); err != nil {
					return 0, err
				}
				if b[0] == byte(rcnt) || dur.ended() {
					break
				}
				// Let the device receive on this goroutine, as the CQ
				// pollers do; a completion found so is kept for below.
				if stash == 0 && c.sendPoll.Poll(wc[:]) > 0 {
					stash = 1
					continue
				}
				if err := idle.idle(); err != nil {
					return 0, fmt.Errorf("waiting for the peer's write %d: %w", rcnt, err)
				}
			}
			idle.progress()
		}
		if scnt < iters || dur.on {
			if !dur.on {
				c.tposted[scnt] = c.now()
			}
			scnt++
			if err := c.mr.WriteSync(postBuf, []byte{byte(scnt)}); err != nil {
				return 0, err
			}
			if err := s.post(0); err != nil {
				return 0, fmt.Errorf("Couldn't post send: scnt=%d\n%w", scnt, err)
			}
		}
		if dur.ended() {
			break
		}
		if ccnt < iters || dur.on {
			if stash == 0 {
				for c.sendPoll.Poll(wc[:]) == 0 {
					if err := idle.idle(); err != nil {
						return 0, fmt.Errorf("poll CQ failed: %w", err)
					}
				}
			}
			stash = 0
			if wc[0].Status != cq.Success {
				return 0, sendError(&wc[0], scnt, ccnt)
			}
			ccnt++
			if dur.sampling() {
				sampled++
			}
		}
	}
	if dur.on {
		return sampled, nil
	}
	return p.iters, nil
}

// runLatRead is run_iter_lat: one READ (or atomic) at a time, each waited
// for; tposted times every post.
func (c *ctx) runLatRead(s *sender) (int, error) {
	p := c.p
	s.sges[0][0].Length = uint32(p.size)
	s.wrs[0][0].Flags = qp.SendSignaled
	dur := c.newDurClock()
	dur.begin()
	iters := p.iters
	if dur.on {
		iters = 0
	}
	scnt, sampled := 0, 0
	var wc [1]cq.WC
	idle := c.newIdler()
	for scnt < iters || dur.on && !dur.ended() {
		if !dur.on {
			c.tposted[scnt] = c.now()
			scnt++
		}
		if err := s.post(0); err != nil {
			return 0, fmt.Errorf("Couldn't post send: scnt=%d\n%w", scnt, err)
		}
		if dur.ended() {
			break
		}
		if p.events {
			if err := c.waitEvent(c.sendPoll); err != nil {
				return 0, err
			}
		}
		for c.sendPoll.Poll(wc[:]) == 0 {
			if err := idle.idle(); err != nil {
				return 0, fmt.Errorf("poll CQ failed: %w", err)
			}
		}
		idle.progress()
		if wc[0].Status != cq.Success {
			return 0, sendError(&wc[0], scnt, scnt)
		}
		if dur.sampling() {
			sampled++
		}
	}
	if dur.on {
		return sampled, nil
	}
	return p.iters, nil
}

// setSize points every QP's work request at the start of its buffers with
// a message of size bytes.
func (s *sender) setSize(size int) {
	for i := range s.wrs {
		s.sges[i][0].Addr, s.sges[i][0].Length = s.myAddr[i], uint32(size)
		s.wrs[i][0].RemoteAddr = s.remAddr[i]
	}
}
