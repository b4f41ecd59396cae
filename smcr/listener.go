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
// It runs one goroutine that accepts TCP connections and one per running
// handshake (at most Config.MaxPendingHandshakes; see admission.go for
// which run); Close stops them all.
type Listener struct {
	tcp  *net.TCPListener
	cfg  Config
	sig  *tcpopt.Signaller
	mode Signalling
	st   *stack
	adm  *admission

	ready chan *Conn
	done  chan struct{}
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
	devs := c.devices(tl.Addr().(*net.TCPAddr).AddrPort().Addr().Unmap())
	if devs[0].IsUnspecified() {
		tl.Close()
		return nil, fmt.Errorf("smcr: listen on %s: the goroce device needs a specific address: listen on one, or set Config.Device", address)
	}
	st, err := acquireStack(devs, &c)
	if err != nil {
		tl.Close()
		return nil, err
	}
	l := &Listener{tcp: tl, cfg: c, sig: sig, mode: mode, st: st, adm: newAdmission(&c),
		ready: make(chan *Conn, c.MaxPendingHandshakes), done: make(chan struct{}),
		pending: map[*net.TCPConn]struct{}{}}
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
	for _, c := range l.adm.close() {
		_ = c.Close()
	}
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
		tc, err := l.tcp.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // a transient accept error (EMFILE, ...): go on
		}
		run, drop := l.adm.admit(tc)
		if drop != nil {
			_ = drop.Close()
		}
		if run {
			l.wg.Add(1)
			go l.handshakes(tc)
		}
	}
}

// handshakes runs tc's handshake, then those of the waiting connections
// the admission gives it, one after the other.
func (l *Listener) handshakes(tc *net.TCPConn) {
	defer l.wg.Done()
	for tc != nil {
		l.handOut(tc)
		tc = l.adm.done(addrPort(tc.RemoteAddr()).Addr())
	}
}

// handOut runs tc's handshake and queues the connection for Accept. It
// counts as running until Accept has room for it: a program that does not
// accept holds the listener's handshakes, not an unbounded number of
// goroutines.
func (l *Listener) handOut(tc *net.TCPConn) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		tc.Close()
		return
	}
	l.pending[tc] = struct{}{}
	l.mu.Unlock()
	c := l.serve(tc)
	l.mu.Lock()
	delete(l.pending, tc)
	closed := l.closed
	l.mu.Unlock()
	switch {
	case c == nil:
	case closed:
		c.Close()
	default:
		select {
		case l.ready <- c:
		case <-l.done:
			c.Close()
		}
	}
}

// serve runs one accepted connection's handshake; nil when the connection
// is gone.
func (l *Listener) serve(tc *net.TCPConn) *Conn {
	info := ConnInfo{Role: "server", Signalling: l.mode, LocalAddr: tc.LocalAddr(), RemoteAddr: tc.RemoteAddr()}
	ok, err := peerSignalled(l.sig, tc, &l.cfg)
	if err != nil || !ok {
		return newFallback(tc, l.sig, info, smcwire.DiagPeerNoSMC, "local")
	}
	h := &handshake{cfg: &l.cfg, st: l.st, tcp: tc, rd: &clcReader{c: tc}, role: roleServer, info: info, cancel: l.done}
	l.st.ref() // the connection's own reference, if it becomes SMC-R
	if err := h.server(); err != nil {
		h.abandon()
		l.st.release()
		var de *declineErr
		if errors.As(err, &de) {
			if !de.peer {
				h.sendDecline(de)
				return newFallback(tc, l.sig, info, de.diag, "local")
			}
			info.PeerDiagnosis = de.diag
			return newFallback(tc, l.sig, info, smcwire.DiagPeerDecl, "peer")
		}
		// The connection failed (reset, closed, timed out), or the peer
		// broke the protocol: as Linux (smc_listen_out_err), nothing to
		// hand out. That includes a peer taken to speak SMC (its SYN
		// carried the option, or the configuration says so) that sends
		// no Proposal, or bytes that are no CLC: a fallback would hand
		// its bytes to the application as a client's.
		if l.sig != nil {
			l.sig.Forget(tc)
		}
		tc.Close()
		stats.countHandshakeError(true)
		return nil
	}
	c := &Conn{tcp: tc, sig: l.sig, info: info}
	h.finishConn(c)
	return c
}

// devices returns the device addresses of a stack: Devices, else Device,
// else local (the TCP address).
func (c *Config) devices(local netip.Addr) []netip.Addr {
	switch {
	case len(c.Devices) > 0:
		return c.Devices
	case c.Device.IsValid():
		return []netip.Addr{c.Device}
	}
	return []netip.Addr{local}
}

// devicesFor returns the device addresses of a dialed connection.
func devicesFor(cfg *Config, tc *net.TCPConn) []netip.Addr {
	return cfg.devices(tc.LocalAddr().(*net.TCPAddr).AddrPort().Addr().Unmap())
}
