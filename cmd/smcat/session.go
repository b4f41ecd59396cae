package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"

	"github.com/goroce/goroce/smcr"
)

// dial connects and runs the connection against stdin and stdout.
func dial(ctx context.Context, o *options, cfg *smcr.Config, stdin io.Reader, stdout io.Writer, log *logger) int {
	d := smcr.Dialer{Config: *cfg, LocalAddr: o.src, Timeout: o.timeout}
	target := net.JoinHostPort(o.addr, o.port)
	nc, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		if msg := setupError(err, log); msg != "" {
			log.Errorf("%s", msg)
			return exitSetup
		}
		log.Errorf("connect to %s: %s", target, dialError(err, o, log))
		return exitConn
	}
	c := nc.(*smcr.Conn)
	log.Lines(describe(c, "connected to "+c.RemoteAddr().String()+" from "+c.LocalAddr().String()))
	res := stream(ctx, c, stdin, stdout, o)
	return report(res, c, o, log)
}

// dialError is what smcat says of a failed dial: the smcr error, or for a
// peer that does not speak SMC what to do in smcat's terms (the smcr error
// with -v).
func dialError(err error, o *options, log *logger) string {
	if !errors.Is(err, smcr.ErrPeerNotSMC) || !o.speaksSMC {
		return err.Error()
	}
	log.Infof("detail: %v", err)
	return "the peer does not speak SMC (it answered the SMC handshake with something else); " +
		"-peer-speaks-smc is only for peers told the same: for a plain TCP peer run smcat as root without it (it falls back to TCP), or use nc"
}

// result is how a connection went.
type result struct {
	sent, received int64
	err            error // nil, or why the connection failed
	reset          bool  // err is the peer's abort (expected with --peer-abort)
	peerGone       bool  // err is a write after the peer closed (EPIPE)
	ended          string
}

// report logs a connection's end and returns its exit status.
func report(r result, c *smcr.Conn, o *options, log *logger) int {
	peer := c.RemoteAddr().String()
	switch {
	case r.reset && o.peerAbort:
		log.Infof("%s: the peer aborted, as expected (%d bytes sent, %d received)", peer, r.sent, r.received)
	case r.reset:
		log.Errorf("%s: connection reset: the peer aborted it (%d bytes sent, %d received)", peer, r.sent, r.received)
		return exitConn
	case r.err != nil:
		log.Errorf("%s: %v (%d bytes sent, %d received)", peer, r.err, r.sent, r.received)
		return exitConn
	default:
		log.Infof("%s: ended (%s): %d bytes sent, %d received", peer, r.ended, r.sent, r.received)
	}
	return exitOK
}

// isReset reports whether err is the peer's abort (SMC-R) or reset (TCP).
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNABORTED)
}

// stream runs c against in and out: in to the connection, the connection
// to out. At in's EOF the connection ends as o.end says; without in (a
// listener with -k) it ends so at the peer's EOF. stream returns once the
// peer's side has ended (the rest of in is not read), or ctx ended.
func stream(ctx context.Context, c *smcr.Conn, in io.Reader, out io.Writer, o *options) result {
	var closing atomic.Bool // we closed c: errors after that are ours
	closeNow := func() {
		closing.Store(true)
		c.Close()
	}
	// end finishes our side as o.end says (shut: the peer's EOF follows).
	end := func() error {
		if o.end == endShut {
			return c.CloseWrite()
		}
		if o.end == endAbort {
			_ = c.SetLinger(0) // an abort whether or not the echo has arrived yet
		}
		closeNow() // with close: an abort too if data is unread, as Linux's close
		return nil
	}
	var sent atomic.Int64
	recvDone := make(chan struct{})
	var received int64
	var recvErr error
	go func() {
		defer close(recvDone)
		received, recvErr = io.Copy(out, c)
	}()
	sendDone := make(chan error, 1)
	if in != nil {
		go func() {
			n, err := io.Copy(c, in) // c.ReadFrom
			sent.Add(n)
			if err == nil {
				err = end()
			} else if closing.Load() {
				err = nil
			} else {
				err = fmt.Errorf("send: %w", err)
			}
			sendDone <- err
		}()
	}
	select {
	case <-recvDone:
	case <-ctx.Done():
		closeNow()
		<-recvDone
	}
	r := result{received: received, ended: o.end}
	switch {
	case recvErr == nil && in == nil:
		// The peer is done; so are we.
		r.err = end()
	case recvErr == nil:
		// The peer is done writing (it may still read): the rest of in
		// goes to it, as netcat sends stdin to its end.
		select {
		case r.err = <-sendDone:
		case <-ctx.Done():
			closeNow()
			r.err = fmt.Errorf("stopped: %w", ctx.Err())
		}
	case closing.Load() && ctx.Err() == nil:
		// We closed (--end close or abort): the reads end with it.
	case ctx.Err() != nil:
		r.err = fmt.Errorf("stopped: %w", ctx.Err())
	default:
		r.err = fmt.Errorf("receive: %w", recvErr)
	}
	c.Close()
	r.sent = sent.Load()
	return r.classify()
}

// classify sets reset and peerGone from the error.
func (r result) classify() result {
	switch {
	case r.err == nil:
	case isReset(r.err):
		r.reset = true
	case errors.Is(r.err, syscall.EPIPE):
		r.peerGone = true
	}
	return r
}

// echo sends back what c sends until its EOF, then ends the connection as
// o.end says; with abort it reads one byte and aborts.
func echo(ctx context.Context, c *smcr.Conn, o *options) result {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	defer c.Close()
	r := result{ended: o.end}
	if o.end == endAbort {
		var b [1]byte
		n, err := c.Read(b[:])
		r.received = int64(n)
		if err != nil {
			r.err = fmt.Errorf("receive: %w", err)
		}
		_ = c.SetLinger(0) // an abort even if nothing more has arrived yet
		return r.stopped(ctx).classify()
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		r.received += int64(n)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				r.err = fmt.Errorf("send: %w", werr)
				return r.stopped(ctx).classify()
			}
			r.sent += int64(n)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			r.err = fmt.Errorf("receive: %w", err)
			return r.stopped(ctx).classify()
		}
	}
	if o.end == endShut {
		r.err = c.CloseWrite()
	}
	return r.classify()
}

// stopped says that ctx, not the peer, ended the connection.
func (r result) stopped(ctx context.Context) result {
	if ctx.Err() != nil {
		r.err = fmt.Errorf("stopped: %w", ctx.Err())
	}
	return r
}
