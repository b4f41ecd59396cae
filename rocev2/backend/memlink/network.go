package memlink

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
)

// Defaults for the zero values of Config.
const (
	DefaultQueueLen  = 4096
	DefaultMTU       = 65536 // Linux lo: a device derives IB MTU 4096 from it
	DefaultBatchSize = 64
)

// firstEphemeralPort is where Attach starts looking for a free port when
// asked for port 0 (the IANA dynamic range).
const firstEphemeralPort = 49152

// Config sets the properties of every backend attached to a Network.
type Config struct {
	// QueueLen is each backend's receive queue, in packets. A packet that
	// finds it full is dropped, like a NIC whose ring is full.
	QueueLen int
	// MTU is the IP MTU backends report, and the largest IP packet (UDP
	// payload plus IP and UDP headers) the network carries.
	MTU int
	// BatchSize is what backends report as their batch size.
	BatchSize int
}

func (c Config) withDefaults() Config {
	if c.QueueLen <= 0 {
		c.QueueLen = DefaultQueueLen
	}
	if c.MTU <= 0 {
		c.MTU = DefaultMTU
	}
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	return c
}

// Network connects the backends attached to it.
type Network struct {
	cfg Config

	mu    sync.RWMutex // protects ports
	ports map[netip.AddrPort]*Backend

	sent, delivered, noRoute, queueFull, tooBig atomic.Uint64
}

// Stats counts what happened to the packets sent on a Network.
type Stats struct {
	Sent      uint64 // packets handed to Send with a valid shape
	Delivered uint64 // appended to a receiver's queue
	NoRoute   uint64 // dropped: no backend attached at the destination
	QueueFull uint64 // dropped: the receiver's queue was full
	TooBig    uint64 // dropped: larger than the MTU
}

// NewNetwork returns an empty network with the default Config.
func NewNetwork() *Network { return NewNetworkConfig(Config{}) }

// NewNetworkConfig returns an empty network whose backends have cfg's
// properties.
func NewNetworkConfig(cfg Config) *Network {
	return &Network{cfg: cfg.withDefaults(), ports: make(map[netip.AddrPort]*Backend)}
}

// Stats returns the network's counters.
func (n *Network) Stats() Stats {
	return Stats{
		Sent: n.sent.Load(), Delivered: n.delivered.Load(), NoRoute: n.noRoute.Load(),
		QueueFull: n.queueFull.Load(), TooBig: n.tooBig.Load(),
	}
}

var errAddrInUse = errors.New("memlink: address in use")

// Attach returns a backend that sends from and receives at addr. The address
// must be specific (it is covered by the ICRC); port 0 picks a free port
// from 49152 up. Close detaches the backend and frees the address.
func (n *Network) Attach(addr netip.AddrPort) (*Backend, error) {
	a := addr.Addr().Unmap()
	if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() {
		return nil, fmt.Errorf("memlink: attach %v: need a unicast address", addr)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	port := addr.Port()
	if port == 0 {
		for port = firstEphemeralPort; port != 0; port++ {
			if n.ports[netip.AddrPortFrom(a, port)] == nil {
				break
			}
		}
		if port == 0 {
			return nil, fmt.Errorf("memlink: attach %v: no free port", addr)
		}
	}
	local := netip.AddrPortFrom(a, port)
	if n.ports[local] != nil {
		return nil, fmt.Errorf("memlink: attach %v: %w", local, errAddrInUse)
	}
	b := newBackend(n, local)
	n.ports[local] = b
	return b, nil
}

// lookup returns the backend attached at addr (normalized), or nil.
func (n *Network) lookup(addr netip.AddrPort) *Backend {
	n.mu.RLock()
	b := n.ports[addr]
	n.mu.RUnlock()
	return b
}

func (n *Network) detach(b *Backend) {
	n.mu.Lock()
	if n.ports[b.local] == b {
		delete(n.ports, b.local)
	}
	n.mu.Unlock()
}
