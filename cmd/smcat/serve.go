package main

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/goroce/goroce/smcr"
)

// serve listens and serves o.conns connections (0: until ctx ends): one
// at a time, or with -k all at once. Without --echo the connection runs
// against stdin and stdout (with -k: to stdout only, stdin unread).
func serve(ctx context.Context, o *options, cfg *smcr.Config, stdin io.Reader, stdout io.Writer, log *logger) int {
	ln, err := smcr.Listen("tcp", net.JoinHostPort(o.addr, o.port), cfg)
	if err != nil {
		if msg := setupError(err, log); msg != "" {
			log.Errorf("%s", msg)
			return exitSetup
		}
		log.Errorf("listen on %s: %v", net.JoinHostPort(o.addr, o.port), err)
		return exitSetup
	}
	// The line the interop harness and demo wait for.
	log.Infof("listening on %s (%s)", ln.Addr(), signallingText(cfg.Signalling, cfg.PeerSpeaksSMC))
	stopListening := sync.OnceFunc(func() { ln.Close() })
	defer stopListening()
	stop := context.AfterFunc(ctx, stopListening)
	defer stop()

	out := &lockedWriter{w: stdout}
	var wg sync.WaitGroup
	var failed atomic.Int32
	handle := func(c *smcr.Conn) {
		log.Lines(describe(c, "connection from "+c.RemoteAddr().String()+" to "+c.LocalAddr().String()))
		var r result
		switch {
		case o.echo:
			r = echo(ctx, c, o)
		case o.keep:
			r = stream(ctx, c, nil, out, o)
		default:
			r = stream(ctx, c, stdin, out, o)
		}
		// A peer that closes while data is still coming its way ends that
		// connection, not the server; so does one that aborts, which
		// fails the connection (exit 1 at the end) unless --peer-abort
		// expects it (report).
		if r.peerGone {
			log.Infof("%s: %v (%d bytes sent, %d received)", c.RemoteAddr(), r.err, r.sent, r.received)
			return
		}
		if report(r, c, o, log) != exitOK {
			failed.Add(1)
		}
	}
	for i := 0; o.conns == 0 || i < o.conns; i++ {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				log.Errorf("accept: %v", err)
				failed.Add(1)
			}
			break
		}
		if o.conns > 0 && i == o.conns-1 {
			stopListening() // no more connections: refuse further ones
		}
		c := nc.(*smcr.Conn)
		if !o.keep {
			handle(c)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			handle(c)
		}()
	}
	stopListening()
	wg.Wait()
	if failed.Load() > 0 {
		return exitConn
	}
	return exitOK
}

// lockedWriter serialises the connections' writes to stdout (-k).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
