package main

import (
	"context"
	"fmt"
	"time"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/qp"
)

// latRecvs is how many receives each side of the ping-pong keeps posted.
const latRecvs = 16

// latSender posts the SENDs of a ping-pong: inline when the message fits,
// and, as perftest does, only every mod'th one signaled, so that the poster
// is not woken for a send completion on every round trip. A completion
// retires the sends before it too; no more than depth are outstanding.
type latSender struct {
	c               *qpConn
	wr              [1]qp.SendWR
	posted, retired uint64
	depth, mod      uint64
}

func newLatSender(c *qpConn, size, depth int) *latSender {
	s := &latSender{c: c, depth: uint64(depth), mod: uint64(max(1, depth/2))}
	s.wr[0] = qp.SendWR{Opcode: qp.WRSend}
	if size <= maxInline {
		s.wr[0].Flags = qp.SendInline
		s.wr[0].Inline = c.buf[:size]
	} else {
		s.wr[0].SGL = []qp.SGE{c.sge(0, size)}
	}
	return s
}

// full reports whether the send queue must be reaped before the next post.
func (s *latSender) full() bool { return s.posted-s.retired >= s.depth }

func (s *latSender) post() error {
	w := &s.wr[0]
	w.WRID = s.posted
	w.Flags &^= qp.SendSignaled
	if (s.posted+1)%s.mod == 0 {
		w.Flags |= qp.SendSignaled
	}
	if _, err := s.c.qp.PostSend(s.wr[:]); err != nil {
		return err
	}
	s.posted++
	return nil
}

// reap handles the completions of a poll: it retires the SENDs done and
// returns how many receives completed, failing on any error completion.
func (s *latSender) reap(wcs []cq.WC) (recvs int, err error) {
	for i := range wcs {
		wc := &wcs[i]
		if !wc.Status.OK() {
			return recvs, wcError(wc)
		}
		if wc.Opcode.IsRecv() {
			recvs++
		} else {
			s.retired = max(s.retired, wc.WRID+1)
		}
	}
	return recvs, nil
}

// runLat is the client side of the SEND latency test (ib_send_lat): send a
// message, wait for the server's reply, repeat; each round trip is one
// sample.
func runLat(ctx context.Context, c *qpConn, sp *testSpec, spin int) (*latStats, error) {
	s := newLatSender(c, sp.Size, sp.TxDepth)
	p := newPoller(c.dev, c.cq, spin)
	recv := []qp.RecvWR{{SGL: []qp.SGE{c.sge(0, sp.Size)}}}
	iters := sp.Iters
	if iters == 0 {
		iters = maxLatSamples
	}
	rtts := make([]time.Duration, 0, min(iters, 1<<16))
	end := time.Now().Add(sp.Duration)
	for i := range iters {
		if sp.Duration > 0 && i > 0 && !time.Now().Before(end) {
			break
		}
		for s.full() { // reclaim send queue slots first
			if err := waitSends(ctx, p, s); err != nil {
				return nil, err
			}
		}
		t0 := time.Now()
		if err := s.post(); err != nil {
			return nil, fmt.Errorf("ping %d: %w", i, err)
		}
		for got := 0; got == 0; {
			wcs, err := p.wait(ctx, nil)
			if err != nil {
				return nil, fmt.Errorf("no reply to ping %d: %w", i, err)
			}
			if got, err = s.reap(wcs); err != nil {
				return nil, err
			}
			if got > 1 {
				return nil, fmt.Errorf("ping %d: %d replies to one message", i, got)
			}
		}
		rtts = append(rtts, time.Since(t0))
		if _, err := c.qp.PostRecv(recv); err != nil {
			return nil, err
		}
	}
	return newLatStats(rtts), nil
}

func waitSends(ctx context.Context, p *poller, s *latSender) error {
	wcs, err := p.wait(ctx, nil)
	if err != nil {
		return err
	}
	n, err := s.reap(wcs)
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%d unexpected receive completions while waiting for sends", n)
	}
	return nil
}

// serveLat is the server side of the latency test: answer every message
// with one of the same size until the client says it is done.
func serveLat(ctx context.Context, c *qpConn, sp *testSpec, stop *stopper, spin int) (int64, error) {
	s := newLatSender(c, sp.Size, sp.TxDepth)
	p := newPoller(c.dev, c.cq, spin)
	recv := []qp.RecvWR{{SGL: []qp.SGE{c.sge(0, sp.Size)}}}
	var echoed int64
	for {
		if stop.stopped() {
			if stop.err != nil {
				return echoed, stop.err
			}
			if echoed >= stop.count {
				return echoed, nil
			}
		}
		wcs, err := p.wait(ctx, stop.wake)
		if err != nil {
			return echoed, fmt.Errorf("after %d replies: %w", echoed, err)
		}
		got, err := s.reap(wcs)
		if err != nil {
			return echoed, err
		}
		for range got {
			if _, err := c.qp.PostRecv(recv); err != nil {
				return echoed, err
			}
			for s.full() {
				wcs, err := p.wait(ctx, nil)
				if err != nil {
					return echoed, err
				}
				if n, err := s.reap(wcs); err != nil {
					return echoed, err
				} else if n > 0 {
					return echoed, fmt.Errorf("the client sent again before the reply (%d receives)", n)
				}
			}
			if err := s.post(); err != nil {
				return echoed, err
			}
			echoed++
		}
	}
}
