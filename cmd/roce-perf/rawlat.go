package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"
)

const (
	rawPingTimeout = 200 * time.Millisecond
	rawMaxLost     = 100 // pings lost before the baseline gives up
)

// rawPing is the raw latency baseline: a UDP datagram of size bytes to
// the echo at dst and back, iters times or for dur, each round trip one
// sample. The socket waits as goroce's pollers do in the same run: it
// busy-polls (rawSocket.spin) or blocks in the runtime's poller (-e).
func rawPing(ctx context.Context, s *rawSocket, dst netip.AddrPort, size, iters int, dur time.Duration) (*latStats, error) {
	buf := make([]byte, max(size, 8))
	rbuf := make([]byte, 64<<10)
	if iters == 0 {
		iters = maxLatSamples
	}
	rtts := make([]time.Duration, 0, min(iters, 1<<16))
	lost := 0
	end := time.Now().Add(dur)
	defer s.setReadDeadline(time.Time{})
	for i := range iters {
		if dur > 0 && i > 0 && !time.Now().Before(end) {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		binary.LittleEndian.PutUint64(buf, uint64(i))
		t0 := time.Now()
		if err := s.write(buf, dst); err != nil {
			return nil, fmt.Errorf("raw UDP ping %d: %w", i, err)
		}
		_ = s.setReadDeadline(t0.Add(rawPingTimeout))
		for {
			n, _, err := s.read(rbuf)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if lost++; lost > rawMaxLost {
					return nil, fmt.Errorf("raw UDP ping: %d pings to %v unanswered", lost, dst)
				}
				break
			}
			if err != nil {
				return nil, fmt.Errorf("raw UDP ping %d: %w", i, err)
			}
			if n == len(buf) && binary.LittleEndian.Uint64(rbuf) == uint64(i) {
				rtts = append(rtts, time.Since(t0))
				break
			}
			// A late reply to a ping already given up on.
		}
	}
	st := newLatStats(rtts)
	st.Lost = lost
	return st, nil
}

// rawEcho answers every datagram with itself until the read deadline stops
// it.
func rawEcho(s *rawSocket) error {
	buf := make([]byte, 64<<10)
	for {
		n, src, err := s.read(buf)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil
			}
			return fmt.Errorf("raw UDP echo: %w", err)
		}
		if err := s.write(buf[:n], src); err != nil {
			return fmt.Errorf("raw UDP echo: %w", err)
		}
	}
}
