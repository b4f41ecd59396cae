package afpacket

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/internal/mmsg"
)

var errClosed = fmt.Errorf("afpacket: %w", backend.ErrBackendClosed)

// rxOOBLen is the control buffer per received frame: a PACKET_AUXDATA
// message, with room to spare.
const rxOOBLen = 64

// txHeaderLen is the room for what precedes a packet on send: a zero
// virtio_net_hdr (no offload asked for) and the frame's headers.
const txHeaderLen = vnetHdrLen + maxHeaderLen

// Backend is a backend.Backend on an AF_PACKET socket. Send may be called
// from several goroutines (the calls are serialized); Receive from one at a
// time.
type Backend struct {
	link   link
	local  netip.AddrPort
	ipv6   bool
	batch  int
	file   *os.File
	rc     syscall.RawConn
	hold   *net.UDPConn
	neigh  *resolver
	closed atomic.Bool
	check  rxCheck
	ring   *ring // the TPACKET_V3 ring of ReceiveRing; nil with recvmmsg
	// hopLimit is every packet's IPv4 TTL or IPv6 hop limit: the
	// system's, as ib_core gives rxe (systemHopLimit).
	hopLimit uint8

	// tx is the send state; the mutex serializes Send calls (and the
	// resolver's sends of parked packets), which share the preallocated
	// messages and headers.
	tx struct {
		sync.Mutex
		hdrs    []unix.Mmsghdr
		iovs    []unix.Iovec // two per message: headers, packet
		headers []byte       // txHeaderLen per message: virtio_net_hdr and the frame's headers
		index   []int        // index in the batch of each message's datagram
		ipID    uint16       // the next IPv4 ID
		call    *mmsg.Call
		// The destination of the last packet and its MAC, valid while the
		// resolver's generation is gen: a burst to one peer looks the
		// neighbour up once.
		lastDst netip.Addr
		lastMAC [6]byte
		lastGen uint64
		// write sends hdrs; tests swap it to inject errors.
		write func(hdrs []unix.Mmsghdr) (int, error)
	}

	// rx is the receive state, used by one Receive at a time. Messages
	// [next, count) of the last recvmmsg are not yet handed out.
	rx struct {
		hdrs    []unix.Mmsghdr
		iovs    []unix.Iovec
		names   [][unix.SizeofSockaddrLinklayer]byte
		oob     []byte
		bufs    []byte
		bufSize int
		count   int
		next    int       // the message being handed out
		msg     rxMessage // message next, validated
		seg     int       // its next segment (0: not validated yet)
		call    *mmsg.Call
		kernel  rxKernel
		slots   []ringSlot // per buffer, what the ring copied into it
		// drain is Serve's caller's; readFn, bound once, runs it inside
		// the socket's read: false (park) once a drain left nothing.
		drain  func() bool
		readFn func(fd uintptr) bool
	}
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Poller  = (*Backend)(nil)
	_ backend.NIC     = (*Backend)(nil)
)

// Open opens the backend on cfg.Interface: a packet socket with its
// filter, the socket that holds UDP port 4791 for the host's stack, and the
// neighbour resolver. It fails with an error wrapping ErrNoCapNetRaw when
// the process lacks CAP_NET_RAW.
func Open(cfg Config) (*Backend, error) {
	cfg = cfg.withDefaults()
	l, err := findLink(cfg.Interface, cfg.Addr)
	if err != nil {
		return nil, err
	}
	var ringReq *unix.TpacketReq3
	if cfg.Receive == ReceiveRing {
		req, err := ringRequest(cfg.Ring)
		if err != nil {
			return nil, err
		}
		ringReq = &req
	} else if cfg.Receive != ReceiveMmsg {
		return nil, fmt.Errorf("afpacket: %v: use ReceiveMmsg or ReceiveRing", cfg.Receive)
	}
	f, mem, err := openPacketSocket(&l, filter(l.addr), cfg.SocketBuffer, ringReq)
	if err != nil {
		return nil, err
	}
	b, err := newBackend(l, f, cfg)
	if err != nil {
		f.Close()
		if mem != nil {
			_ = unix.Munmap(mem)
		}
		return nil, err
	}
	if mem != nil {
		b.ring = newRing(mem, cfg.Ring.BlockSize, cfg.Ring.Blocks, true)
	}
	if b.hold, err = holdPort(l.addr.WithZone(l.name)); err != nil {
		b.closeSocket()
		return nil, err
	}
	nl, err := openNetlink()
	if err != nil {
		b.hold.Close()
		b.closeSocket()
		return nil, err
	}
	b.neigh = newResolver(b, nl, l.mtu)
	return b, nil
}

func newBackend(l link, f *os.File, cfg Config) (*Backend, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("afpacket: %w", err)
	}
	b := &Backend{
		link: l, local: netip.AddrPortFrom(l.addr, rocev2.UDPPort), ipv6: l.addr.Is6(),
		batch: cfg.BatchSize, file: f, rc: rc,
		check:    rxCheck{local: l.addr, maxFrame: ethHeaderLen + l.mtu},
		hopLimit: systemHopLimit(l.name, l.addr.Is6()),
	}
	b.tx.hdrs = make([]unix.Mmsghdr, b.batch)
	b.tx.iovs = make([]unix.Iovec, 2*b.batch)
	b.tx.headers = make([]byte, b.batch*txHeaderLen)
	b.tx.index = make([]int, b.batch)
	b.tx.ipID = uint16(rand.Uint32())
	b.tx.call = mmsg.NewCall(unix.SYS_SENDMMSG)
	b.tx.write = b.sendmmsg

	// One buffer per frame, as long as the longest GSO super-frame a
	// virtual link may hand over (64 KiB of IP), so that a longer one
	// shows (and is dropped) rather than being cut to look right.
	b.rx.bufSize = (vnetHdrLen + ethHeaderLen + max(l.mtu, 1<<16) + 64 + 63) &^ 63
	b.rx.hdrs = make([]unix.Mmsghdr, b.batch)
	b.rx.iovs = make([]unix.Iovec, b.batch)
	b.rx.names = make([][unix.SizeofSockaddrLinklayer]byte, b.batch)
	b.rx.oob = make([]byte, b.batch*rxOOBLen)
	b.rx.bufs = make([]byte, b.batch*b.rx.bufSize)
	b.rx.slots = make([]ringSlot, b.batch)
	for i := range b.rx.hdrs {
		iov := &b.rx.iovs[i]
		iov.Base = &b.rx.bufs[i*b.rx.bufSize]
		iov.SetLen(b.rx.bufSize)
		h := &b.rx.hdrs[i].Hdr
		h.Iov = iov
		h.SetIovlen(1)
		h.Name = &b.rx.names[i][0]
		h.Namelen = unix.SizeofSockaddrLinklayer
		h.Control = &b.rx.oob[i*rxOOBLen]
		h.SetControllen(rxOOBLen)
	}
	b.rx.call = mmsg.NewCall(unix.SYS_RECVMMSG)
	b.rx.readFn = func(uintptr) bool {
		for b.rx.drain() {
			if b.closed.Load() {
				return true
			}
		}
		return b.closed.Load()
	}
	b.rx.kernel = socketKernel{b}
	return b, nil
}

// LocalAddr returns the device's address and port 4791.
func (b *Backend) LocalAddr() netip.AddrPort { return b.local }

// BatchSize returns the number of frames per system call.
func (b *Backend) BatchSize() int { return b.batch }

// LinkMTU returns the interface's MTU.
func (b *Backend) LinkMTU() int { return b.link.mtu }

// HardwareAddr returns the interface's MAC.
func (b *Backend) HardwareAddr() [6]byte { return b.link.mac }

// Interface returns the interface's name and index.
func (b *Backend) Interface() (name string, index int) { return b.link.name, b.link.index }

// Stats returns the backend's counts.
func (b *Backend) Stats() Stats {
	s := Stats{}
	if b.neigh != nil {
		s.Unresolved = b.neigh.dropped.Load()
	}
	if b.ring != nil {
		s.BadBlocks = b.ring.bad.Load()
	}
	return s
}

// Close closes the packet socket (and unmaps its receive ring), which wakes a blocked Receive with an
// error wrapping backend.ErrBackendClosed, stops the neighbour resolver and
// gives UDP port 4791 back to the host. Closing twice is a no-op.
func (b *Backend) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	if b.neigh != nil {
		b.neigh.stop()
	}
	b.rx.kernel.close()
	err := b.closeSocket()
	if b.hold != nil {
		if herr := b.hold.Close(); err == nil {
			err = herr
		}
	}
	return err
}

// closeSocket closes the packet socket and unmaps its ring, which waits
// for a Receive that is reading the ring (it holds the ring's lock only
// while it reads, never while it waits).
func (b *Backend) closeSocket() error {
	err := b.file.Close()
	if b.ring != nil {
		b.ring.close()
	}
	return err
}

// ioError maps an error of the socket to the backend's: after Close, every
// error is ErrBackendClosed.
func (b *Backend) ioError(op string, err error) error {
	if b.closed.Load() || errors.Is(err, os.ErrClosed) {
		return errClosed
	}
	return fmt.Errorf("afpacket: %s on %s: %w", op, b.link.name, err)
}
