package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/qp"
)

// The raw bandwidth baseline needs flow control, or the sender would
// overrun the receiver's socket buffer and measure the kernel's drops. It
// uses goroce's own window: at most rawWindow packets unacknowledged
// (qp.SendWindow), an acknowledgement every rawAckEvery packets
// (RXE_MAX_PKT_PER_ACK). It is not reliable: a packet lost is counted,
// not resent (loopback does not lose packets when the window is respected).
const (
	rawWindow      = qp.SendWindow
	rawAckEvery    = 64
	rawLossTimeout = 50 * time.Millisecond // no acknowledgement for this long: the window is lost
	rawFinTimeout  = 2 * time.Second
)

// Control datagrams: ctlLen bytes, the magic, a type and a value. Data
// packets are longer, so a GRO message's segments tell themselves apart.
const ctlLen = 16

var ctlMagic = [4]byte{'g', 'r', 'a', 'w'}

const (
	ctlAck    = 'A' // receiver → sender: packets received so far
	ctlFin    = 'F' // sender → receiver: done, packets sent
	ctlFinAck = 'R' // receiver → sender: packets received in total
)

func putCtl(b []byte, typ byte, v int64) {
	copy(b, ctlMagic[:])
	b[4] = typ
	clear(b[5:8])
	binary.LittleEndian.PutUint64(b[8:], uint64(v))
}

func parseCtl(b []byte) (typ byte, v int64, ok bool) {
	if len(b) != ctlLen || [4]byte(b[:4]) != ctlMagic {
		return 0, 0, false
	}
	return b[4], int64(binary.LittleEndian.Uint64(b[8:])), true
}

// rawShape returns the datagrams the baseline sends for one message of
// size bytes over a path MTU: as many as goroce's packets (at least one),
// of equal size so that they form GSO messages, together carrying the
// message (rounded up by less than one byte per datagram).
func rawShape(size, mtu int) (seg, perMsg int) {
	perMsg = max(1, (size+mtu-1)/mtu)
	return max(1, (size+perMsg-1)/perMsg), perMsg
}

// rawPackets returns how many datagrams stand for iters messages (0 for a
// run bounded by time).
func rawPackets(iters, perMsg int) int64 { return int64(iters) * int64(perMsg) }

// segments calls fn for each packet of a (possibly GRO-coalesced) message.
func segments(data []byte, seg int, fn func(p []byte)) {
	for off := 0; off < len(data); off += seg {
		fn(data[off:min(off+seg, len(data))])
	}
}

// rawSendBW sends seg-byte datagrams to dst, packets of them or for dur,
// within the window, then asks the receiver how many arrived. The result
// counts delivered payload, in messages of perMsg datagrams, from the
// first send to the receiver's final count.
func rawSendBW(ctx context.Context, s *rawSocket, dst netip.AddrPort, seg, perMsg int, packets int64, dur time.Duration) (*bwStats, error) {
	var acked, final atomic.Int64
	final.Store(-1)
	progress := make(chan struct{}, 1)
	readerDone := make(chan error, 1)
	go func() {
		readerDone <- rawRead(s, func(data []byte, seg int, _ netip.AddrPort) {
			segments(data, seg, func(p []byte) {
				typ, v, ok := parseCtl(p)
				switch {
				case !ok:
				case typ == ctlAck && v > acked.Load():
					acked.Store(v)
				case typ == ctlFinAck:
					final.Store(v)
				default:
					return
				}
				select {
				case progress <- struct{}{}:
				default:
				}
			})
		})
	}()
	stopReader := func() error {
		_ = s.setReadDeadline(time.Now())
		err := <-readerDone
		_ = s.setReadDeadline(time.Time{})
		return err
	}

	if packets == 0 {
		packets = maxDurationIters
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	wait := func(d time.Duration) error {
		timer.Reset(d)
		select {
		case <-progress:
			timer.Stop()
			return nil
		case <-timer.C:
			return os.ErrDeadlineExceeded
		case <-ctx.Done():
			return ctx.Err()
		}
	}

	start := time.Now()
	end := start.Add(dur)
	rec := newRateRecorder(start)
	var sent, lost, lastAck int64
	var err error
	for sent < packets && (dur == 0 || time.Now().Before(end)) {
		if err = ctx.Err(); err != nil {
			break
		}
		if a := acked.Load(); a != lastAck {
			lastAck = a
			rec.add(time.Now(), a)
		}
		inflight := sent - lastAck - lost
		if inflight >= rawWindow {
			if err = wait(rawLossTimeout); errors.Is(err, os.ErrDeadlineExceeded) {
				if acked.Load() == lastAck {
					lost += inflight // the window's packets, or their acks, are gone
				}
				err = nil
			}
			if err != nil {
				break
			}
			continue
		}
		var n int
		n, err = s.sendData(dst, int(min(rawWindow-inflight, packets-sent)), seg)
		sent += int64(n)
		if err != nil {
			break
		}
	}
	// Ask for the final count until it comes.
	finEnd := time.Now().Add(rawFinTimeout)
	for err == nil && final.Load() < 0 {
		if !time.Now().Before(finEnd) {
			err = fmt.Errorf("raw UDP baseline: the receiver at %v did not report its count within %v", dst, rawFinTimeout)
			break
		}
		if err = s.sendCtl(dst, ctlFin, sent); err != nil {
			break
		}
		if err = wait(10 * time.Millisecond); errors.Is(err, os.ErrDeadlineExceeded) {
			err = nil
		}
	}
	done := time.Now()
	if rerr := stopReader(); err == nil {
		err = rerr
	}
	if err != nil {
		return nil, fmt.Errorf("raw UDP bandwidth: %w", err)
	}
	got := final.Load()
	rec.add(done, got)
	st := newBWStats(got, seg, done.Sub(start), rec.peak())
	// Report in messages of the RDMA test's size, so the rows compare.
	st.Packets, st.Lost = sent, sent-got
	st.Msgs = got / int64(perMsg)
	st.MsgRateMpps /= float64(perMsg)
	return st, nil
}

// rawRecvBW is the receiving end: it counts data packets, acknowledges
// every rawAckEvery and answers fins, until its socket's read deadline
// stops it.
func rawRecvBW(s *rawSocket) error {
	var got, acked int64
	var err error
	rerr := rawRead(s, func(data []byte, seg int, src netip.AddrPort) {
		segments(data, seg, func(p []byte) {
			typ, _, ok := parseCtl(p)
			switch {
			case !ok:
				got++
			case typ == ctlFin:
				if e := s.sendCtl(src, ctlFinAck, got); e != nil && err == nil {
					err = e
				}
			}
		})
		if got-acked >= rawAckEvery {
			acked = got
			if e := s.sendCtl(src, ctlAck, got); e != nil && err == nil {
				err = e
			}
		}
	})
	if err == nil {
		err = rerr
	}
	return err
}

// rawRead hands every message to fn until the read deadline passes, which
// is how the caller stops it: that ends it without an error.
func rawRead(s *rawSocket, fn func(data []byte, seg int, src netip.AddrPort)) error {
	for {
		n, err := s.recvBatch()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil
			}
			return fmt.Errorf("raw UDP baseline: recvmmsg: %w", err)
		}
		for i := range n {
			fn(s.msg(i))
		}
	}
}
