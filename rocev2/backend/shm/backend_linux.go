package shm

import (
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/rocev2/backend"
)

var (
	errClosed = fmt.Errorf("shm: %w", backend.ErrBackendClosed)
	errShort  = errors.New("shm: send: datagram shorter than an ICRC")
	errDest   = errors.New("shm: send: destination is not a unicast address and port of the backend's family")
	errTooBig = fmt.Errorf("shm: send: datagram larger than %d bytes, the largest a ring carries", maxPacket)
)

// Backend is a backend.Backend that carries packets through shared memory to
// peers on the same host, and through its fallback to everyone else. Send
// may be called from several goroutines; Receive and TryReceive from one at
// a time.
type Backend struct {
	cfg      Config
	local    netip.AddrPort
	fallback backend.Backend
	fbPoll   backend.Poller
	uid      uint32
	instance uint64
	epoch    time.Time // RetryAfter deadlines are nanoseconds since
	batch    int
	mtu      int
	stats    stats
	closed   atomic.Bool

	// mu guards the peer table's shape, the rendezvous connections and
	// the goroutine group; Sends look peers up under its read lock.
	mu         sync.RWMutex
	peers      map[netip.AddrPort]*peer
	conns      map[*net.UnixConn]struct{}
	handshakes int
	wg         sync.WaitGroup
	stop       chan struct{} // closed by Close
	ln         *net.UnixListener

	// rxMu guards the slots (the pairings' receiving sides) and the
	// receive state. Lock order: mu → rxMu → a peer's txMu.
	rxMu  sync.Mutex
	slots []*pairing
	gen   uint32
	rx    struct {
		slab []byte // BatchSize packets of maxPacket bytes
		next int    // the slot to start from: rounds go round-robin
		// slept and woke are when the serving goroutine last parked and
		// last woke: a short sleep means a busy link, worth a spin.
		slept, woke time.Time
		// What serve runs (serveRead, bound once as readFn), and
		// Receive's own state.
		drain, done func() bool
		readFn      func(fd uintptr) bool
		recv        blockingReceive
	}
	wait waiter

	fb struct {
		ready   atomic.Bool   // the fallback has packets (the bridge saw it readable)
		drained chan struct{} // TryReceive found it empty: the bridge may wait again
		bell    int           // the bridge's doorbell, in the waiter's epoll
		done    chan struct{}
	}
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Poller  = (*Backend)(nil)
)

// Open starts a shared-memory backend: it checks the run directory, listens
// on its rendezvous socket (unless cfg.NoListen) and takes over
// cfg.Fallback.
func Open(cfg Config) (*Backend, error) {
	cfg = cfg.withDefaults()
	b, err := open(cfg)
	if err != nil {
		if cfg.Fallback != nil {
			cfg.Fallback.Close()
		}
		return nil, err
	}
	return b, nil
}

func open(cfg Config) (*Backend, error) {
	local := netip.AddrPortFrom(cfg.Addr.Addr().Unmap(), cfg.Addr.Port())
	var fbPoll backend.Poller
	if cfg.Fallback != nil {
		var ok bool
		if fbPoll, ok = cfg.Fallback.(backend.Poller); !ok {
			return nil, errors.New("shm: open: the fallback backend cannot receive without blocking (backend.Poller); use the UDP backend (or memlink) as the fallback")
		}
		fa := cfg.Fallback.LocalAddr()
		fa = netip.AddrPortFrom(fa.Addr().Unmap(), fa.Port())
		if !local.IsValid() {
			local = fa
		} else if local != fa {
			return nil, fmt.Errorf("shm: open %v: the fallback is on %v; both links must have the device's one address (the ICRC covers it)", local, fa)
		}
	}
	if a := local.Addr(); !a.IsValid() || a.IsUnspecified() || a.IsMulticast() || local.Port() == 0 {
		return nil, fmt.Errorf("shm: open %v: a specific local address and port are needed (the ICRC covers them, and peers find the rendezvous socket by them)", cfg.Addr)
	}
	if !validRingSize(uint64(cfg.RingSize)) {
		return nil, fmt.Errorf("shm: open: RingSize %d: use a power of two from %d to %d", cfg.RingSize, minRingSize, maxRingSize)
	}
	var seed [8]byte
	crand.Read(seed[:])
	b := &Backend{
		cfg: cfg, local: local, fallback: cfg.Fallback, fbPoll: fbPoll,
		uid: uint32(os.Getuid()), instance: binary.LittleEndian.Uint64(seed[:]), epoch: time.Now(),
		batch: cfg.BatchSize, mtu: linkMTU,
		peers: make(map[netip.AddrPort]*peer), conns: make(map[*net.UnixConn]struct{}),
		stop:  make(chan struct{}),
		slots: make([]*pairing, cfg.MaxPeers),
	}
	if b.fallback != nil {
		b.mtu = min(b.mtu, b.fallback.LinkMTU())
	}
	b.rx.slab = make([]byte, b.batch*maxPacket)
	b.fb.bell = -1
	b.rx.readFn = b.serveRead
	b.rx.recv.init(b)
	if err := b.wait.init(); err != nil {
		return nil, err
	}
	if b.fallback != nil {
		if err := b.startBridge(); err != nil {
			b.wait.close()
			return nil, err
		}
	}
	if !cfg.NoListen {
		if err := b.listen(); err != nil {
			b.stopBridge()
			b.wait.close()
			return nil, err
		}
	}
	return b, nil
}

// LocalAddr returns the device's address and port.
func (b *Backend) LocalAddr() netip.AddrPort { return b.local }

// BatchSize returns the datagrams a Receive hands out at most.
func (b *Backend) BatchSize() int { return b.batch }

// LinkMTU is what a ring carries at most in IP terms (IB MTU 4096), or the
// fallback's MTU if that is smaller: the device has one port MTU for both
// links.
func (b *Backend) LinkMTU() int { return b.mtu }

// Stats returns the backend's counters.
func (b *Backend) Stats() Stats { return b.stats.snapshot() }

// Fallback returns the fallback backend (nil if none).
func (b *Backend) Fallback() backend.Backend { return b.fallback }

// SocketPath returns the rendezvous socket the backend listens on ("" with
// NoListen).
func (b *Backend) SocketPath() string {
	if b.ln == nil {
		return ""
	}
	return b.ln.Addr().String()
}

// LinkTo tells which link packets to dst use now: LinkShm, LinkConnecting,
// LinkFallback, LinkNone or LinkUntried.
func (b *Backend) LinkTo(dst netip.AddrPort) string {
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	b.mu.RLock()
	p := b.peers[dst]
	b.mu.RUnlock()
	if p == nil {
		return LinkUntried
	}
	switch p.state.Load() {
	case statePaired:
		return LinkShm
	case stateConnecting:
		return LinkConnecting
	}
	if b.fallback != nil {
		return LinkFallback
	}
	return LinkNone
}

// Peers returns the destinations paired now.
func (b *Backend) Peers() []netip.AddrPort {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var out []netip.AddrPort
	for a, p := range b.peers {
		if p.state.Load() == statePaired {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.AddrPort.Compare)
	return out
}

// Close ends every pairing (the peers see their rendezvous connections
// close), removes the rendezvous socket, closes the fallback and wakes a
// blocked Receive with an error wrapping backend.ErrBackendClosed. Closing
// twice is a no-op.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed.Swap(true) {
		b.mu.Unlock()
		return nil
	}
	close(b.stop)
	if b.ln != nil {
		b.ln.Close() // unlinks the socket
	}
	for c := range b.conns {
		c.Close() // each pairing's watcher tears it down
	}
	b.mu.Unlock()
	b.wg.Wait()
	b.stopBridge()
	b.wait.close() // wakes Serve
	return nil
}

// spawn runs f on a goroutine of the backend's group unless it is closing.
func (b *Backend) spawn(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() {
		return false
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f()
	}()
	return true
}

// now is the time in RetryAfter's terms.
func (b *Backend) now() int64 { return int64(time.Since(b.epoch)) }
