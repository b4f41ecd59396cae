package smcr

import (
	"crypto/rand"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/goroce/goroce/smcr/smcwire"
)

// A stack is SMC-R on a set of goroce devices: the first (the primary)
// carries each link group's first link and is the one the CLC handshake
// names; the others are alternate paths for further links. It holds the
// process's SMC peer ID for them and the link groups whose links live on
// them. Listeners, dialers and connections that name the same devices
// share one stack; it is opened by the first and closed when the last
// reference (a listener, a connection, a link group lingering for reuse)
// goes away.
type stack struct {
	key    string // the devices' addresses and ports, in order
	devs   []*smcDevice
	peerID smcwire.PeerID

	stats stackStats

	mu            sync.Mutex // guards refs, lgrs, firstContacts, closed
	refs          int
	lgrs          []*linkGroup             // newest first, as Linux's list: a burst fills the newest group
	firstContacts map[lgrKey]chan struct{} // under way; closed when each ends (joinOrClaim)
	closed        bool
}

var stacks = struct {
	sync.Mutex
	m map[string]*stack
}{m: map[string]*stack{}}

// stackKey names a stack by its devices.
func stackKey(keys []netip.AddrPort) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k.String()
	}
	return strings.Join(s, ",")
}

// acquireStack returns the stack of the devices at addrs (the first the
// primary), opening what is not open yet, with one more reference.
func acquireStack(addrs []netip.Addr, cfg *Config) (*stack, error) {
	keys := make([]netip.AddrPort, len(addrs))
	for i, a := range addrs {
		keys[i] = netip.AddrPortFrom(a.Unmap(), cfg.DevicePort)
	}
	key := stackKey(keys)
	stacks.Lock()
	defer stacks.Unlock()
	if s := stacks.m[key]; s != nil {
		if s.devs[0].design.String() != cfg.CQ.String() {
			return nil, errDesign(keys[0], s.devs[0].design)
		}
		s.mu.Lock()
		s.refs++
		s.mu.Unlock()
		return s, nil
	}
	s := &stack{key: key, firstContacts: map[lgrKey]chan struct{}{}}
	devices.Lock()
	for _, k := range keys {
		d, err := acquireDeviceLocked(k, cfg)
		if err != nil {
			for _, d := range s.devs {
				d.releaseLocked()
			}
			devices.Unlock()
			return nil, err
		}
		s.devs = append(s.devs, d)
	}
	devices.Unlock()
	// Linux's system identifier: two random bytes and a MAC of the host.
	// The device's MAC is random too (it has no interface of its own), so
	// none of the peer ID can be guessed: a stranger's Proposal cannot
	// claim another client's link group by naming its peer ID.
	if _, err := rand.Read(s.peerID[:2]); err != nil {
		s.releaseDevices()
		return nil, err
	}
	copy(s.peerID[2:], s.devs[0].mac[:])
	s.refs = 1
	stacks.m[key] = s
	return s, nil
}

// primary is the device of the CLC handshake and of first links.
func (s *stack) primary() *smcDevice { return s.devs[0] }

// deviceOf returns the stack's device whose GID is g, or nil.
func (s *stack) deviceOf(g smcwire.GID) *smcDevice {
	for _, d := range s.devs {
		if gidOf(d.gid) == g {
			return d
		}
	}
	return nil
}

// gids are the GIDs of the stack's devices, the primary's first (the
// SMC-Rv2 GID list of a first contact's Confirm, REQUEST_ADD_LINK).
func (s *stack) gids() []smcwire.GID {
	g := make([]smcwire.GID, len(s.devs))
	for i, d := range s.devs {
		g[i] = gidOf(d.gid)
	}
	return g
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
		s.releaseDevices()
		stackClosed()
	}
}

func (s *stack) releaseDevices() {
	devices.Lock()
	for _, d := range s.devs {
		d.releaseLocked()
	}
	devices.Unlock()
}

// gidOf is the smcwire form of a device GID.
func gidOf(g [16]byte) smcwire.GID { return smcwire.GID(g) }

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

	linksAdded  atomic.Uint64 // links that became active after the first (ADD_LINK)
	linksFailed atomic.Uint64 // links that went down (their connections moved, or their group ended)
	connsMoved  atomic.Uint64 // connections moved to another link (failover)
	llcDropped  atomic.Uint64 // LLC requests dropped: a flow of that kind already runs or waits
}

func (s *stack) count(c *atomic.Uint64) { c.Add(1) }
