package smcr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/goroce/goroce/smcr/smcwire"
	"github.com/goroce/goroce/smcr/tcpopt"
)

// Listener accepts SMC-R connections (and plain TCP ones, as fallbacks).
// It runs one goroutine that accepts TCP connections and one per pending
// handshake (at most Config.MaxPendingHandshakes); Close stops them all.
type Listener struct {
	tcp  *net.TCPListener
	cfg  Config
	sig  *tcpopt.Signaller
	mode Signalling
	st   *stack

	ready chan *Conn
	done  chan struct{}
	slots chan struct{} // handshakes in progress
	wg    sync.WaitGroup

	mu      sync.Mutex
	pending map[*net.TCPConn]struct{}
	closed  bool
	err     error
}

var _ net.Listener = (*Listener)(nil)

// Listen listens on a TCP address (network "tcp", "tcp4" or "tcp6") and
// answers SMC-R proposals on the goroce device cfg names (nil: defaults;
// the device is the listening address's, which must then be a specific
// one).
func Listen(network, address string, cfg *Config) (net.Listener, error) {
	return listen(context.Background(), network, address, cfg)
}

func listen(ctx context.Context, network, address string, cfg *Config) (*Listener, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	sig, mode, err := signalling(&c)
	if err != nil {
		return nil, err
	}
	lc := net.ListenConfig{Control: controlFor(sig)}
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(ctx, network, address)
	if err != nil {
		return nil, err
	}
	tl := ln.(*net.TCPListener)
	dev := c.Device
	if !dev.IsValid() {
		ap := tl.Addr().(*net.TCPAddr).AddrPort()
		if dev = ap.Addr().Unmap(); dev.IsUnspecified() {
			tl.Close()
			return nil, fmt.Errorf("smcr: listen on %s: the goroce device needs a specific address: listen on one, or set Config.Device", address)
		}
	}
	st, err := acquireStack(dev, &c)
	if err != nil {
		tl.Close()
		return nil, err
	}
	l := &Listener{tcp: tl, cfg: c, sig: sig, mode: mode, st: st,
		ready: make(chan *Conn, c.MaxPendingHandshakes), done: make(chan struct{}),
		slots: make(chan struct{}, c.MaxPendingHandshakes), pending: map[*net.TCPConn]struct{}{}}
	l.wg.Add(1)
	go l.acceptLoop()
	trackListener(l)
	return l, nil
}

// Addr returns the listening address.
func (l *Listener) Addr() net.Addr { return l.tcp.Addr() }

// Accept returns the next connection whose handshake is done: SMC-R, or a
// fallback to TCP.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		l.mu.Lock()
		defer l.mu.Unlock()
		return nil, l.err
	}
}

// Close stops listening, ends the handshakes in progress (their TCP
// connections are closed), closes the connections nobody accepted, and
// waits for the listener's goroutines.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	untrackListener(l)
	l.err = fmt.Errorf("smcr: accept on %v: %w", l.tcp.Addr(), net.ErrClosed)
	for c := range l.pending {
		_ = c.Close()
	}
	l.mu.Unlock()
	close(l.done)
	err := l.tcp.Close()
	l.wg.Wait()
	for {
		select {
		case c := <-l.ready:
			c.Close()
			continue
		default:
		}
		break
	}
	l.st.release()
	return err
}

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	for {
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return
		}
		tc, err := l.tcp.AcceptTCP()
		if err != nil {
			<-l.slots
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // a transient accept error (EMFILE, ...): go on
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			tc.Close()
			<-l.slots
			return
		}
		l.pending[tc] = struct{}{}
		l.mu.Unlock()
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			c := l.serve(tc)
			<-l.slots
			l.mu.Lock()
			delete(l.pending, tc)
			closed := l.closed
			l.mu.Unlock()
			if c == nil {
				return
			}
			if closed {
				c.Close()
				return
			}
			l.ready <- c // room for every pending handshake
		}()
	}
}

// serve runs one accepted connection's handshake; nil when the connection
// is gone.
func (l *Listener) serve(tc *net.TCPConn) *Conn {
	info := ConnInfo{Role: "server", Signalling: l.mode, LocalAddr: tc.LocalAddr(), RemoteAddr: tc.RemoteAddr()}
	ok, err := peerSignalled(l.sig, tc, &l.cfg)
	if err != nil || !ok {
		return newFallback(tc, l.sig, info, smcwire.DiagPeerNoSMC, "local", nil)
	}
	h := &handshake{cfg: &l.cfg, st: l.st, tcp: tc, rd: &clcReader{c: tc}, role: roleServer, info: info}
	l.st.ref() // the connection's own reference, if it becomes SMC-R
	if err := h.server(); err != nil {
		h.abandon()
		l.st.release()
		var de *declineErr
		switch {
		case !h.gotCLC && errors.Is(err, errNotCLC), l.sig == nil && !h.rd.started && errors.Is(err, errCLCTimeout):
			// Not an SMC peer after all (configured signalling): its
			// first bytes, if any, are the application's; a peer that
			// said nothing may be a TCP client waiting for the server
			// to speak first. (Anything else that is not CLC after the
			// exchange began is a broken peer: closed, as Linux.)
			return newFallback(tc, l.sig, info, smcwire.DiagPeerNoSMC, "local", append([]byte(nil), h.rd.read...))
		case errors.As(err, &de):
			if !de.peer {
				h.sendDecline(de)
				return newFallback(tc, l.sig, info, de.diag, "local", nil)
			}
			info.PeerDiagnosis = de.diag
			return newFallback(tc, l.sig, info, smcwire.DiagPeerDecl, "peer", nil)
		}
		// The connection failed (reset, closed): nothing to hand out.
		if l.sig != nil {
			l.sig.Forget(tc)
		}
		tc.Close()
		return nil
	}
	c := &Conn{tcp: tc, sig: l.sig, info: info}
	h.finishConn(c)
	return c
}

// deviceFor returns the device address of a connection: cfg's, or the TCP
// connection's local address.
func deviceFor(cfg *Config, tc *net.TCPConn) netip.Addr {
	if cfg.Device.IsValid() {
		return cfg.Device
	}
	return tc.LocalAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
}
