package main

// -pattern: smcat as an echo checker. Each of -P connections, all from one
// device and so in one link group, sends its own generated stream and
// compares what the peer sends back, byte for byte at its offset; a line
// per connection on stdout says how it went.

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/goroce/goroce/internal/pattern"
	"github.com/goroce/goroce/smcr"
)

// patternChunk is how much each write and read moves.
const patternChunk = 64 << 10

// dialPattern runs o.parallel pattern connections at once and returns the
// worst exit status.
func dialPattern(ctx context.Context, o *options, cfg *smcr.Config, stdout io.Writer, log *logger) int {
	d := smcr.Dialer{Config: *cfg, LocalAddr: o.src, Timeout: o.timeout}
	out := &lockedWriter{w: stdout}
	codes := make([]int, o.parallel)
	var wg sync.WaitGroup
	for i := range o.parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = patternConn(ctx, &d, i, o, out, log)
		}()
	}
	wg.Wait()
	code := exitOK
	for _, c := range codes {
		code = max(code, c)
	}
	return code
}

// patternResult is one pattern connection's outcome.
type patternResult struct {
	result
	checked  int64 // echoed bytes that matched the stream
	mismatch int64 // offset of the first byte that did not; -1: none
}

// patternConn dials connection i, sends o.pattern bytes of stream i, checks
// the echo, ends the connection as o.end says, and prints its line.
func patternConn(ctx context.Context, d *smcr.Dialer, i int, o *options, out io.Writer, log *logger) int {
	target := net.JoinHostPort(o.addr, o.port)
	nc, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		if msg := setupError(err, log); msg != "" {
			log.Errorf("%s", msg)
			return exitSetup
		}
		fmt.Fprintf(out, "conn %d: connect to %s: %s\n", i, target, dialError(err, o, log))
		return exitConn
	}
	c := nc.(*smcr.Conn)
	log.Lines(describe(c, fmt.Sprintf("conn %d: connected to %s from %s", i, c.RemoteAddr(), c.LocalAddr())))
	r := runPattern(ctx, c, i, o)
	fmt.Fprintf(out, "conn %d: %d bytes sent, %d echoed and checked", i, r.sent, r.checked)
	switch {
	case r.mismatch >= 0:
		fmt.Fprintf(out, ", the echo differs at byte %d\n", r.mismatch)
		return exitConn
	case r.reset && o.peerAbort:
		fmt.Fprintf(out, ", the peer aborted as expected\n")
	case r.err != nil:
		fmt.Fprintf(out, ": %v\n", r.err)
		return exitConn
	case r.checked != r.sent && o.end != endAbort:
		fmt.Fprintf(out, ": the echo ended short\n")
		return exitConn
	default:
		fmt.Fprintf(out, ", ended (%s)\n", o.end)
	}
	return exitOK
}

// runPattern is one connection's send, check and end.
func runPattern(ctx context.Context, c *smcr.Conn, i int, o *options) patternResult {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	defer c.Close()
	r := patternResult{result: result{ended: o.end}, mismatch: -1}
	total := o.pattern
	sendErr := make(chan error, 1)
	go func() { // the sender
		buf := make([]byte, patternChunk)
		var off int64
		for off < total {
			n := int(min(int64(len(buf)), total-off))
			pattern.Fill(buf[:n], i, uint64(off))
			m, err := c.Write(buf[:n])
			off += int64(m)
			if err != nil {
				r.sent = off
				sendErr <- fmt.Errorf("send: %w", err)
				return
			}
		}
		r.sent = off
		switch o.end {
		case endShut:
			sendErr <- c.CloseWrite()
		case endAbort:
			sendErr <- c.Close() // the echo is unread: an abort
		default:
			sendErr <- nil // close once the echo is back
		}
	}()
	buf := make([]byte, patternChunk)
	var recvErr error
	for recvErr == nil && r.mismatch < 0 {
		if o.end == endClose && r.checked == total {
			break
		}
		n, err := c.Read(buf)
		if n > 0 {
			if bad := pattern.Check(buf[:n], i, uint64(r.checked)); bad >= 0 {
				r.mismatch = r.checked + int64(bad)
			} else {
				r.checked += int64(n)
			}
		}
		recvErr = err
	}
	c.Close() // ends a sender still blocked in Write
	serr := <-sendErr
	switch {
	case ctx.Err() != nil:
		r.err = fmt.Errorf("stopped: %w", ctx.Err())
	case serr != nil && o.end != endAbort:
		r.err = serr
	case recvErr != nil && recvErr != io.EOF && o.end != endAbort:
		r.err = fmt.Errorf("receive: %w", recvErr)
	}
	return patternResult{result: r.result.classify(), checked: r.checked, mismatch: r.mismatch}
}
