//go:build linux

package main

// The echo client: -conns connections (one after another, or all at once
// with -parallel), each sending one message per -sizes entry and checking
// its echo byte for byte, then ending as -end says: shut (shutdown(SHUT_WR),
// read the server's EOF, close), close, or abort (the last message's echo
// left unread when it closes).

import (
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/internal/pattern"
)

const (
	chunk = 64 << 10
	// abortUnread is how much of the last echo an aborting client leaves
	// unread: all of a small one, the last 32 KiB of a large one (it must
	// fit the receive buffer, 64 KiB RMB for SMC-R, while the client
	// does not read).
	abortUnread = 32 << 10
)

type clientTotals struct {
	messages atomic.Int64
	bytes    atomic.Int64
}

func runClient(out *lineWriter, o clientOpts) error {
	deadline := time.Now().Add(o.timeout)
	start := time.Now()
	var tot clientTotals
	errs := make([]error, o.conns)
	if o.parallel {
		var wg sync.WaitGroup
		for i := range o.conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = clientConn(out, i, o, deadline, &tot)
			}()
		}
		wg.Wait()
	} else {
		for i := range o.conns {
			if errs[i] = clientConn(out, i, o, deadline, &tot); errs[i] != nil {
				break
			}
		}
	}
	failed := 0
	for i, err := range errs {
		if err != nil {
			failed++
			out.printf("client: conn %d FAILED: %v", i, err)
		}
	}
	secs := time.Since(start).Seconds()
	b := tot.bytes.Load()
	out.printf("client: done conns=%d failed=%d messages=%d bytes=%d secs=%.3f mbits=%.2f",
		o.conns, failed, tot.messages.Load(), b, secs, float64(b)*8/1e6/max(secs, 1e-9))
	if failed > 0 {
		return fmt.Errorf("%d of %d connections failed", failed, o.conns)
	}
	return nil
}

// clientConn runs one connection.
func clientConn(out *lineWriter, i int, o clientOpts, deadline time.Time, tot *clientTotals) error {
	s, err := newSock(o.tcp)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	if err := s.connect(o.addr, deadline); err != nil {
		return err
	}
	out.printf("client: conn %d connected to %s %s", i, o.addr, connMode(s))
	crc := crc32.NewIEEE()
	var off uint64
	for j, size := range o.sizes {
		last := j == len(o.sizes)-1
		unread := 0
		if last && o.end == endAbort {
			unread = min(size, abortUnread)
		}
		var hd *holds
		if i == 0 {
			hd = o.holds
		}
		got, err := echo(s, i, off, size, unread, crc, hd, deadline)
		if err != nil {
			if o.peerAbort && isReset(err) {
				out.printf("client: conn %d message %d (%d bytes): server aborted after %d bytes echoed (%s)", i, j, size, got, ioErr(err))
				return nil
			}
			return fmt.Errorf("message %d (%d bytes): %w", j, size, err)
		}
		if got < size-unread {
			if o.peerAbort {
				out.printf("client: conn %d message %d (%d bytes): server aborted after %d bytes echoed (EOF)", i, j, size, got)
				return nil
			}
			return fmt.Errorf("message %d (%d bytes): the server closed after %d bytes echoed", j, size, got)
		}
		tot.messages.Add(1)
		tot.bytes.Add(int64(got))
		off += uint64(size)
		if unread > 0 {
			q, err := s.waitQueued(unread, deadline)
			if err != nil {
				return fmt.Errorf("message %d (%d bytes): waiting for the last %d bytes of the echo: %d queued: %s", j, size, unread, q, ioErr(err))
			}
			out.printf("client: conn %d message %d (%d bytes) sent, echo of the last %d bytes left unread (%d queued)", i, j, size, unread, q)
			break
		}
		out.printf("client: conn %d message %d (%d bytes) echoed OK", i, j, size)
	}
	if o.peerAbort {
		return errors.New("the server was to abort, but every echo came back")
	}
	out.printf("client: conn %d: %d bytes sent crc32=0x%08x", i, off, crc.Sum32())
	if o.idle > 0 {
		// Nothing to send or read: SMC-R's link keepalive (TEST_LINK)
		// shows in this time.
		out.printf("client: conn %d idle for %v", i, o.idle)
		time.Sleep(o.idle)
	}
	switch o.end {
	case endShut:
		if err := s.shutWrite(); err != nil {
			return err
		}
		var b [1]byte
		n, err := s.read(b[:], deadline)
		if err != nil {
			return fmt.Errorf("after shutdown(SHUT_WR): read: %s", ioErr(err))
		}
		if n != 0 {
			return fmt.Errorf("after shutdown(SHUT_WR): read %d more bytes instead of EOF", n)
		}
		out.printf("client: conn %d shutdown(SHUT_WR), read -> 0 (server EOF)", i)
	}
	closed = true
	if err := s.Close(); err != nil {
		return fmt.Errorf("close: %s", errnoText(err))
	}
	out.printf("client: conn %d closed (%s)", i, o.end)
	return nil
}

// echo sends size bytes of connection conn's stream from off on while
// reading back and checking size-unread of them, the writer stopping at
// hd's points; it returns how many it read (fewer at an early EOF).
func echo(s *sock, conn int, off uint64, size, unread int, crc hash.Hash32, hd *holds, deadline time.Time) (int, error) {
	werr := make(chan error, 1)
	go func() {
		buf := make([]byte, min(size, chunk))
		for done := 0; ; {
			if err := hd.wait(off+uint64(done), deadline); err != nil {
				werr <- err
				return
			}
			if done >= size {
				break
			}
			n := hd.until(off+uint64(done), min(size-done, len(buf)))
			pattern.Fill(buf[:n], conn, off+uint64(done))
			if err := s.writeAll(buf[:n], deadline); err != nil {
				if errors.Is(err, errStopped) {
					werr <- nil // the reader's error says what happened
					return
				}
				werr <- fmt.Errorf("write at byte %d: %w", done, err)
				return
			}
			crc.Write(buf[:n])
			done += n
		}
		werr <- nil
	}()
	want := size - unread
	buf := make([]byte, min(max(want, 1), chunk))
	got := 0
	var rerr error
	for got < want {
		n, err := s.read(buf[:min(want-got, len(buf))], deadline)
		if err != nil {
			rerr = fmt.Errorf("read with %d of %d bytes echoed: %w", got, want, err)
			break
		}
		if n == 0 {
			break // EOF: the caller decides
		}
		if bad := pattern.Check(buf[:n], conn, off+uint64(got)); bad >= 0 {
			want := make([]byte, 1)
			pattern.Fill(want, conn, off+uint64(got+bad))
			rerr = fmt.Errorf("echo differs at byte %d of the message (stream offset %d): got 0x%02x, want 0x%02x", got+bad, off+uint64(got+bad), buf[bad], want[0])
			break
		}
		got += n
	}
	if rerr != nil || got < want {
		s.stopped.Store(true) // the writer need not wait for room any more
	}
	if err := <-werr; err != nil && rerr == nil {
		rerr = err
	}
	s.stopped.Store(false)
	return got, rerr
}
