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

// A linkGroup is the set of links to one peer and the connections that
// share them, as Linux's smc_link_group: up to two links (three while an
// asymmetric one is replaced), each an RC queue pair between one of this
// stack's devices and one of the peer's. Every buffer of its connections
// is registered on each link (with that link's keys, in that link's
// protection domain), so that a peer can write only into the RMBs of its
// own link group, each only with the rkeys it was given, and any link can
// carry any connection: when one fails, its connections move to another
// (failover.go), and only the last one's failure ends them.
//
// A worker goroutine, owned by the link group and stopped when it ends,
// answers the peer's LLC requests, runs TEST_LINK on each idle link, sends
// the consumer updates a peer asks for, hands a failed link to a flow that
// moves its connections, adds a link again when one was lost, ends the
// group after it lingered without connections, and tears it down when its
// last link failed. Local LLC flows (CONFIRM_RKEY, DELETE_RKEY, ADD_LINK,
// DELETE_LINK) and those the peer starts (ADD_LINK, DELETE_LINK) run one
// at a time (flowMu), as Linux serializes them.
type linkGroup struct {
	lgrKey   // what a connection's handshake matches the group by
	st       *stack
	id       uint32
	peerPort uint16
	peerHost string
	// dropConfirmLinks: a test's (Config.hooks), how many CONFIRM_LINK
	// requests a client's group drops.
	dropConfirmLinks atomic.Int32
	hooks            testHooks
	onLink           func(LinkEvent) // Config.OnLink
	eid              smcwire.EID
	maxConns         int   // negotiated (v2 release 1), else the configured
	maxLinks         int   // negotiated (v2 release 1), else 2
	release          uint8 // negotiated SMC-Rv2 release
	linger           time.Duration
	testLink         time.Duration

	mu         sync.Mutex // guards the fields below
	links      [maxLinks]*link
	typ        lgrType
	nextLinkID uint8
	wantLinks  int           // the most links the group had active: fewer, and it adds one again
	relinkWait time.Duration // before the next attempt to add a link again (doubling)
	relinkAt   int64         // mono of the next attempt
	peerGIDs   []smcwire.GID // the peer's devices as it named them (v2 GID list)
	bufs       map[*buffer]struct{}
	rtoks      []rtokenEntry
	conns      map[uint32]*smcConn
	reserved   int // connections being set up on the group
	ready      bool
	ending     bool
	idleSince  time.Time
	toDelete   []*buffer  // RMBs whose DELETE_RKEY is still to be sent
	deleting   bool       // a deleter goroutine runs
	released   bool       // the links are gone: a buffer is deregistered at once
	toCheck    []*smcConn // connections whose TCP connection ended, for checkPeer
	checking   bool       // a checker goroutine runs
	remote     int        // flows the peer asked for, waiting or running (bounded)

	flowMu    sync.Mutex    // one LLC flow at a time
	adding    atomic.Bool   // an ADD_LINK flow runs: the CONFIRM_LINK and DELETE_LINK it waits for go to resp
	resp      chan llcIn    // what the current flow waits for
	events    chan lgrEvent // from handlers, for the worker
	cnfLnk    chan []byte   // a client's CONFIRM_LINK request, during first contact
	linkEvent chan struct{} // a link failed
	flows     sync.WaitGroup
	closing   chan struct{} // closed when the group starts to end: local flows give up
	stop      chan struct{} // closed when the group ended
	term      chan struct{} // closed when the group must end (its last link failed, the peer ended it)
	termOnce  sync.Once
	termErr   error
	dead      atomic.Bool // no link left to tell the peer anything
	// redundant: the group has had two links (a failover may come, and
	// write bytes again into its RMBs); see writeTo.
	redundant atomic.Bool
	endErr    atomic.Pointer[error]
}

// lgrType is a group's redundancy, as Linux's smc_lgr_type: two links on
// distinct devices of both sides (symmetric), two on one device of this
// side (asymmetric local) or of the peer (asymmetric peer).
type lgrType uint8

const (
	lgrNone lgrType = iota
	lgrSingle
	lgrSymmetric
	lgrAsymPeer
	lgrAsymLocal
)

func (t lgrType) String() string {
	switch t {
	case lgrSingle:
		return "SINGLE"
	case lgrSymmetric:
		return "SYMMETRIC"
	case lgrAsymPeer:
		return "ASYMMETRIC_PEER"
	case lgrAsymLocal:
		return "ASYMMETRIC_LOCAL"
	}
	return "NONE"
}

// short is smc-tools' name of the type (smcr linkgroup's LG-Type).
func (t lgrType) short() string {
	switch t {
	case lgrSingle:
		return "SINGLE"
	case lgrSymmetric:
		return "SYM"
	case lgrAsymPeer:
		return "ASYMP"
	case lgrAsymLocal:
		return "ASYML"
	}
	return "NONE"
}

// llcIn is an LLC message the current flow may wait for, and the link it
// came on.
type llcIn struct {
	l   *link
	msg []byte
}

// lgrEvent is work for a link group's worker.
type lgrEvent struct {
	l    *link    // the link llc came on
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
// SMC-R version, and peer (its peer ID; for a server's group also the
// client's GID and TCP address, while a client's group is matched by the
// link the server names).
type lgrKey struct {
	role    role
	v2      bool
	peerID  smcwire.PeerID
	peerGID smcwire.GID // of a server's group: the GID the client's Proposal names
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

// newLinkGroup creates a link group on s with its first link on the
// primary device (QP in INIT, receives posted).
func newLinkGroup(s *stack, k lgrKey, cfg *Config) (*linkGroup, error) {
	g := &linkGroup{
		lgrKey: k, st: s, hooks: cfg.hooks, onLink: cfg.OnLink,
		peerPort: cfg.DevicePort, maxConns: cfg.MaxConnsPerLinkGroup, maxLinks: addLinksMax,
		linger: lingerOf(k.role, cfg.LinkGroupLinger), testLink: cfg.TestLinkInterval,
		conns: map[uint32]*smcConn{}, bufs: map[*buffer]struct{}{}, wantLinks: 1,
		resp: make(chan llcIn, 8), events: make(chan lgrEvent, 64), cnfLnk: make(chan []byte, 1),
		linkEvent: make(chan struct{}, 1), closing: make(chan struct{}), stop: make(chan struct{}), term: make(chan struct{}),
	}
	g.id = nextLinkGroupID.Add(256) // Linux numbers link groups in steps of 256, process-wide
	g.dropConfirmLinks.Store(cfg.hooks.dropConfirmLinks)
	g.relinkWait = g.relinkBase()
	// The server numbers the links; a client takes the number of its
	// first from CONFIRM_LINK.
	l, err := newLink(g, s.primary(), 0, g.nextLinkIDLocked())
	if err != nil {
		return nil, err
	}
	g.links[0] = l
	g.typ = lgrSingle
	s.ref() // the group holds the stack while it lives
	s.mu.Lock()
	s.lgrs = append([]*linkGroup{g}, s.lgrs...)
	s.mu.Unlock()
	go g.work()
	return g, nil
}

// nextLinkIDLocked is the next link id, never 0 nor one in use (Linux's
// smcr_next_link_id). mu is held (or the group is new).
func (g *linkGroup) nextLinkIDLocked() uint8 {
	for {
		g.nextLinkID++
		if g.nextLinkID == 0 {
			continue
		}
		used := false
		for _, l := range g.links {
			used = used || (l != nil && !l.down.Load() && l.id == g.nextLinkID)
		}
		if !used {
			return g.nextLinkID
		}
	}
}

// first is the group's first link (the one of its first contact), set
// before the group is shared.
func (g *linkGroup) first() *link { return g.links[0] }

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

// addConn registers c under a fresh token, using a reservation, on link
// l: the one the server chose (nil: choose it, as a server does).
func (g *linkGroup) addConn(c *smcConn, l *link) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if l == nil {
		l = g.assignLinkLocked()
	}
	if l == nil || l.down.Load() {
		return errNoActiveLink
	}
	c.token = g.newTokenLocked()
	c.setLink(l)
	g.conns[c.token] = c
	g.reserved--
	return nil
}

var errNoActiveLink = errors.New("smcr: the link group has no active link")

// assignLinkLocked chooses a new connection's link as Linux's server does
// (smcr_lgr_conn_assign_link): of the active links that are not
// asymmetric, the first for an even count of connections, the next for an
// odd one, so that connections alternate between them; during first
// contact, the first link. mu is held.
func (g *linkGroup) assignLinkLocked() *link {
	if !g.ready {
		return g.first()
	}
	var pick *link
	for _, l := range g.links {
		if l == nil || !l.active() || l.asym {
			continue
		}
		if pick == nil {
			pick = l
			if len(g.conns)%2 == 0 {
				break
			}
			continue
		}
		return l
	}
	return pick
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

// connList returns the group's connections.
func (g *linkGroup) connList() []*smcConn {
	g.mu.Lock()
	defer g.mu.Unlock()
	cs := make([]*smcConn, 0, len(g.conns))
	for _, c := range g.conns {
		cs = append(cs, c)
	}
	return cs
}

// linkList returns the group's links, in slot order.
func (g *linkGroup) linkList() []*link {
	g.mu.Lock()
	defer g.mu.Unlock()
	ls := make([]*link, 0, maxLinks)
	for _, l := range g.links {
		if l != nil {
			ls = append(ls, l)
		}
	}
	return ls
}

// usableLink returns a link that can send (Linux's smc_llc_usable_link):
// the first active one that is not asymmetric (the link a flow's peer
// compares the new link's device with, and the one that stays), else the
// asymmetric one; nil when none is active.
func (g *linkGroup) usableLink() *link {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.usableLinkLocked()
}

// activeLinksLocked counts the active links. mu is held.
func (g *linkGroup) activeLinksLocked() int {
	n := 0
	for _, l := range g.links {
		if l != nil && l.active() {
			n++
		}
	}
	return n
}

// receive is a message the link received, on the receive goroutine: a CDC
// goes to its connection, an LLC message to its flow or the worker.
func (g *linkGroup) receive(l *link, msg []byte) {
	kind := smcwire.Classify(msg)
	stats.countLinkMsg(kind == smcwire.KindCDC, false)
	switch kind {
	case smcwire.KindCDC:
		cdc, err := smcwire.ParseCDC(msg)
		if err != nil {
			g.st.count(&g.st.stats.badCDC)
			return
		}
		if l.down.Load() {
			// The link is down here, and the peer is told: it sends
			// again on another link what it sent here, with the
			// cursors (absolute, as every CDC's), so nothing is lost;
			// applied, this CDC could announce bytes that the peer's
			// new WRITEs write again.
			return
		}
		c := g.conn(cdc.Token())
		if c == nil {
			g.st.count(&g.st.stats.unknownToken)
			return
		}
		if stop := c.onCDC(l, cdc); stop != nil && !stop.down.Load() {
			stop.quiesce()
			stop.fail(fmt.Errorf("smcr: the peer moved a connection off link %d", stop.id))
		}
	case smcwire.KindLLCv1, smcwire.KindLLCv2:
		llc, err := smcwire.ParseLLC(msg)
		if err != nil {
			g.st.count(&g.st.stats.badLLC)
			return
		}
		g.onLLC(l, llc)
	default:
		g.st.count(&g.st.stats.badLLC)
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

// linkFailed tells the worker that a link went down.
func (g *linkGroup) linkFailed(*link) { wake(g.linkEvent) }

// terminate has the worker end the group because of err (its last link
// failed, the peer ended it or broke the protocol).
func (g *linkGroup) terminate(err error) {
	g.termOnce.Do(func() {
		g.termErr = err
		close(g.term)
	})
}

// work is the group's worker goroutine.
func (g *linkGroup) work() {
	tick := time.NewTicker(g.tickEvery())
	defer tick.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-g.term:
			g.end(g.termErr, false)
			return
		case <-g.linkEvent:
			g.linksFailed()
		case ev := <-g.events:
			if ev.conn != nil {
				ev.conn.sendConsumerUpdate(false)
			} else {
				g.answer(ev.l, ev.llc)
			}
		case now := <-tick.C:
			g.tick(now)
		}
	}
}

// tickEvery is how often the worker checks for idle links, for a link to
// add again, and for the end of a group's linger.
func (g *linkGroup) tickEvery() time.Duration {
	d := min(g.linger, g.relinkBase())
	if g.testLink > 0 && g.testLink < d {
		d = g.testLink
	}
	return max(d/4, time.Millisecond)
}

// tick runs TEST_LINK on each link idle for the test interval, adds a
// link again where one was lost (or a symmetric one where an asymmetric
// one can be replaced), and ends a group that lingered long
// enough without connections.
func (g *linkGroup) tick(now time.Time) {
	for _, d := range g.st.devs {
		d.recheck()
	}
	g.mu.Lock()
	// A group still deleting rkeys is not idle yet: its peer waits for
	// those flows as for the connections' ends.
	ready, idle := g.ready, len(g.conns) == 0 && g.reserved == 0 && !g.deleting
	lingered := idle && !g.idleSince.IsZero() && now.Sub(g.idleSince) >= g.linger
	relink := ready && !g.ending && (g.activeLinksLocked() < g.wantLinks || g.canReplaceAsymLocked()) && mono() >= g.relinkAt
	g.mu.Unlock()
	if !ready {
		return
	}
	if lingered {
		g.end(nil, true)
		return
	}
	if relink {
		g.relink()
	}
	if g.testLink <= 0 {
		return
	}
	for _, l := range g.linkList() {
		if l.active() && mono()-l.lastRx.Load() >= int64(g.testLink) && l.testing.CompareAndSwap(false, true) {
			// In a goroutine of its own: the worker must go on answering
			// the peer, whose TEST_LINK may cross ours.
			g.spawn(func() {
				defer l.testing.Store(false)
				if err := g.testLinkFlow(l); err != nil && !errors.Is(err, errGroupEnding) {
					l.fail(err)
				}
			})
		}
	}
}

// end terminates the group: orderly (DELETE_LINK to the peer) after its
// linger, else because of err; its connections are aborted, its links and
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
	// What waited for DELETE_RKEY stays registered until the links are
	// gone: the peer may still write into it.
	g.st.stats.rkeysUnconfirmed.Add(uint64(len(g.toDelete)))
	g.toDelete = nil
	g.mu.Unlock()
	close(g.closing) // pending local flows give up: the group ends anyway
	if err == nil {
		err = errors.New("smcr: the link group ended")
	}
	g.endErr.Store(&err)
	l := g.usableLink()
	if orderly && l != nil {
		// As Linux frees an idle group: ALL | ORDERLY, program-initiated.
		_ = g.deleteAllFlow(l, smcwire.DelProgInitTerm, true)
	}
	tell := l != nil
	g.dead.Store(true)
	for _, c := range conns {
		c.linkGroupEnded(err, tell)
	}
	g.flows.Wait() // they gave up when closing closed
	g.st.mu.Lock()
	g.st.lgrs = slices.DeleteFunc(g.st.lgrs, func(x *linkGroup) bool { return x == g })
	g.st.mu.Unlock()
	close(g.stop)
	for _, l := range g.linkList() {
		l.destroy()
		g.reportLink(l, false, err)
	}
	// The QPs are gone: no peer writes into any buffer of the group any
	// more.
	g.mu.Lock()
	for b := range g.bufs {
		b.deregister()
	}
	clear(g.bufs)
	g.links = [maxLinks]*link{}
	g.released = true
	g.mu.Unlock()
	g.st.release()
}

// drainContext bounds how long a destroyed QP's completions may take to be
// handled (they are already pushed; this only guards a stuck handler).
func drainContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

// peerLink returns the group's link to the peer's QP qpn on gid (the one
// a server's Accept names), or nil.
func (g *linkGroup) peerLink(qpn uint32, gid smcwire.GID) *link {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, l := range g.links {
		if l != nil && l.active() && l.peerQPN == qpn && l.peerGID == gid {
			return l
		}
	}
	return nil
}

// makeReady makes the group's first link l active once CONFIRM_LINK is
// done: the group takes subsequent connections.
func (g *linkGroup) makeReady(l *link) {
	g.mu.Lock()
	g.ready = true
	g.typ = lgrSingle
	l.confirmed.Store(true)
	if !l.down.Load() {
		l.state.Store(int32(linkActive))
	}
	g.mu.Unlock()
	if l.down.Load() {
		wake(g.linkEvent)
		return
	}
	g.reportLink(l, true, nil)
}

// linkInfos describes the group's links, cur (a connection's) first, and
// the group's type.
func (g *linkGroup) linkInfos(cur *link) (string, []LinkInfo) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ls := make([]LinkInfo, 0, maxLinks)
	if cur != nil && g.links[cur.idx] == cur {
		ls = append(ls, g.linkInfoLocked(cur, cur))
	}
	for _, l := range g.links {
		if l != nil && l != cur {
			ls = append(ls, g.linkInfoLocked(l, cur))
		}
	}
	return g.typ.String(), ls
}

// linkInfoLocked describes link l (cur: the connection's). mu is held.
func (g *linkGroup) linkInfoLocked(l, cur *link) LinkInfo {
	return LinkInfo{ID: l.id, LocalGID: l.dev.gid.Addr(), PeerGID: l.peerGID.Addr().Unmap(),
		LocalQPN: l.qp.QPN(), PeerQPN: l.peerQPN, MTU: l.mtu.Bytes(), State: l.linkState().String(),
		Device: l.dev.key, InUse: l == cur, Asymmetric: l.asym, UserID: l.userID, PeerUserID: l.peerUserID,
		Conns: int(l.conns.Load()), TxMsgs: l.txMsgs.Load(), RxMsgs: l.rxMsgs.Load(),
		Path: l.dev.pathTo(netip.AddrPortFrom(l.peerGID.Addr().Unmap(), g.peerPort))}
}
