package main

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
)

// The UD test (-t ud) sends UD SENDs of one packet each (the path MTU by
// default) from the client to the server. UD has no flow control, so that
// a sender that outruns the receiver would measure the receiver's drops:
// the test runs the raw baseline's protocol over UD instead, so that the
// two compare like for like. At most rawWindow messages are unacknowledged;
// the server acknowledges every rawAckEvery with a UD SEND of the count
// (inline, 16 bytes, rawbw.go's control format), and at the end the client
// sends a fin until the server answers with its total. The time runs from
// the first post to that answer. A window that goes unacknowledged for
// rawLossTimeout is counted lost, not resent.

// udQKey is the Q_Key of both QPs (perftest's and ud_pingpong's).
const udQKey = 0x11111111

// udCtlRecvs is how many receives the client keeps posted for the
// server's acknowledgements, each in its own slot of its buffer: more than
// a window's worth (rawWindow/rawAckEvery), so that none is dropped.
const udCtlRecvs = 4 * rawWindow / rawAckEvery

// udRecvDepth is the receives the server keeps posted: -r, but at least
// four windows, so that the receive queue, like the raw baseline's socket
// buffer, holds what the window lets the client send even when a server
// that fell behind for rawLossTimeout has the window counted lost.
func udRecvDepth(sp *testSpec) int { return max(sp.RxDepth, 4*rawWindow) }

// udRecvLen is what a receive of n payload bytes needs: the GRH area first.
func udRecvLen(n int) int { return rocev2.GRHLen + n }

// udPoller polls a CQ like poller, but gives up at a deadline.
type udPoller struct {
	p     *poller
	timer *time.Timer
}

func newUDPoller(c *qpConn, spin int) *udPoller {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &udPoller{p: newPoller(c.dev, c.cq, spin), timer: t}
}

// poll returns the completions available, waiting for one until deadline
// (the zero time: not at all).
func (u *udPoller) poll(ctx context.Context, deadline time.Time) ([]cq.WC, error) {
	p := u.p
	for i := 0; ; i++ {
		if n := p.cq.Poll(p.wcs); n > 0 {
			return p.wcs[:n], nil
		}
		if deadline.IsZero() || !time.Now().Before(deadline) {
			return nil, ctx.Err()
		}
		if i < p.spin {
			if i%64 == 63 {
				runtime.Gosched()
			}
			continue
		}
		if p.cq.Arm(false) {
			continue
		}
		u.timer.Reset(time.Until(deadline))
		select {
		case <-p.cq.CQ().Events():
			u.timer.Stop()
		case <-u.timer.C:
		case <-ctx.Done():
			u.timer.Stop()
			return nil, ctx.Err()
		}
	}
}

// udCtlWR is a signaled, inline UD SEND of a control message to the peer.
func udCtlWR(ah *qp.AddressHandle, peer *endpoint, buf *[ctlLen]byte, typ byte, v int64, wrid uint64) qp.SendWR {
	putCtl(buf[:], typ, v)
	return qp.SendWR{
		WRID: wrid, Opcode: qp.WRSend, Flags: qp.SendSignaled | qp.SendInline, Inline: buf[:],
		AH: ah, RemoteQPN: peer.QPN, RemoteQKey: udQKey,
	}
}

// wrids of the UD test: data sends carry their index; control sends and
// the client's receives are marked.
const (
	udCtlSend = 1 << 62
	udRecv    = 1 << 61
)

// runUD is the client side of the UD test.
func runUD(ctx context.Context, c *qpConn, sp *testSpec, peer *endpoint, spin int) (*bwStats, error) {
	// The acknowledgements land in slots after the data: one per receive.
	ctlOff := sp.Size
	slot := udRecvLen(ctlLen)
	recvs := make([]qp.RecvWR, udCtlRecvs)
	sges := make([][1]qp.SGE, udCtlRecvs)
	for i := range recvs {
		sges[i][0] = c.sge(ctlOff+i*slot, slot)
		recvs[i] = qp.RecvWR{WRID: udRecv | uint64(i), SGL: sges[i][:]}
	}
	if _, err := c.qp.PostRecv(recvs); err != nil {
		return nil, fmt.Errorf("post the acknowledgements' receives: %w", err)
	}
	data := []qp.SGE{c.sge(0, sp.Size)}
	wrs := make([]qp.SendWR, sp.TxDepth)
	for i := range wrs {
		wrs[i] = qp.SendWR{Opcode: qp.WRSend, SGL: data, AH: c.ah, RemoteQPN: peer.QPN, RemoteQKey: udQKey}
	}
	packets := int64(sp.Iters)
	if packets == 0 {
		packets = maxDurationIters
	}
	mod := int64(sp.CQMod)
	up := newUDPoller(c, spin)
	var ctl [ctlLen]byte
	var ctlWR [1]qp.SendWR
	var got [ctlLen]byte

	start := time.Now()
	end := start.Add(sp.Duration)
	rec := newRateRecorder(start)
	var sent, completed, acked, lost int64
	final := int64(-1)
	ctlOut := 0 // control sends in flight
	lastProgress := start
	// handle takes a batch of completions.
	handle := func(wcs []cq.WC) error {
		for i := range wcs {
			wc := &wcs[i]
			if !wc.Status.OK() {
				return wcError(wc)
			}
			switch {
			case wc.WRID&udRecv != 0:
				k := int(wc.WRID &^ udRecv)
				if err := c.mr.ReadSync(sges[k][0].Addr+rocev2.GRHLen, got[:]); err != nil {
					return err
				}
				if typ, v, ok := parseCtl(got[:]); ok && int(wc.ByteLen) == slot {
					switch {
					case typ == ctlAck && v > acked:
						acked = v
						lastProgress = time.Now()
						rec.add(lastProgress, acked)
					case typ == ctlFinAck:
						final = v
					}
				}
				if _, err := c.qp.PostRecv(recvs[k : k+1]); err != nil {
					return err
				}
			case wc.WRID&udCtlSend != 0:
				ctlOut--
			default:
				completed = max(completed, int64(wc.WRID)+1)
			}
		}
		return nil
	}
	for sent < packets && (sp.Duration == 0 || time.Now().Before(end)) {
		inflight := sent - acked - lost
		room := min(rawWindow-inflight, int64(sp.TxDepth)-(sent-completed), packets-sent)
		if room <= 0 {
			// Wait for an acknowledgement or a send completion, and count
			// a window that stays unacknowledged as lost.
			wcs, err := up.poll(ctx, lastProgress.Add(rawLossTimeout))
			if err != nil {
				return nil, fmt.Errorf("%d of %d UD SENDs acknowledged when the test ran out of time: %w", acked, sent, err)
			}
			if err := handle(wcs); err != nil {
				return nil, err
			}
			if len(wcs) == 0 && sent-acked-lost >= rawWindow {
				lost += sent - acked - lost
				lastProgress = time.Now()
			}
			continue
		}
		batch := wrs[:room]
		for i := range batch {
			idx := sent + int64(i)
			batch[i].WRID = uint64(idx)
			batch[i].Flags = 0
			if (idx+1)%mod == 0 || i == len(batch)-1 {
				batch[i].Flags = qp.SendSignaled // the queue must drain even when the window stops short of cq_mod
			}
		}
		if n, err := c.qp.PostSend(batch); err != nil {
			return nil, fmt.Errorf("post send after %d work requests: %w", sent+int64(n), err)
		}
		sent += room
		// Take every completion there is: the acknowledgements' receives
		// must be back before the next ones arrive.
		for {
			wcs, _ := up.poll(ctx, time.Time{})
			if len(wcs) == 0 {
				break
			}
			if err := handle(wcs); err != nil {
				return nil, err
			}
		}
	}
	// Ask for the total until it comes, every 10 ms.
	finEnd := time.Now().Add(rawFinTimeout)
	var finAt time.Time
	for final < 0 {
		now := time.Now()
		if !now.Before(finEnd) {
			return nil, fmt.Errorf("UD: the server did not report its count within %v", rawFinTimeout)
		}
		if ctlOut == 0 && now.Sub(finAt) >= 10*time.Millisecond {
			finAt = now
			ctlWR[0] = udCtlWR(c.ah, peer, &ctl, ctlFin, sent, udCtlSend)
			if _, err := c.qp.PostSend(ctlWR[:]); err != nil {
				return nil, fmt.Errorf("post the fin: %w", err)
			}
			ctlOut++
		}
		wcs, err := up.poll(ctx, finAt.Add(10*time.Millisecond))
		if err != nil {
			return nil, err
		}
		if err := handle(wcs); err != nil {
			return nil, err
		}
	}
	done := time.Now()
	rec.add(done, final)
	st := newBWStats(final, sp.Size, done.Sub(start), rec.peak())
	st.Packets, st.Lost = sent, sent-final
	return st, nil
}

// serveUD is the server side of the UD test: it keeps RxDepth receives
// posted (all into one buffer, as perftest does; fins are told apart by
// their length and content), acknowledges every
// rawAckEvery messages and answers fins, until the client's done message.
// It returns how many data messages arrived.
func serveUD(ctx context.Context, c *qpConn, sp *testSpec, peer *endpoint, stop *stopper, spin int) (int64, error) {
	p := newPoller(c.dev, c.cq, spin)
	// serverTest posted RxDepth receives over the whole buffer before the
	// client could send; each completion is reposted alike.
	wrs := make([]qp.RecvWR, udRecvDepth(sp))
	sgl := []qp.SGE{c.sge(0, len(c.buf))}
	for i := range wrs {
		wrs[i] = qp.RecvWR{WRID: udRecv, SGL: sgl}
	}
	var ctl [ctlLen]byte
	var ctlWR [1]qp.SendWR
	var msg [ctlLen]byte
	var got, acked int64
	ctlOut := 0
	answer := func(typ byte) error {
		if ctlOut >= udCtlRecvs {
			return nil // acknowledgements are cumulative: the next one will do
		}
		ctlWR[0] = udCtlWR(c.ah, peer, &ctl, typ, got, udCtlSend)
		if _, err := c.qp.PostSend(ctlWR[:]); err != nil {
			return err
		}
		ctlOut++
		return nil
	}
	for {
		if stop.stopped() {
			if stop.err != nil {
				return got, stop.err
			}
			return got, nil
		}
		wcs, err := p.wait(ctx, stop.wake)
		if err != nil {
			return got, fmt.Errorf("received %d UD SENDs when the test ran out of time: %w", got, err)
		}
		reposts := 0
		for i := range wcs {
			wc := &wcs[i]
			if !wc.Status.OK() {
				return got, wcError(wc)
			}
			if wc.WRID == udCtlSend {
				ctlOut--
				continue
			}
			reposts++
			if int(wc.ByteLen) == udRecvLen(ctlLen) {
				if err := c.mr.ReadSync(sgl[0].Addr+rocev2.GRHLen, msg[:]); err != nil {
					return got, err
				}
				if typ, _, ok := parseCtl(msg[:]); ok && typ == ctlFin {
					if err := answer(ctlFinAck); err != nil {
						return got, err
					}
					continue
				}
			}
			got++
			if got-acked >= rawAckEvery {
				acked = got
				if err := answer(ctlAck); err != nil {
					return got, err
				}
			}
		}
		if reposts > 0 {
			if _, err := c.qp.PostRecv(wrs[:reposts]); err != nil {
				return got, err
			}
		}
	}
}
