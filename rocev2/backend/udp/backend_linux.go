package udp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/internal/mmsg"
)

// rxOOBLen is the control buffer per received message: a UDP_GRO message
// and the TTL and TOS (hop limit and traffic class) messages, each an int
// at most, with room to spare.
const rxOOBLen = 128

// Backend is a backend.Backend on a UDP socket. Send may be called from
// several goroutines (the calls are serialized); Receive from one at a time.
type Backend struct {
	conn   *net.UDPConn
	rc     syscall.RawConn
	local  netip.AddrPort
	scope  uint32 // interface index of an IPv6 link-local local address
	ipv6   bool
	mtu    int
	batch  int
	maxSeg int // largest GSO segment the link's MTU lets through
	gro    bool
	gso    atomic.Bool // cleared for good if the kernel refuses GSO
	closed atomic.Bool

	// tx is the send state; the mutex serializes Send calls, which all
	// share the preallocated messages.
	tx struct {
		sync.Mutex
		m     mmsgs
		first []int // index in the Send batch of each message's first datagram
		segs  []int // datagrams in each message
		call  *mmsg.Call
		// write sends hdrs; tests swap it to inject errors.
		write func(hdrs []unix.Mmsghdr) (int, error)
	}

	// rx is the receive state, used by one Receive at a time. Messages
	// [next, count) of the last recvmmsg are not yet fully handed out; off is
	// the offset of the next packet in message next.
	rx struct {
		m     mmsgs
		bufs  []byte
		call  *mmsg.Call
		count int
		next  int
		off   int
		// kernel fills the messages: the socket, or a test's stand-in.
		kernel rxKernel
		// drain is Serve's caller's; readFn, bound once, runs it inside
		// the socket's read: false (park) once a drain left nothing.
		drain  func() bool
		done   func() bool // ServeUntil's, or nil
		readFn func(fd uintptr) bool
	}
}

var _ backend.Backend = (*Backend)(nil)

// Open binds a UDP socket to cfg.Addr and returns a backend on it.
func Open(cfg Config) (*Backend, error) {
	cfg = cfg.withDefaults()
	addr := cfg.Addr.Addr().Unmap()
	if !addr.IsValid() || addr.IsUnspecified() {
		return nil, fmt.Errorf("udp: open %v: a specific local address is needed to seal and verify ICRCs", cfg.Addr)
	}
	conn, err := listen(netip.AddrPortFrom(addr, cfg.Addr.Port()))
	if err != nil {
		return nil, fmt.Errorf("udp: open: %w", err)
	}
	b, err := newBackend(conn, addr, cfg)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("udp: open %v: %w", cfg.Addr, err)
	}
	return b, nil
}

func newBackend(conn *net.UDPConn, addr netip.Addr, cfg Config) (*Backend, error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	b := &Backend{conn: conn, rc: rc, ipv6: addr.Is6(), batch: cfg.BatchSize}
	b.local = netip.AddrPortFrom(addr, conn.LocalAddr().(*net.UDPAddr).AddrPort().Port())
	if z := addr.Zone(); z != "" {
		if b.scope = zoneIndex(z); b.scope == 0 {
			return nil, fmt.Errorf("unknown zone %q", z)
		}
	}
	o := sockopts{ipv6: b.ipv6, buffer: cfg.SocketBuffer, gso: !cfg.DisableGSO, gro: !cfg.DisableGRO && groSafe()}
	if err := configure(rc, &o); err != nil {
		return nil, err
	}
	b.gso.Store(o.gso)
	b.gro = o.gro

	b.mtu = linkMTU(addr)
	hdr := rocev2.IPv4HeaderLen + rocev2.UDPHeaderLen
	if b.ipv6 {
		hdr = rocev2.IPv6HeaderLen + rocev2.UDPHeaderLen
	}
	b.maxSeg = b.mtu - hdr

	// Send: at most batch datagrams per sendmmsg, so batch messages and
	// batch iovecs cover every plan.
	b.tx.m = newMmsgs(b.batch, b.batch, segmentCmsgLen)
	b.tx.first = make([]int, b.batch)
	b.tx.segs = make([]int, b.batch)
	b.tx.call = mmsg.NewCall(unix.SYS_SENDMMSG)
	b.tx.write = b.sendmmsg

	// Receive: one buffer per message; the iovecs never change.
	b.rx.m = newMmsgs(b.batch, b.batch, rxOOBLen)
	b.rx.bufs = make([]byte, b.batch*rxBufSize)
	for i := range b.rx.m.hdrs {
		iov := &b.rx.m.iovs[i]
		iov.Base = &b.rx.bufs[i*rxBufSize]
		iov.SetLen(rxBufSize)
		h := &b.rx.m.hdrs[i].Hdr
		h.Iov = iov
		h.SetIovlen(1)
		h.Name = &b.rx.m.names[i][0]
		h.Control = &b.rx.m.control(i)[0]
		h.Namelen = sockaddrLen
		h.SetControllen(b.rx.m.oobLen)
	}
	b.rx.call = mmsg.NewCall(unix.SYS_RECVMMSG)
	b.rx.kernel = socketKernel{b}
	b.rx.readFn = func(uintptr) bool {
		for b.rx.drain() {
			if b.closed.Load() {
				return true
			}
		}
		return b.closed.Load() || (b.rx.done != nil && b.rx.done())
	}
	return b, nil
}

// LocalAddr returns the bound address and port.
func (b *Backend) LocalAddr() netip.AddrPort { return b.local }

// BatchSize returns the number of datagrams per system call.
func (b *Backend) BatchSize() int { return b.batch }

// LinkMTU returns the MTU of the interface that owns the bound address
// (65536 for lo on Linux).
func (b *Backend) LinkMTU() int { return b.mtu }

// Features reports whether UDP GSO and GRO are in use. GSO turns off for good
// when the kernel refuses a segmented send.
func (b *Backend) Features() (gso, gro bool) { return b.gso.Load(), b.gro }

// Close closes the socket, which wakes a blocked Receive with an error
// wrapping backend.ErrBackendClosed. Closing twice is a no-op.
func (b *Backend) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	b.rx.kernel.close()
	return b.conn.Close()
}

// ioError maps an error of the socket to the backend's: after Close, every
// error is ErrBackendClosed.
func (b *Backend) ioError(op string, err error) error {
	if b.closed.Load() || errors.Is(err, net.ErrClosed) {
		return errClosed
	}
	return fmt.Errorf("udp: %s: %w", op, err)
}
