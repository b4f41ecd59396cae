package smcr

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/goroce/goroce/smcr/smcwire"
)

// Dialer dials SMC-R connections; the zero value works (Config's
// defaults).
type Dialer struct {
	Config Config
	// LocalAddr is the TCP connection's source address (and, unless
	// Config.Device says otherwise, the goroce device's).
	LocalAddr netip.Addr
	// Timeout bounds the TCP connect (the handshake has its own bounds).
	Timeout time.Duration
}

// Dial connects to address with a Dialer of cfg.
func Dial(network, address string, cfg *Config) (net.Conn, error) {
	d := Dialer{}
	if cfg != nil {
		d.Config = *cfg
	}
	return d.DialContext(context.Background(), network, address)
}

// Dial is DialContext without a context, as net.Dialer's.
func (d *Dialer) Dial(network, address string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, address)
}

// DialContext connects to address over TCP and runs the SMC-R handshake;
// the connection falls back to the TCP connection when the peer does not
// speak SMC, declines, or the handshake fails before any data flowed.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	cfg, err := d.Config.withDefaults()
	if err != nil {
		return nil, err
	}
	sig, mode, err := signalling(&cfg)
	if err != nil {
		return nil, err
	}
	nd := net.Dialer{Timeout: d.Timeout, Control: controlFor(sig)}
	nd.SetMultipathTCP(false)
	if d.LocalAddr.IsValid() {
		nd.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(d.LocalAddr, 0))
	}
	nc, err := nd.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	tc := nc.(*net.TCPConn)
	info := ConnInfo{Role: "client", Signalling: mode, LocalAddr: tc.LocalAddr(), RemoteAddr: tc.RemoteAddr()}
	ok, err := peerSignalled(sig, tc, &cfg)
	if err != nil || !ok {
		return newFallback(tc, sig, info, smcwire.DiagPeerNoSMC, "local"), nil
	}
	st, err := acquireStack(devicesFor(&cfg, tc), &cfg)
	if err != nil {
		// No device: tell the server (it expects a Proposal), and go on
		// over TCP.
		f := smcwire.DeclineFields{CLCHeader: smcwire.CLCHeader{Version: 2}, Diagnosis: smcwire.DiagNoSMCRDev, OSType: smcwire.OSLinux}
		_ = writeCLC(tc, smcwire.AppendDecline(nil, &f), cfg.HandshakeTimeout)
		return newFallback(tc, sig, info, smcwire.DiagNoSMCRDev, "local"), nil
	}
	h := &handshake{cfg: &cfg, st: st, tcp: tc, rd: &clcReader{c: tc}, role: roleClient, info: info, cancel: ctx.Done()}
	stop := context.AfterFunc(ctx, func() { tc.SetDeadline(time.Unix(1, 0)) })
	err = h.client()
	if !stop() {
		err = errors.Join(err, ctx.Err())
	}
	if err != nil {
		h.abandon()
		st.release()
		var de *declineErr
		if errors.As(err, &de) && ctx.Err() == nil {
			if !de.peer {
				h.sendDecline(de)
				return newFallback(tc, sig, info, de.diag, "local"), nil
			}
			info.PeerDiagnosis = de.diag
			return newFallback(tc, sig, info, smcwire.DiagPeerDecl, "peer"), nil
		}
		if sig != nil {
			sig.Forget(tc)
		}
		tc.Close()
		stats.countHandshakeError(false)
		return nil, err
	}
	c := &Conn{tcp: tc, sig: sig, info: info}
	h.finishConn(c)
	return c, nil
}
