package smcr

import (
	"crypto/rand"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/udp"
	"github.com/goroce/goroce/rocev2/device"
	"github.com/goroce/goroce/smcr/smcwire"
)

// A stack is SMC-R on one goroce device: the device, its protection domain
// and completion design, the process's SMC peer ID for it, and the link
// groups whose links live on it. Listeners, dialers and connections that
// name the same device address share one stack; it is opened by the first
// and closed when the last reference (a listener, a connection, a link
// group lingering for reuse) goes away.
type stack struct {
	key    netip.AddrPort
	dev    *device.Device
	be     backend.Backend // as opened, before Config.WrapBackend
	pd     *device.PD
	cqs    cq.Allocator
	design CQDesign
	peerID smcwire.PeerID
	gid    device.GID // index 1: the RoCEv2 GID of the device's address
	mac    smcwire.MAC

	stats stackStats

	mu            sync.Mutex // guards refs, lgrs, firstContacts, closed
	refs          int
	lgrs          []*linkGroup             // newest first, as Linux's list: a burst fills the newest group
	firstContacts map[lgrKey]chan struct{} // under way; closed when each ends (joinOrClaim)
	closed        bool
}

var stacks = struct {
	sync.Mutex
	m map[netip.AddrPort]*stack
}{m: map[netip.AddrPort]*stack{}}

// acquireStack returns the stack of the device at addr:port, opening it on
// first use, with one more reference.
func acquireStack(addr netip.Addr, cfg *Config) (*stack, error) {
	key := netip.AddrPortFrom(addr.Unmap(), cfg.DevicePort)
	stacks.Lock()
	defer stacks.Unlock()
	if s := stacks.m[key]; s != nil {
		if s.design.String() != cfg.CQ.String() {
			return nil, fmt.Errorf("smcr: device %v already runs the %v CQ design; a process uses one design per device", key, s.design)
		}
		s.mu.Lock()
		s.refs++
		s.mu.Unlock()
		return s, nil
	}
	s, err := openStack(key, cfg)
	if err != nil {
		return nil, err
	}
	s.refs = 1
	stacks.m[key] = s
	return s, nil
}

func openStack(key netip.AddrPort, cfg *Config) (*stack, error) {
	open := cfg.Backend
	if open == nil {
		open = openUDP
	}
	be, err := open(key)
	if err != nil {
		return nil, fmt.Errorf("smcr: open the goroce device on %v (is another process using that address and port?): %w", key, err)
	}
	b := be
	if cfg.WrapBackend != nil {
		b = cfg.WrapBackend(b)
	}
	// DeferACKs: a connection's reader answers from its own goroutine, so
	// the ACK of what it received waits for that answer (or HoldLimit) and
	// leaves in its system call (measured with smc-bench, redis GET at 64
	// clients: 30 instead of 37 CPU µs per request).
	dev, err := device.New(device.Config{Name: "goroce-smc", Backend: b, DeferACKs: true})
	if err != nil {
		be.Close()
		return nil, err
	}
	s := &stack{key: key, dev: dev, be: be, pd: dev.AllocPD(), design: cfg.CQ, firstContacts: map[lgrKey]chan struct{}{}}
	s.cqs = cfg.CQ.NewAllocator(dev, s.onOrphan)
	s.gid, _ = dev.GID(1)
	s.mac = dev.MAC()
	// Linux's system identifier: two random bytes and a MAC of the host.
	// The device's MAC is random too (it has no interface of its own), so
	// none of the peer ID can be guessed: a stranger's Proposal cannot
	// claim another client's link group by naming its peer ID.
	if _, err := rand.Read(s.peerID[:2]); err != nil {
		s.cqs.Close()
		dev.Close()
		return nil, err
	}
	copy(s.peerID[2:], s.mac[:])
	s.publishDevice()
	return s, nil
}

// pathTo says how the stack's device reaches the device at dst: the
// backend's own word where it has one (the shared-memory link's LinkTo),
// else "udp" for a UDP socket.
func (s *stack) pathTo(dst netip.AddrPort) string {
	if l, ok := s.be.(interface{ LinkTo(netip.AddrPort) string }); ok {
		p := l.LinkTo(dst)
		if f, ok := s.be.(interface{ Fallback() backend.Backend }); ok && p == "fallback" {
			if _, ok := f.Fallback().(*udp.Backend); ok {
				return "udp"
			}
		}
		return p
	}
	if _, ok := s.be.(*udp.Backend); ok {
		return "udp"
	}
	return ""
}

// openUDP is the default backend: a UDP socket on the device's address.
func openUDP(addr netip.AddrPort) (backend.Backend, error) { return udp.Open(udp.Config{Addr: addr}) }

// onOrphan takes a completion that names no handler (a failed unsignaled
// RDMA WRITE's, in a design that tags none): its link is of no further
// use, as with any failed work request.
func (s *stack) onOrphan(wc *cq.WC) {
	if wc.Status.OK() {
		return
	}
	s.mu.Lock()
	var l *link
	for _, g := range s.lgrs {
		if g.lnk != nil && g.lnk.qp != nil && g.lnk.qp.QPN() == wc.QPNum {
			l = g.lnk
			break
		}
	}
	s.mu.Unlock()
	if l != nil {
		l.fail(fmt.Errorf("smcr: a work request on the link completed with %v", wc.Status))
	}
}

// ref takes one more reference on a stack already held.
func (s *stack) ref() {
	s.mu.Lock()
	s.refs++
	s.mu.Unlock()
}

// release drops a reference; the last one closes the stack.
func (s *stack) release() {
	stacks.Lock()
	s.mu.Lock()
	s.refs--
	last := s.refs == 0 && !s.closed
	if last {
		s.closed = true
		delete(stacks.m, s.key)
	}
	s.mu.Unlock()
	stacks.Unlock()
	if last {
		s.cqs.Close()
		s.dev.Close()
		stackClosed()
	}
}

// gidOf is the smcwire form of a device GID.
func gidOf(g device.GID) smcwire.GID { return smcwire.GID(g) }

// stackStats counts what the peers of a stack did wrong (every hostile or
// broken message is dropped and counted, never trusted), and how RMBs left.
type stackStats struct {
	rkeysDeleted     atomic.Uint64 // RMBs deregistered after the peer confirmed DELETE_RKEY
	rkeysUnconfirmed atomic.Uint64 // RMBs kept until the group's QP was gone

	badCDC       atomic.Uint64 // a CDC that does not parse
	badLLC       atomic.Uint64 // an LLC message that does not parse, or of an unknown type
	unknownToken atomic.Uint64 // a CDC for no connection of the link group
	staleCDC     atomic.Uint64 // a CDC with an old sequence number
	cdcViolation atomic.Uint64 // a CDC whose cursors break the protocol (aborts the connection)
	tcpBytes     atomic.Uint64 // bytes on an SMC-R connection's TCP connection after the handshake (aborts it)
}

func (s *stack) count(c *atomic.Uint64) { c.Add(1) }
