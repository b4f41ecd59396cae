package main

import (
	"context"
	"fmt"
	"time"

	"github.com/goroce/goroce/qp"
)

// bwOpcode is the work request a bandwidth test posts.
func bwOpcode(kind string) qp.WROpcode {
	switch kind {
	case kindSend:
		return qp.WRSend
	case kindRead:
		return qp.WRRDMARead
	}
	return qp.WRRDMAWrite
}

// runBW is the client side of a bandwidth test, as ib_write_bw,
// ib_send_bw and ib_read_bw run it: keep TxDepth work requests of Size
// bytes outstanding, every CQModth one signaled (a completion retires
// every request before it too), until Iters are done or Duration has
// passed. The time runs from the first post to the last completion.
func runBW(ctx context.Context, c *qpConn, sp *testSpec, peer *endpoint, spin int) (*bwStats, error) {
	op := bwOpcode(sp.Kind)
	sgl := []qp.SGE{c.sge(0, sp.Size)}
	wrs := make([]qp.SendWR, sp.TxDepth)
	for i := range wrs {
		wrs[i] = qp.SendWR{Opcode: op, SGL: sgl, RemoteAddr: peer.VA, RKey: peer.RKey}
	}
	iters := int64(sp.Iters)
	if iters == 0 {
		iters = maxDurationIters
	}
	mod := int64(sp.CQMod)
	p := newPoller(c.dev, c.cq, spin)

	start := time.Now()
	end := start.Add(sp.Duration)
	rec := newRateRecorder(start)
	var posted, completed int64
	last := int64(-1) // index of the final request, once known
	var lastDone time.Time
	for last < 0 || completed <= last {
		if last < 0 {
			room := int64(sp.TxDepth) - (posted - completed)
			if room > 0 {
				k := min(room, iters-posted)
				if sp.Duration > 0 && !time.Now().Before(end) {
					k = 1 // time is up: one last, signaled request
					last = posted
				} else if posted+k == iters {
					last = iters - 1
				}
				batch := wrs[:k]
				for i := range batch {
					idx := posted + int64(i)
					batch[i].WRID = uint64(idx)
					batch[i].Flags = 0
					if (idx+1)%mod == 0 || idx == last {
						batch[i].Flags = qp.SendSignaled
					}
				}
				if n, err := c.qp.PostSend(batch); err != nil {
					return nil, fmt.Errorf("post send after %d work requests: %w", posted+int64(n), err)
				}
				posted += k
			}
		}
		wcs, err := p.wait(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("%d of %d work requests completed when the test ran out of time: %w", completed, posted, err)
		}
		for i := range wcs {
			wc := &wcs[i]
			if !wc.Status.OK() {
				return nil, wcError(wc)
			}
			completed = max(completed, int64(wc.WRID)+1)
		}
		lastDone = time.Now()
		rec.add(lastDone, completed)
	}
	return newBWStats(completed, sp.Size, lastDone.Sub(start), rec.peak()), nil
}

// serveSendBW is the server side of the SEND bandwidth test: it keeps
// RxDepth receives posted (all into the same buffer, as perftest does) and
// counts completions until it has the number the client reports at the
// end. It returns how many messages arrived.
func serveSendBW(ctx context.Context, c *qpConn, sp *testSpec, stop *stopper, spin int) (int64, error) {
	p := newPoller(c.dev, c.cq, spin)
	wrs := make([]qp.RecvWR, sp.RxDepth)
	sgl := []qp.SGE{c.sge(0, sp.Size)}
	for i := range wrs {
		wrs[i].SGL = sgl
	}
	var got int64
	for {
		if stop.stopped() {
			if stop.err != nil {
				return got, stop.err
			}
			if got >= stop.count {
				return got, nil
			}
		}
		wcs, err := p.wait(ctx, stop.wake)
		if err != nil {
			return got, fmt.Errorf("received %d SENDs when the test ran out of time: %w", got, err)
		}
		for i := range wcs {
			if wc := &wcs[i]; !wc.Status.OK() {
				return got, wcError(wc)
			}
		}
		got += int64(len(wcs))
		if len(wcs) > 0 {
			if _, err := c.qp.PostRecv(wrs[:len(wcs)]); err != nil {
				return got, err
			}
		}
	}
}

// stopper turns the client's done message, read in the background, into a
// channel a poller can wake on and the count the message carries.
type stopper struct {
	wake  chan struct{}
	count int64 // valid once wake is closed
	err   error // valid once wake is closed
}

func newStopper(ch <-chan asyncMsg) *stopper {
	s := &stopper{wake: make(chan struct{})}
	go func() {
		am := <-ch
		if am.err != nil {
			s.err = am.err
		} else {
			s.count = am.m.Count
		}
		close(s.wake)
	}()
	return s
}

// stopped reports whether the done message (or an error) has arrived.
func (s *stopper) stopped() bool {
	select {
	case <-s.wake:
		return true
	default:
		return false
	}
}
