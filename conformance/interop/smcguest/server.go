//go:build linux

package main

// The echo server: accepts -n connections (served at once), echoes what
// each sends until its EOF, then ends it as asked: shutdown(SHUT_WR) then
// close (-shut, the default), close (-close), or, with -abort, reads one
// byte and closes with the rest unread (the peer sees an abort).

import (
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

func runServer(out *lineWriter, o serverOpts) error {
	deadline := time.Now().Add(o.timeout)
	l, err := newSock(o.tcp)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := l.listen(o.addr, 128); err != nil {
		return err
	}
	out.printf("server: listening on %s (%s), %d connection(s), end %s", o.addr, family(o.tcp), o.conns, o.end)
	var wg sync.WaitGroup
	errs := make([]error, o.conns)
	var accErr error
	for i := range o.conns {
		c, peer, err := l.accept(deadline)
		if err != nil {
			accErr = fmt.Errorf("%w after %d of %d connections", err, i, o.conns)
			break
		}
		out.printf("server: conn %d accepted from %s %s", i, peer, connMode(c))
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			errs[i] = serveConn(out, i, c, o, deadline)
		}()
	}
	wg.Wait()
	failed := 0
	for i, err := range errs {
		if err != nil {
			failed++
			out.printf("server: conn %d FAILED: %v", i, err)
		}
	}
	if accErr != nil {
		return accErr
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d connections failed", failed, o.conns)
	}
	out.printf("server: done conns=%d", o.conns)
	return nil
}

// serveConn echoes one connection and ends it.
func serveConn(out *lineWriter, i int, c *sock, o serverOpts, deadline time.Time) error {
	if o.end == endAbort {
		return serveAbort(out, i, c, deadline)
	}
	buf := make([]byte, 256<<10)
	crc := crc32.NewIEEE()
	var n int64
	for {
		k, err := c.read(buf, deadline)
		if err != nil {
			if o.peerAbort && isReset(err) {
				out.printf("server: conn %d: echoed %d bytes crc32=0x%08x, peer aborted (%s)", i, n, crc.Sum32(), ioErr(err))
				return nil
			}
			return fmt.Errorf("read after %d bytes echoed: %s", n, ioErr(err))
		}
		if k == 0 {
			break
		}
		if err := c.writeAll(buf[:k], deadline); err != nil {
			if o.peerAbort && isReset(err) {
				out.printf("server: conn %d: echoed %d bytes crc32=0x%08x, peer aborted (%s)", i, n, crc.Sum32(), ioErr(err))
				return nil
			}
			return fmt.Errorf("write after %d bytes echoed: %s", n, ioErr(err))
		}
		crc.Write(buf[:k])
		n += int64(k)
	}
	out.printf("server: conn %d: echoed %d bytes crc32=0x%08x, peer EOF (read 0)", i, n, crc.Sum32())
	if o.end == endShut {
		if err := c.shutWrite(); err != nil {
			return err
		}
	}
	out.printf("server: conn %d closed (%s)", i, o.end)
	return nil
}

// serveAbort reads one byte, waits for more to be queued, and closes with
// it unread: the kernel aborts the connection (SMC: peer_conn_abort).
func serveAbort(out *lineWriter, i int, c *sock, deadline time.Time) error {
	var b [1]byte
	k, err := c.read(b[:], deadline)
	if err != nil {
		return fmt.Errorf("read: %s", ioErr(err))
	}
	if k == 0 {
		return errors.New("the peer sent nothing before its EOF: nothing to leave unread")
	}
	wait := time.Now().Add(5 * time.Second)
	if deadline.Before(wait) {
		wait = deadline
	}
	q, err := c.waitQueued(1, wait)
	if q == 0 {
		return fmt.Errorf("nothing queued after the first byte (%v): for -abort the client's first message must be 2 bytes or more", err)
	}
	out.printf("server: conn %d: read 1 byte, closing with %d bytes unread", i, q)
	out.printf("server: conn %d closed (abort)", i)
	return nil
}

// isReset reports whether err is how an aborted peer shows: ECONNRESET,
// EPIPE, ECONNABORTED.
func isReset(err error) bool {
	return errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNABORTED)
}

func family(tcp bool) string {
	if tcp {
		return "tcp"
	}
	return "smc"
}

// connMode describes how a connection runs: SMC-R, or a fallback and its
// reason (from smc_diag), or plain TCP.
func connMode(c *sock) string {
	if !c.smc {
		return "mode=tcp"
	}
	ino, err := c.inode()
	if err != nil {
		return fmt.Sprintf("mode=unknown (fstat: %s)", errnoText(err))
	}
	m, err := socketMode(ino)
	if err != nil {
		return fmt.Sprintf("mode=unknown (%v)", err)
	}
	return m.String()
}
