package smcr_test

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/memlink"
	"github.com/goroce/goroce/smcr"
)

// paths is a test's network of device pairs, each of which it can cut:
// a cut device sends nothing and receives nothing more (its cable
// pulled), or, gone, fails every send as a socket whose address was
// deleted does. Every backend the test's stacks open passes through it
// (wrapBackends).
type paths struct {
	mu   sync.Mutex
	dead map[netip.Addr]bool // devices cut: nothing they send, nothing sent to them, arrives
	gone map[netip.Addr]bool // devices whose sends fail with EINVAL (their address deleted)

	// trig, when set, cuts a path at a point of a CDC/WRITE pair.
	trig atomic.Pointer[trigger]
}

func newPaths(t *testing.T) *paths {
	p := &paths{dead: map[netip.Addr]bool{}, gone: map[netip.Addr]bool{}}
	wrapBackends(t, func(b backend.Backend) backend.Backend {
		w := &pathBackend{Backend: b, p: p, self: b.LocalAddr().Addr()}
		return backend.KeepPolling(w, b, w.received)
	})
	return p
}

// cut cuts (or, with false, restores) the devices at addrs.
func (p *paths) cut(on bool, addrs ...netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range addrs {
		p.dead[a] = on
	}
}

// remove makes the devices at addrs fail their sends (or, with false,
// work again), as when their address is deleted.
func (p *paths) remove(on bool, addrs ...netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range addrs {
		p.gone[a] = on
	}
}

func (p *paths) isGone(a netip.Addr) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gone[a]
}

func (p *paths) isDead(a netip.Addr) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dead[a]
}

// cutPoint is where in a CDC/WRITE pair a trigger cuts the path.
type cutPoint int

const (
	beforeWrite        cutPoint = iota // the WRITE is lost, and all after it
	betweenWriteAndCDC                 // the WRITE arrives, its CDC is lost
	afterCDC                           // the CDC arrives, its ACK (and all after) is lost
)

func (c cutPoint) String() string {
	return [...]string{"before the WRITE", "between WRITE and CDC", "after the CDC before its ACK"}[c]
}

// trigger cuts the path of the writer's device and its peer after the
// writer sent writes RDMA WRITEs there, at point; with gone, the two
// devices also lose their addresses then (their next sends fail, and take
// their links down at once), else the links find the cut by TEST_LINK.
type trigger struct {
	writer, peer netip.Addr
	writes       int
	point        cutPoint
	gone         bool

	mu     sync.Mutex
	seen   int  // WRITEs (first packets) sent
	armed  bool // afterCDC: the CDC went; the peer cuts when it has it
	fired  bool
	firedC chan struct{}
}

func newTrigger(writer, peer netip.Addr, writes int, point cutPoint, gone bool) *trigger {
	return &trigger{writer: writer, peer: peer, writes: writes, point: point, gone: gone, firedC: make(chan struct{})}
}

// pathBackend is one device's backend in paths.
type pathBackend struct {
	backend.Backend
	p    *paths
	self netip.Addr
}

func (b *pathBackend) Send(pkts []backend.Outgoing) error {
	b.p.mu.Lock()
	gone := b.p.gone[b.self]
	b.p.mu.Unlock()
	if gone {
		return syscall.EINVAL
	}
	keep := make([]backend.Outgoing, 0, len(pkts))
	for i := range pkts {
		if b.p.trig.Load() != nil {
			b.check(&pkts[i])
		}
		if b.p.isDead(b.self) || b.p.isDead(pkts[i].Dst.Addr()) {
			continue
		}
		keep = append(keep, pkts[i])
	}
	if len(keep) == 0 {
		return nil
	}
	err := b.Backend.Send(keep)
	for i, j := 0, 0; i < len(pkts) && j < len(keep); i++ {
		if &pkts[i].Buf[0] == &keep[j].Buf[0] {
			pkts[i].Wire = keep[j].Wire
			j++
		}
	}
	return err
}

func (b *pathBackend) Receive(pkts []backend.Incoming) (int, error) {
	n, err := b.Backend.Receive(pkts)
	b.received(pkts[:n])
	return n, err
}

// Unwrap returns the backend it decorates.
func (b *pathBackend) Unwrap() backend.Backend { return b.Backend }

// check fires the trigger at the packet pkt this device is about to send.
func (b *pathBackend) check(pkt *backend.Outgoing) {
	tr := b.p.trig.Load()
	if tr == nil || b.self != tr.writer || pkt.Dst.Addr() != tr.peer || len(pkt.Buf) < 13 {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.fired || tr.armed {
		return
	}
	op := rocev2.Opcode(pkt.Buf[0])
	cdc := op == rocev2.RCSendOnly && pkt.Buf[12] == 0xFE
	switch {
	case op == rocev2.RCWriteFirst || op == rocev2.RCWriteOnly:
		tr.seen++
		if tr.point == beforeWrite && tr.seen > tr.writes {
			tr.fire(b.p)
		}
	case cdc && tr.seen >= tr.writes:
		switch tr.point {
		case betweenWriteAndCDC:
			tr.fire(b.p)
		case afterCDC:
			tr.armed = true
		}
	}
}

// received fires an armed afterCDC trigger once the peer has the CDC:
// its ACK, and everything after, is lost.
func (b *pathBackend) received(pkts []backend.Incoming) {
	tr := b.p.trig.Load()
	if tr == nil || b.self != tr.peer {
		return
	}
	for i := range pkts {
		buf := pkts[i].Buf
		if len(buf) < 13 || pkts[i].Src.Addr() != tr.writer || rocev2.Opcode(buf[0]) != rocev2.RCSendOnly || buf[12] != 0xFE {
			continue
		}
		tr.mu.Lock()
		if tr.armed && !tr.fired {
			tr.fire(b.p)
		}
		tr.mu.Unlock()
	}
}

// fire cuts the trigger's path. tr.mu is held.
func (tr *trigger) fire(p *paths) {
	tr.fired = true
	p.cut(true, tr.writer, tr.peer)
	if tr.gone {
		p.remove(true, tr.writer, tr.peer)
	}
	close(tr.firedC)
}

// memDevices makes cfg's stacks use memlink network n for their devices.
func memDevices(cfg *smcr.Config, n *memlink.Network) {
	cfg.Backend = func(ap netip.AddrPort) (backend.Backend, error) { return n.Attach(ap) }
}

// memAddrs returns k device addresses in 198.18.0.0/15 of the test whose
// server address is srv (as unique as freshAddrs makes it): memlink
// devices are the process's, shared by address like any other.
func memAddrs(srv netip.Addr, k int) []netip.Addr {
	b := srv.As4()
	n := (uint32(b[1])-64)<<8 | uint32(b[2])
	out := make([]netip.Addr, k)
	for i := range out {
		out[i] = netip.AddrFrom4([4]byte{198, byte(18 + n>>14), byte(n >> 6), byte((n&63)<<2 + uint32(i))})
	}
	return out
}

// linkPair is a pair with two devices on each side, on memlink (mem) or
// UDP loopback addresses, whose paths the test cuts: path 0 joins the
// sides' first devices (the first link's), path 1 their second ones.
type linkPair struct {
	*pair
	mem      bool
	paths    *paths
	srv, cli [2]netip.Addr
}

// path returns the devices of path i.
func (lp *linkPair) path(i int) []netip.Addr { return []netip.Addr{lp.srv[i], lp.cli[i]} }

func newLinkPair(t *testing.T, mem bool, mod func(*smcr.Config)) *linkPair {
	t.Helper()
	events := &linkLog{t: t, start: time.Now()}
	t.Cleanup(events.stop) // the first cleanup runs last: after the stacks closed
	lp := &linkPair{mem: mem, paths: newPaths(t)}
	var net *memlink.Network
	if mem {
		net = memlink.NewNetwork()
	}
	lp.pair = newPairWith(t, func(srv, cli netip.Addr, c *smcr.Config) ([]netip.Addr, []netip.Addr) {
		if mem {
			a := memAddrs(srv, 4)
			lp.srv, lp.cli = [2]netip.Addr{a[0], a[2]}, [2]netip.Addr{a[1], a[3]}
		} else {
			s, c := devicesAround(srv, 2), devicesAround(cli, 2)
			lp.srv, lp.cli = [2]netip.Addr{s[0], s[1]}, [2]netip.Addr{c[0], c[1]}
		}
		return lp.srv[:], lp.cli[:]
	}, func(c *smcr.Config) {
		if mem {
			memDevices(c, net)
		}
		// A cut path is found by TEST_LINK: idle for 20 ms, then a second
		// without an answer (or any other message: a live link under load
		// proves itself by its traffic). Shorter waits mistake a CPU-starved
		// test for a dead path.
		c.TestLinkInterval = 20 * time.Millisecond
		if !mem {
			// Over UDP a path goes by its devices' addresses (their sends
			// fail): no TEST_LINK, whose wait a starved CPU can outlast
			// (an idle survivor taken for dead ends the group).
			c.TestLinkInterval = -1
		}
		smcr.FastLinkChecks(c, time.Second, 100*time.Millisecond)
		smcr.AddressesGone(c, func(a netip.Addr) bool { return !lp.paths.isGone(a) }, 50*time.Millisecond)
		c.OnLink = events.event
		if mod != nil {
			mod(c)
		}
	})
	return lp
}

// linkLog logs a test's link events, which go test shows when it fails:
// what the groups did is the first thing a failover test's failure needs.
type linkLog struct {
	mu    sync.Mutex
	t     *testing.T
	start time.Time
	done  bool // the test ended: logging now would panic
}

func (l *linkLog) event(e smcr.LinkEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return
	}
	what := "down"
	if e.Up {
		what = "up"
	}
	l.t.Logf("%8.3fs %s link %d %s on %v (peer %v), group %s%s", time.Since(l.start).Seconds(), e.Role, e.Link.ID, what,
		e.Link.Device, e.Link.PeerGID, e.LinkGroupType, errSuffix(e.Err))
}

func (l *linkLog) stop() {
	l.mu.Lock()
	l.done = true
	l.mu.Unlock()
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}
