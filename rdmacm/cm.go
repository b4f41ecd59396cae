package rdmacm

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/goroce/goroce/rdmacm/cmwire"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
)

// Defaults of rdma_cm on RoCE (drivers/infiniband/core/cma.c).
const (
	// DefaultPacketLifeTime is CMA_IBOE_PACKET_LIFETIME of Linux 6.1 (6.12
	// has 16): a path's packet life time, from which the QP's ACK timeout
	// and every CM wait derive.
	DefaultPacketLifeTime = 18
	// DefaultCMResponseTimeout is CMA_CM_RESPONSE_TIMEOUT: how long the
	// peer's CM may take to answer (4.096 µs × 2^20 ≈ 4.3 s).
	DefaultCMResponseTimeout = 20
	// DefaultMaxCMRetries is CMA_MAX_CM_RETRIES.
	DefaultMaxCMRetries = 15
	// DefaultMaxIDs bounds the connections (and SIDR exchanges, and
	// timewaits) a CM holds: what a flood can make it keep.
	DefaultMaxIDs = 65536
	// mraServiceTimeout is what rdma_cm's delayed MRA (CMA_CM_MRA_SETTING)
	// says when a duplicate REQ or REP makes ib_cm send it.
	mraServiceTimeout = 24
)

// Config configures a CM.
type Config struct {
	// PacketLifeTime is the packet life time of the paths it builds
	// (0: DefaultPacketLifeTime), as 4.096 µs × 2^n.
	PacketLifeTime uint8
	// CMResponseTimeout is the response time its REQs ask of the peer and
	// promise (0: DefaultCMResponseTimeout).
	CMResponseTimeout uint8
	// MaxCMRetries is how often its REQs, REPs and DREQs are resent
	// (0: DefaultMaxCMRetries; at most 15, a 4-bit field).
	MaxCMRetries uint8
	// MaxIDs bounds the CM's connections (0: DefaultMaxIDs).
	MaxIDs int
	// PeerRoCEPort returns the UDP port a peer's device receives on, given
	// the source of the peer's MAD (nil: 4791 for a source port in RoCE's
	// source range 0xC000 and up, as rxe and goroce's AF_PACKET backend
	// send from, else the source port, as goroce's UDP backend sends from
	// the port it receives on).
	PeerRoCEPort func(src netip.AddrPort) uint16
}

func (cfg *Config) fill() error {
	if cfg.PacketLifeTime == 0 {
		cfg.PacketLifeTime = DefaultPacketLifeTime
	}
	if cfg.CMResponseTimeout == 0 {
		cfg.CMResponseTimeout = DefaultCMResponseTimeout
	}
	if cfg.MaxCMRetries == 0 {
		cfg.MaxCMRetries = DefaultMaxCMRetries
	}
	if cfg.MaxIDs == 0 {
		cfg.MaxIDs = DefaultMaxIDs
	}
	if cfg.PeerRoCEPort == nil {
		cfg.PeerRoCEPort = func(src netip.AddrPort) uint16 { return peerPort(src.Port()) }
	}
	switch {
	case cfg.PacketLifeTime > 30:
		return fmt.Errorf("rdmacm: packet life time %d out of range 1..30", cfg.PacketLifeTime)
	case cfg.CMResponseTimeout > 31:
		return fmt.Errorf("rdmacm: CM response timeout %d out of range 1..31", cfg.CMResponseTimeout)
	case cfg.MaxCMRetries > 15:
		return fmt.Errorf("rdmacm: max CM retries %d out of range 1..15 (a 4-bit field of the REQ)", cfg.MaxCMRetries)
	}
	return nil
}

// CM is a connection manager on one device: Linux's ib_cm and rdma_cm for
// the device's port, speaking MADs through QP 1. Listeners and dialers of
// the package use it; one CM per device (it takes QP 1).
//
// Goroutines: one, the CM's own, takes the MADs the receive path queues
// and the timer's kicks; API calls run on their callers'. CM.mu guards all
// state; what must not run under it (QP state changes, which may raise
// completion callbacks, and events to the application) runs after it is
// released, in order (after).
type CM struct {
	dev       *device.Device
	cfg       Config
	removeGSI func()
	// Counters are the CM's counters (see Counters).
	Counters Counters

	rx    chan rxMAD
	kick  chan struct{}
	done  chan struct{}
	ended chan struct{}
	timer device.Timer

	mu         sync.Mutex
	closed     bool
	ids        map[uint32]*cmID
	remoteIDs  map[remoteKey]*cmID
	remoteQPNs map[remoteKey]*cmID
	sidrs      map[sidrKey]*cmID
	timed      map[*cmID]struct{}
	listeners  map[uint64]*Listener
	ports      map[portKey]int // rdma_cm ports in use, with a use count
	nextIdx    uint32
	idXor      uint32
	hiTID      uint32
	psn        rocev2.PSN
	armed      bool
	armedAt    time.Time
	push       bool // the outbox has something due (sendMAD)
	scratch    [cmwire.MADLen]byte
	after      []func() // to run once mu is released (unlock)
}

// New starts a CM on dev: it registers the GSI handler for QP 1 and starts
// the CM's goroutine. Close stops both.
func New(dev *device.Device, cfg Config) (*CM, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	c := &CM{
		dev: dev, cfg: cfg,
		rx: make(chan rxMAD, rxQueueLen), kick: make(chan struct{}, 1),
		done: make(chan struct{}), ended: make(chan struct{}),
		ids: map[uint32]*cmID{}, remoteIDs: map[remoteKey]*cmID{}, remoteQPNs: map[remoteKey]*cmID{},
		sidrs: map[sidrKey]*cmID{}, timed: map[*cmID]struct{}{}, listeners: map[uint64]*Listener{},
		ports: map[portKey]int{}, idXor: randomOperand(), hiTID: randomOperand() | 1,
	}
	c.timer.Init(c.onTimer)
	remove, err := dev.SetGSI(gsi{c})
	if err != nil {
		return nil, fmt.Errorf("rdmacm: %w", err)
	}
	c.removeGSI = remove
	go c.run()
	return c, nil
}

// Device returns the CM's device.
func (c *CM) Device() *device.Device { return c.dev }

// ErrClosed is returned by the operations of a closed CM.
var ErrClosed = errors.New("rdmacm: the connection manager is closed")

// Close stops the CM: QP 1 is given back to the device, the goroutine
// ends, listeners close, and connections end without a word to their
// peers (as when a host goes away; Disconnect them first to say goodbye).
// Their QPs move to ERR. It does not close the device.
func (c *CM) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	for _, l := range c.listeners {
		l.closeLocked()
	}
	for _, id := range c.ids {
		c.cancel(id)
		c.notify(id, evClosed, nil)
	}
	c.unlock()
	c.removeGSI()
	c.dev.Timers().Stop(&c.timer)
	close(c.done)
	<-c.ended
	return nil
}

func (c *CM) run() {
	defer close(c.ended)
	for {
		select {
		case <-c.done:
			return
		case m := <-c.rx:
			c.mu.Lock()
			if !c.closed {
				c.receive(cmwire.MAD(m.mad[:]), m.from)
			}
			c.unlock()
		case <-c.kick:
			c.mu.Lock()
			if !c.closed {
				c.expire()
			}
			c.unlock()
		}
	}
}

// lock takes c.mu for an API call; it fails once the CM is closed.
func (c *CM) lock() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// unlock releases c.mu, then sends what the locked section built and runs
// what it deferred, in order. Deferred work may lock again.
func (c *CM) unlock() {
	push, after := c.push, c.after
	c.push, c.after = false, nil
	c.mu.Unlock()
	if push {
		c.dev.Push()
	}
	for _, f := range after {
		f()
	}
}

// later runs f once c.mu is released (c.mu held).
func (c *CM) later(f func()) { c.after = append(c.after, f) }
