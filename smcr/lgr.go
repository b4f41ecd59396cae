package smcr

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/rocev2/device"
	"github.com/goroce/goroce/smcr/smcwire"
)

// role is a link group's (and its connections') side of the handshake.
type role uint8

const (
	roleClient role = iota
	roleServer
)

func (r role) String() string {
	if r == roleServer {
		return "server"
	}
	return "client"
}

// A linkGroup is the set of links to one peer (here always one link: a
// goroce device has one port and no alternate path) and the connections
// that share it, as Linux's smc_link_group. Its protection domain is its
// own: the RMBs of its connections are registered there, so a peer can
// write only into the RMBs of its own link group, and each only with the
// rkey it was given.
//
// A worker goroutine, owned by the link group and stopped when it ends,
// answers the peer's LLC requests, runs TEST_LINK on an idle link, sends
// the consumer updates a peer asks for, ends the group after it lingered
// without connections, and tears it down when its link fails. Local LLC
// flows (CONFIRM_RKEY, DELETE_RKEY, TEST_LINK, DELETE_LINK) run one at a
// time (flowMu), as Linux serializes them.
type linkGroup struct {
	lgrKey   // what a connection's handshake matches the group by
	st       *stack
	id       uint32
	pd       *device.PD
	peerPort uint16
	peerHost string
	// dropConfirmLinks: a test's (Config.hooks), how many CONFIRM_LINK
	// requests a client's group drops.
	dropConfirmLinks atomic.Int32
	eid              smcwire.EID
	maxConns         int   // negotiated (v2 release 1), else the configured
	maxLinks         int   // negotiated; this side never adds a second link
	release          uint8 // negotiated SMC-Rv2 release
	linger           time.Duration
	testLink         time.Duration
	lnk              *link

	mu        sync.Mutex // guards the fields below
	conns     map[uint32]*smcConn
	reserved  int // connections being set up on the group
	ready     bool
	ending    bool
	idleSince time.Time
	toDelete  []*device.MR // RMBs whose DELETE_RKEY is still to be sent
	deleting  bool         // a deleter goroutine runs
	retired   []*device.MR // RMBs the peer never confirmed deleting
	released  bool         // the QP is gone: an RMB is deregistered at once
	toCheck   []*smcConn   // connections whose TCP connection ended, for checkPeer
	checking  bool         // a checker goroutine runs

	flowMu  sync.Mutex     // one local LLC flow at a time
	resp    chan []byte    // the response to the current local flow
	events  chan lgrEvent  // from handlers, for the worker
	cnfLnk  chan []byte    // a client's CONFIRM_LINK request, during first contact
	lastRx  atomic.Int64   // monotonic ns of the last message received
	testing atomic.Bool    // a TEST_LINK flow runs
	flows   sync.WaitGroup // spawned local flows; end waits for them
	closing chan struct{}  // closed when the group starts to end: local flows give up
	stop    chan struct{}  // closed when the group ended
	endErr  atomic.Pointer[error]
}

// lgrEvent is work for a link group's worker.
type lgrEvent struct {
	llc  []byte   // a copy of an LLC request from the peer
	conn *smcConn // a connection whose peer asked for a consumer update
}

var nextLinkGroupID atomic.Uint32

// lingerOf is how long a group of role r stays without connections: a
// client's longer than a server's, as Linux's (600 s / 610 s), so that the
// server ends the group (DELETE_LINK) and a client never ends one a server
// has just chosen for a new connection. The margin covers a CLC handshake:
// Linux's 10 s, or half a shorter linger but at least a second (a
// short-lived program with a short linger need not wait 10 s more).
func lingerOf(r role, linger time.Duration) time.Duration {
	if r == roleClient {
		return linger + min(clientExtraLinger, max(time.Second, linger/2))
	}
	return linger
}

// clientExtraLinger is Linux's margin of a client's linger.
const clientExtraLinger = 10 * time.Second

// lgrKey is what a handshake matches link groups by: the group's role,
// SMC-R version, and peer (its peer ID and GID, and for a server's group
// the client's TCP address).
type lgrKey struct {
	role    role
	v2      bool
	peerID  smcwire.PeerID
	peerGID smcwire.GID
	// peerTCP, of a server's group, is the client's IP address on the TCP
	// connection of the first contact. A Proposal names the client's peer
	// ID and GID, which a third party may know or guess; its TCP address
	// it cannot choose (off this host). So a stranger is never given the
	// client's group, and cannot end it with an out-of-sync Decline (as
	// Linux, which matches by peer ID, GID and MAC alone, would let it).
	// Zero for a client's group: the server chooses those, and names the
	// link's QP.
	peerTCP netip.Addr
}

// newLinkGroup creates a link group on s with its first link (QP in INIT,
// receives posted).
func newLinkGroup(s *stack, k lgrKey, cfg *Config) (*linkGroup, error) {
	g := &linkGroup{
		lgrKey: k, st: s, pd: s.dev.AllocPD(),
		peerPort: cfg.DevicePort, maxConns: cfg.MaxConnsPerLinkGroup, linger: lingerOf(k.role, cfg.LinkGroupLinger),
		testLink: cfg.TestLinkInterval, conns: map[uint32]*smcConn{},
		resp: make(chan []byte, 1), events: make(chan lgrEvent, 64), cnfLnk: make(chan []byte, 1),
		closing: make(chan struct{}), stop: make(chan struct{}),
	}
	g.id = nextLinkGroupID.Add(256) // Linux numbers link groups in steps of 256, process-wide
	g.dropConfirmLinks.Store(cfg.hooks.dropConfirmLinks)
	g.maxLinks = 1
	l, err := newLink(g, 1)
	if err != nil {
		return nil, err
	}
	g.lnk = l
	g.lastRx.Store(time.Now().UnixNano())
	s.ref() // the group holds the stack while it lives
	s.mu.Lock()
	s.lgrs = append([]*linkGroup{g}, s.lgrs...)
	s.mu.Unlock()
	go g.work()
	return g, nil
}

// joinOrClaim returns a ready link group of key k (and match) for a
// subsequent contact, with one connection reserved on it. Without one, it
// returns the channel that closes when the first contact under way with
// the same key ends (wait, then look again); or, when none is under way
// and claim is set, it claims the first contact for k: release ends it
// (the group is ready, or the handshake failed).
//
// First contacts are serialized per key, not per device (Linux's
// smc_server_lgr_pending is one lock for all): a burst of connections from
// a new peer builds one group and fills it, and a peer that stalls its
// first contact delays only its own.
func (s *stack) joinOrClaim(k lgrKey, match func(*linkGroup) bool, claim bool) (g *linkGroup, wait <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.lgrs {
		if g.lgrKey == k && (match == nil || match(g)) && g.reserve() {
			return g, nil, nil
		}
	}
	if ch, ok := s.firstContacts[k]; ok {
		return nil, ch, nil
	}
	if !claim {
		return nil, nil, nil
	}
	ch := make(chan struct{})
	s.firstContacts[k] = ch
	return nil, nil, sync.OnceFunc(func() {
		s.mu.Lock()
		delete(s.firstContacts, k)
		s.mu.Unlock()
		close(ch)
	})
}

// usable reports whether the group is ready and not ending.
func (g *linkGroup) usable() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ready && !g.ending
}

// reserve takes a connection slot on a ready group with room.
func (g *linkGroup) reserve() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.ready || g.ending || len(g.conns)+g.reserved >= g.maxConns {
		return false
	}
	g.reserved++
	return true
}

// unreserve gives back a reservation that did not become a connection.
func (g *linkGroup) unreserve() {
	g.mu.Lock()
	g.reserved--
	g.idleCheckLocked()
	g.mu.Unlock()
}

// newToken returns a fresh, non-zero alert token, unique in the group.
func (g *linkGroup) newTokenLocked() uint32 {
	for {
		var b [4]byte
		_, _ = rand.Read(b[:])
		t := binary.BigEndian.Uint32(b[:])
		if _, used := g.conns[t]; t != 0 && !used {
			return t
		}
	}
}

// addConn registers c under a fresh token, using a reservation.
func (g *linkGroup) addConn(c *smcConn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c.token = g.newTokenLocked()
	g.conns[c.token] = c
	g.reserved--
}

// removeConn forgets c; a group left without connections starts to linger.
func (g *linkGroup) removeConn(c *smcConn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conns[c.token] == c {
		delete(g.conns, c.token)
	}
	g.idleCheckLocked()
}

func (g *linkGroup) idleCheckLocked() {
	if len(g.conns) == 0 && g.reserved == 0 {
		g.idleSince = time.Now()
	}
}

// conn returns the connection of a token.
func (g *linkGroup) conn(token uint32) *smcConn {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.conns[token]
}

// receive is a message the link received, on the receive goroutine: a CDC
// goes to its connection, an LLC response to the waiting flow, an LLC
// request to the worker (it may need to send, which a handler must not
// wait for).
func (g *linkGroup) receive(l *link, msg []byte) {
	g.lastRx.Store(time.Now().UnixNano())
	stats.countLinkMsg(isCDC(msg), false)
	switch smcwire.Classify(msg) {
	case smcwire.KindCDC:
		cdc, err := smcwire.ParseCDC(msg)
		if err != nil {
			g.st.count(&g.st.stats.badCDC)
			return
		}
		c := g.conn(cdc.Token())
		if c == nil {
			g.st.count(&g.st.stats.unknownToken)
			return
		}
		c.onCDC(cdc)
	case smcwire.KindLLCv1, smcwire.KindLLCv2:
		llc, err := smcwire.ParseLLC(msg)
		if err != nil {
			g.st.count(&g.st.stats.badLLC)
			return
		}
		g.onLLC(llc)
	default:
		g.st.count(&g.st.stats.badLLC)
	}
}

// onLLC routes an LLC message (on the receive goroutine).
func (g *linkGroup) onLLC(m smcwire.LLC) {
	cp := append([]byte(nil), m...)
	if m.IsResponse() {
		select {
		case g.resp <- cp:
		default: // no flow waits for it (a late or duplicate response)
		}
		return
	}
	if m.Type().Base() == smcwire.LLCConfirmLink && g.role == roleClient {
		if g.dropConfirmLinks.Load() > 0 && g.dropConfirmLinks.Add(-1) >= 0 {
			return // a test's Linux client that is not waiting yet
		}
		select {
		case g.cnfLnk <- cp:
		default:
		}
		return
	}
	select {
	case g.events <- lgrEvent{llc: cp}:
	default:
		// The peer floods us with LLC requests it must wait for
		// answers to: not a peer we can serve.
		g.lnk.fail(errors.New("smcr: the peer sent LLC requests faster than it waits for their answers"))
	}
}

// askConsumerUpdate has the worker send c's consumer cursor (the peer
// asked, and a handler must not wait for a send slot).
func (g *linkGroup) askConsumerUpdate(c *smcConn) {
	select {
	case g.events <- lgrEvent{conn: c}:
	default: // the worker is busy with as many already; the next read sends it
	}
}

// work is the group's worker goroutine.
func (g *linkGroup) work() {
	tick := time.NewTicker(g.tickEvery())
	defer tick.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-g.lnk.dead:
			g.end(g.lnk.downErr, false)
			return
		case ev := <-g.events:
			if ev.conn != nil {
				ev.conn.sendConsumerUpdate(false)
			} else {
				g.answer(ev.llc)
			}
		case now := <-tick.C:
			g.tick(now)
		}
	}
}

// tickEvery is how often the worker checks for an idle link and for the
// end of a group's linger.
func (g *linkGroup) tickEvery() time.Duration {
	d := g.linger
	if g.testLink > 0 && g.testLink < d {
		d = g.testLink
	}
	return max(d/4, time.Millisecond)
}

// tick runs TEST_LINK on a link idle for the test interval and ends a
// group that lingered long enough without connections.
func (g *linkGroup) tick(now time.Time) {
	g.mu.Lock()
	// A group still deleting rkeys is not idle yet: its peer waits for
	// those flows as for the connections' ends.
	ready, idle := g.ready, len(g.conns) == 0 && g.reserved == 0 && !g.deleting
	lingered := idle && !g.idleSince.IsZero() && now.Sub(g.idleSince) >= g.linger
	g.mu.Unlock()
	if !ready {
		return
	}
	if lingered {
		g.end(nil, true)
		return
	}
	if g.testLink > 0 && now.UnixNano()-g.lastRx.Load() >= int64(g.testLink) && g.testing.CompareAndSwap(false, true) {
		// In a flow of its own: the worker must go on answering the
		// peer, whose TEST_LINK may cross ours.
		g.spawn(func() {
			defer g.testing.Store(false)
			if err := g.testLinkFlow(); err != nil && !errors.Is(err, errGroupEnding) {
				g.lnk.fail(fmt.Errorf("smcr: TEST_LINK: %w", err))
			}
		})
	}
}

// end terminates the group: orderly (DELETE_LINK to the peer) after its
// linger, else because of err; its connections are aborted, its link and
// buffers released, and the stack reference dropped. Called by the worker.
func (g *linkGroup) end(err error, orderly bool) {
	g.mu.Lock()
	if g.ending {
		g.mu.Unlock()
		return
	}
	g.ending = true
	conns := make([]*smcConn, 0, len(g.conns))
	for _, c := range g.conns {
		conns = append(conns, c)
	}
	g.retired = append(g.retired, g.toDelete...)
	g.toDelete = nil
	g.mu.Unlock()
	close(g.closing) // pending local flows give up: the group ends anyway
	if err == nil {
		err = errors.New("smcr: the link group ended")
	}
	g.endErr.Store(&err)
	if orderly && !g.lnk.down.Load() {
		// As Linux frees an idle group: ALL | ORDERLY, program-initiated.
		_ = g.deleteLinkFlow(smcwire.DeleteLinkReason(0x00030000), true)
	}
	for _, c := range conns {
		c.linkGroupEnded(err)
	}
	g.flows.Wait() // they gave up when closing closed
	g.st.mu.Lock()
	g.st.lgrs = slices.DeleteFunc(g.st.lgrs, func(x *linkGroup) bool { return x == g })
	g.st.mu.Unlock()
	close(g.stop)
	g.lnk.destroy()
	// The QP is gone: no peer writes into any RMB of the group any more.
	g.mu.Lock()
	retired := g.retired
	g.retired, g.released = nil, true
	g.mu.Unlock()
	for _, mr := range retired {
		_ = mr.Deregister()
	}
	g.st.release()
}

// drainContext bounds how long a destroyed QP's completions may take to be
// handled (they are already pushed; this only guards a stuck handler).
func drainContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}
