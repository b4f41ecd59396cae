package udp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

// Portable is a backend.Backend on a UDP socket through the standard
// library alone, one datagram per system call: what goroce uses where
// Linux's sendmmsg, recvmmsg, GSO and GRO are missing (Open returns it on
// every other system), and what the Linux tests run beside Backend so that
// it stays right.
//
// It differs from Backend only in cost and in what it cannot see: it
// receives one datagram per Receive and cannot receive without blocking
// (a device then receives on its goroutine only, with no busy polling),
// and it learns no TTL or TOS, so a UD receive's IP header area carries
// zeros there. Its ICRCs are sealed for IPv4 ID 0. A goroce peer on a
// UDP socket recovers whatever ID it was sealed for; a peer that verifies
// the real IP header (a kernel rxe, goroce's AF_PACKET backend) needs the
// system to send ID 0, which Linux does for the DF datagrams this backend
// sends there, and other systems may not do.
type Portable struct {
	conn   *net.UDPConn
	local  netip.AddrPort
	ipv6   bool
	mtu    int
	batch  int
	closed atomic.Bool

	txMu sync.Mutex // one Send at a time: the kernel keeps a batch in order
	rx   []byte     // the one receive buffer, lent until the next Receive
}

var _ backend.Backend = (*Portable)(nil)

// OpenPortable binds a UDP socket to cfg.Addr (port 0: an ephemeral one).
// Of the rest of cfg it uses BatchSize (what it reports; it still makes a
// system call per datagram).
func OpenPortable(cfg Config) (*Portable, error) {
	cfg = cfg.withDefaults()
	addr := cfg.Addr.Addr().Unmap()
	if !addr.IsValid() || addr.IsUnspecified() {
		return nil, fmt.Errorf("udp: open %v: a specific local address is needed to seal and verify ICRCs", cfg.Addr)
	}
	conn, err := listen(netip.AddrPortFrom(addr, cfg.Addr.Port()))
	if err != nil {
		return nil, fmt.Errorf("udp: open: %w", err)
	}
	p := &Portable{conn: conn, ipv6: addr.Is6(), mtu: linkMTU(addr), batch: cfg.BatchSize, rx: make([]byte, rxBufSize)}
	p.local = netip.AddrPortFrom(addr, conn.LocalAddr().(*net.UDPAddr).AddrPort().Port())
	if err := configurePortable(conn, p.ipv6); err != nil {
		conn.Close()
		return nil, fmt.Errorf("udp: open %v: %w", cfg.Addr, err)
	}
	return p, nil
}

// Send seals each datagram for IPv4 ID 0 and writes it, in order. A
// datagram that cannot be sent is dropped and the others still go; Send
// then returns the first such error.
func (p *Portable) Send(pkts []backend.Outgoing) error {
	if p.closed.Load() {
		return errClosed
	}
	p.txMu.Lock()
	defer p.txMu.Unlock()
	var first error
	for i := range pkts {
		d := &pkts[i]
		dst, ok := destFor(d.Dst, p.ipv6)
		if !ok || len(d.Buf) < rocev2.ICRCLen {
			if first == nil {
				first = errDest
				if ok {
					first = errShort
				}
			}
			continue
		}
		fl := rocev2.NewFlow(p.local, dst)
		fl.SealICRC(d.Buf)
		d.Wire = backend.Wire{}
		if _, err := p.conn.WriteToUDPAddrPort(d.Buf, dst); err != nil {
			if p.closed.Load() || errors.Is(err, net.ErrClosed) {
				return errClosed
			}
			if first == nil {
				first = fmt.Errorf("udp: send to %v: %w", dst, err)
			}
		}
	}
	return first
}

// Receive blocks until a datagram arrives and hands it out in pkts[0] with
// its ICRC verdict; its Buf is valid until the next Receive. A datagram
// the socket's buffer cut short, or an empty one, comes with a Drop reason.
func (p *Portable) Receive(pkts []backend.Incoming) (int, error) {
	if len(pkts) == 0 {
		return 0, nil
	}
	for {
		if p.closed.Load() {
			return 0, errClosed
		}
		n, src, err := p.conn.ReadFromUDPAddrPort(p.rx)
		if err != nil {
			if p.closed.Load() || errors.Is(err, net.ErrClosed) {
				return 0, errClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// A datagram larger than the buffer (Windows reports it as an
			// error) is not one of ours: drop it, counted by the device.
			pkts[0] = backend.Incoming{Drop: rocev2.ErrDatagram}
			return 1, nil
		}
		d := &pkts[0]
		*d = backend.Incoming{Buf: p.rx[:n], Src: netip.AddrPortFrom(src.Addr().Unmap(), src.Port())}
		switch a := d.Src.Addr(); {
		case n == 0 || n == len(p.rx):
			d.Drop = rocev2.ErrDatagram // empty, or maybe cut short: never trusted
		case !a.IsValid() || a.Is4() == p.ipv6:
			d.Drop = rocev2.ErrSource
		default:
			if p.ipv6 && a.IsLinkLocalUnicast() && a.Zone() == "" {
				d.Src = netip.AddrPortFrom(a.WithZone(p.local.Addr().Zone()), d.Src.Port())
			}
			verdict(d, p.local, p.ipv6, 0)
		}
		return 1, nil
	}
}

// LocalAddr returns the bound address and port.
func (p *Portable) LocalAddr() netip.AddrPort { return p.local }

// BatchSize returns the configured batch size.
func (p *Portable) BatchSize() int { return p.batch }

// LinkMTU returns the MTU of the interface that owns the bound address.
func (p *Portable) LinkMTU() int { return p.mtu }

// Close closes the socket, which wakes a blocked Receive with an error
// wrapping backend.ErrBackendClosed. Closing twice is a no-op.
func (p *Portable) Close() error {
	if !p.closed.CompareAndSwap(false, true) {
		return nil
	}
	return p.conn.Close()
}

// destFor normalizes a destination for a socket of the family ipv6 says.
func destFor(ap netip.AddrPort, ipv6 bool) (netip.AddrPort, bool) {
	a := ap.Addr().Unmap()
	if ap.Port() == 0 || a.Is4() == ipv6 || !a.IsValid() || a.IsUnspecified() || a.IsMulticast() {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a, ap.Port()), true
}
