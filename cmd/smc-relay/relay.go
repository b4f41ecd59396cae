package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/goroce/goroce/smcr"
)

// A relay joins each connection it accepts to one it dials, byte for byte
// both ways. Each direction is a pump: it reads into a buffer of its own
// and writes the buffer out before it reads again, so a slow receiver
// stops the pump, the pump stops reading, and the sender's TCP window or
// the peer's RMB fills: back-pressure, with memory bounded at two buffers
// per connection (and the SMC-R side's RMB and send buffer). An end of
// stream on one side is a half-close of the other (CloseWrite: a TCP FIN,
// SMC-R's peer_done_writing), the other direction flowing on; an abort
// (TCP RST, SMC-R peer_conn_abort) or a failure on either side aborts
// both, so that a dead side ends the other.

// conn is either side: a TCP connection or an SMC-R one (which may have
// fallen back to TCP).
type conn interface {
	net.Conn
	CloseWrite() error
	SetLinger(sec int) error
}

// relay is a running relay's settings and its connections.
type relay struct {
	dial    func(ctx context.Context) (conn, error)
	bufSize int
	log     *logger
	verbose bool

	mu     sync.Mutex
	active map[*session]struct{}
	seq    atomic.Uint64
	failed atomic.Uint64 // connections that ended in an abort or could not be dialled
}

// session is one relayed connection: a is the accepted side, b the dialled.
type session struct {
	id   uint64
	a, b conn

	abortOnce sync.Once
}

// serve accepts on ln until ctx ends or n connections (0: no limit) were
// taken, at most max at a time, and relays each. It returns once every
// connection has ended; the end of ctx aborts them.
func (r *relay) serve(ctx context.Context, ln net.Listener, n, max int) {
	r.mu.Lock()
	r.active = map[*session]struct{}{}
	r.mu.Unlock()
	slots := make(chan struct{}, max)
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		r.abortAll()
	})
	defer stop()
	for i := 0; n == 0 || i < n; i++ {
		select {
		case slots <- struct{}{}: // a connection beyond max waits in the listen backlog
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				r.log.Errorf("accept: %v", err)
				r.failed.Add(1)
			}
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			r.handle(ctx, c.(conn))
		}()
	}
	ln.Close()
	wg.Wait()
}

// handle relays one accepted connection.
func (r *relay) handle(ctx context.Context, a conn) {
	s := &session{id: r.seq.Add(1), a: a}
	b, err := r.dial(ctx)
	if err != nil {
		// No other side: the client learns at once, as from a server that
		// refused it.
		r.log.Errorf("conn %d from %v: %v", s.id, a.RemoteAddr(), err)
		r.failed.Add(1)
		_ = a.SetLinger(0)
		a.Close()
		return
	}
	s.b = b
	if r.verbose {
		r.log.Infof("conn %d: %v -> %v: %s; %v -> %v: %s", s.id, a.RemoteAddr(), a.LocalAddr(), mode(a), b.LocalAddr(), b.RemoteAddr(), mode(b))
	}
	r.track(s, true)
	defer r.track(s, false)
	if ctx.Err() != nil {
		s.abort() // the relay stopped while this one was being dialled
	}
	up, down := make(chan pumped, 1), make(chan pumped, 1)
	go func() { up <- pump(a, b, make([]byte, r.bufSize)) }()
	go func() { down <- pump(b, a, make([]byte, r.bufSize)) }()
	var res [2]pumped
	for got := 0; got < 2; got++ {
		select {
		case res[0] = <-up:
			up = nil
			if res[0].err != nil {
				s.abort()
			}
		case res[1] = <-down:
			down = nil
			if res[1].err != nil {
				s.abort()
			}
		}
	}
	a.Close()
	b.Close()
	switch {
	case res[0].err != nil || res[1].err != nil:
		r.failed.Add(1)
		r.log.Infof("conn %d: aborted (%v); %d bytes up, %d down", s.id, errors.Join(res[0].err, res[1].err), res[0].n, res[1].n)
	case r.verbose:
		r.log.Infof("conn %d: ended: %d bytes up, %d down", s.id, res[0].n, res[1].n)
	}
}

// abort aborts both sides: a TCP RST, SMC-R's peer_conn_abort.
func (s *session) abort() {
	s.abortOnce.Do(func() {
		for _, c := range []conn{s.a, s.b} {
			_ = c.SetLinger(0)
			c.Close()
		}
	})
}

// track adds or removes s from the active sessions.
func (r *relay) track(s *session, add bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if add {
		r.active[s] = struct{}{}
	} else {
		delete(r.active, s)
	}
}

// abortAll aborts every active connection (a signal).
func (r *relay) abortAll() {
	r.mu.Lock()
	ss := make([]*session, 0, len(r.active))
	for s := range r.active {
		ss = append(ss, s)
	}
	r.mu.Unlock()
	for _, s := range ss {
		s.abort()
	}
}

// pumped is how a pump ended: the bytes it moved, and nil for an end of
// stream it carried over, else why it failed.
type pumped struct {
	n   int64
	err error
}

// pump copies src to dst through buf until src's end of stream, which it
// passes on as dst's CloseWrite, or an error on either side.
func pump(src, dst conn, buf []byte) pumped {
	var total int64
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return pumped{total, fmt.Errorf("%v went away: %w", dst.RemoteAddr(), werr)}
			}
			total += int64(n)
		}
		switch {
		case err == io.EOF:
			if cerr := dst.CloseWrite(); cerr != nil {
				return pumped{total, fmt.Errorf("pass on the end of %v: %w", src.RemoteAddr(), cerr)}
			}
			return pumped{total, nil}
		case err != nil:
			return pumped{total, fmt.Errorf("%v %s: %w", src.RemoteAddr(), failure(err), err)}
		}
	}
}

// failure names what happened to a side whose read failed.
func failure(err error) string {
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNABORTED) {
		return "aborted"
	}
	if errors.Is(err, net.ErrClosed) {
		return "was closed"
	}
	return "failed"
}

// mode says what a side speaks: TCP, or SMC-R and how.
func mode(c conn) string {
	i, ok := smcr.Info(c)
	switch {
	case !ok:
		return "TCP"
	case i.Mode == smcr.ModeFallback:
		return fmt.Sprintf("TCP fallback, reason %v", i.Fallback)
	}
	return fmt.Sprintf("%v, link group %#x", i.Mode, i.LinkGroup)
}

// dialer returns the relay's dial of ep: TCP, or SMC-R with cfg.
func dialer(ep endpoint, cfg smcr.Config, timeout time.Duration) func(ctx context.Context) (conn, error) {
	if !ep.smc {
		return func(ctx context.Context) (conn, error) {
			d := net.Dialer{Timeout: timeout}
			if ep.src.IsValid() {
				d.LocalAddr = &net.TCPAddr{IP: ep.src.AsSlice()}
			}
			c, err := d.DialContext(ctx, "tcp", ep.addr)
			if err != nil {
				return nil, err
			}
			return c.(*net.TCPConn), nil
		}
	}
	return func(ctx context.Context) (conn, error) {
		d := smcr.Dialer{Config: cfg, LocalAddr: ep.src, Timeout: timeout}
		c, err := d.DialContext(ctx, "tcp", ep.addr)
		if err != nil {
			return nil, err
		}
		return c.(*smcr.Conn), nil
	}
}
