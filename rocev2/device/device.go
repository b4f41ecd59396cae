// Package device is goroce's software RDMA device: it owns a packet backend,
// the port (GIDs, MTU, attributes), protection domains and memory regions,
// the table of queue pairs, the device's counters and its timers, the
// receive path that hands every valid packet to its queue pair
// (receive.go), and the outbox where every outgoing packet waits until it
// is sent (outbox.go).
//
// Who runs what:
//
//	goroutine            runs                                   locks, outer to inner
//	─────────            ────                                   ─────────────────────
//	receive (one)        receive batches, their end hooks       rxMu → QP → outbox
//	a Poller's caller    receive (Poller.Poll, TryLock only)    rxMu → QP → outbox
//	a busy poller        receive batches (BusyPoll, TryLock)    rxMu → QP → outbox
//	a lender             receive batches (WaitOn, lend.go)      rxMu → QP → outbox
//	a poster             PostSend and friends                   QP → outbox
//	timers (one)         retransmit/RNR timers, the backstop    QP → outbox; outbox
//	a pool's pollers     completion runs (BeginRun/EndRun)      QP → outbox
//
// Callbacks a queue pair raises (CQ events, async events) run after it has
// released its lock, so they may call back into the same QP.
package device

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

// QPHandler is what the device needs of a queue pair.
type QPHandler interface {
	// HandlePacket processes one packet addressed to the QP, inline on the
	// receive path, with the device's receive lock held. dg is the
	// datagram pkt was parsed from: its sender, and what the backend
	// learnt of the IP header it came in (the IPv4 ID, TTL, TOS). Both
	// are valid only during the call. Packets sent in response are built
	// into the device's Outbox. It reports whether the packet passed the
	// QP's own header checks (transport type, state, source address) and
	// reached its transport; one that did not, it has counted under the
	// reason (rcvd_pkts counts the others).
	HandlePacket(pkt *rocev2.Packet, dg *backend.Incoming) (delivered bool)
}

// DefaultHoldLimit is how long a packet may wait in the outbox at most
// when Config.HoldLimit is 0 (see Outbox).
const DefaultHoldLimit = time.Millisecond

// Config configures a device.
type Config struct {
	// Name is the device name shown by tools (default "goroce0").
	Name string
	// Backend carries the packets. The device owns it and closes it.
	Backend backend.Backend
	// MaxMTU caps the port's active MTU below what the link allows (0: no cap).
	MaxMTU rocev2.MTU
	// HoldLimit bounds how long a packet waits in the outbox for a run or
	// a poller's hold to end (the backstop; 0: DefaultHoldLimit). Tests
	// that check what a hold keeps set it long.
	HoldLimit time.Duration
	// DeferACKs lets the ACKs receive batches call for stay owed across
	// batches, so that one ACK covers several messages: a queue pair
	// sends its ACK once it owes one for a span of PSNs (qp's bound,
	// well inside a peer's send window and SMC-R's 16 send slots), or the
	// backstop sends it (HoldLimit). For a consumer whose peer does not
	// wait for each ACK before it sends again (SMC-R), it takes one
	// datagram off most requests. NAKs, READ and atomic responses are
	// never held.
	DeferACKs bool
}

// Device is a software RDMA device with one port.
type Device struct {
	name     string
	backend  backend.Backend
	local    netip.AddrPort
	mac      [6]byte
	gids     []GIDEntry
	attr     DeviceAttr
	port     PortAttr
	batch    int // datagrams per Backend call
	Counters Counters

	qps      qpTable
	gsi      gsiHook // QP 1's handler (gsi.go)
	mrs      mrTable
	atomicMu sync.Mutex // serializes atomics device-wide
	pdSeq    atomic.Uint32
	timers   *Timers
	out      *Outbox
	acks     acks
	// deferACKs: see Config.DeferACKs.
	deferACKs bool

	// The receive state, owned by whoever holds rxMu: the receive
	// goroutine, or with a Poller backend a goroutine in Poller.Poll.
	rxMu    sync.Mutex
	rxBatch []backend.Incoming
	rxPkt   rocev2.Packet
	hooks   rxHooks // see OnReceiveBatch

	busyPolling atomic.Bool        // a goroutine is in BusyPoll, and owns busy
	busyPoller  backend.BusyPoller // the backend, if it can be busy polled
	busy        busyState
	lend        lendState // who serves a backend.Lendable (lend.go)

	pubMu     sync.Mutex // guards pub and pubClosed
	pub       *publisher // the counter socket, see Publish
	pubClosed bool       // Close has stopped publishing for good

	closeOnce sync.Once
	rxDone    chan struct{}
}

// New starts a device on cfg.Backend.
func New(cfg Config) (*Device, error) {
	if cfg.Backend == nil {
		return nil, errors.New("device: new: no backend (use udp.Open or memlink for one)")
	}
	d := &Device{
		name:    cfg.Name,
		backend: cfg.Backend,
		local:   cfg.Backend.LocalAddr(),
		batch:   max(cfg.Backend.BatchSize(), 1),
		timers:  NewTimers(),
		rxDone:  make(chan struct{}),
	}
	if d.name == "" {
		d.name = "goroce0"
	}
	d.busyPoller, _ = cfg.Backend.(backend.BusyPoller) // asserted once, not per blocking Read
	d.mac = randomMAC()
	if mac, ok := backend.HardwareAddrOf(cfg.Backend); ok {
		d.mac = mac // a real interface's: GID 0 is its IPv6 link-local address
	}
	d.gids = []GIDEntry{
		{Index: 0, GID: linkLocalGID(d.mac), Type: GIDTypeRoCEv2},
		{Index: 1, GID: GIDFromAddr(d.local.Addr()), Type: GIDTypeRoCEv2},
	}
	active := rocev2.ActiveMTU(cfg.Backend.LinkMTU())
	if cfg.MaxMTU.Valid() && cfg.MaxMTU < active {
		active = cfg.MaxMTU
	}
	d.port = PortAttr{
		State: PortActive, MaxMTU: rocev2.MTU4096, ActiveMTU: active,
		GIDTableLen: len(d.gids), PKeyTableLen: MaxPKeys, MaxMsgSize: MaxMsgSize,
		LinkLayer: "Ethernet", LinkMTU: cfg.Backend.LinkMTU(),
	}
	guid := guidFromMAC(d.mac)
	d.attr = DeviceAttr{
		FWVer: "goroce 0.1", NodeGUID: guid, SysImageGUID: guid, MaxMRSize: MaxMsgSize,
		MaxQP: MaxQP, MaxQPWR: MaxQPWR, MaxSGE: MaxSGE, MaxCQ: 16384, MaxCQE: MaxCQE,
		MaxMR: MaxMR, MaxPD: 65536, MaxQPRdAtom: MaxQPRdAtom, MaxQPInitRdAtom: MaxQPRdAtom,
		MaxResRdAtom: MaxQPRdAtom * MaxQP, MaxInlineData: MaxInlineData, MaxPKeys: MaxPKeys,
		MaxSRQ: MaxSRQ, MaxSRQWR: MaxSRQWR, MaxSRQSGE: MaxSRQSGE,
		LocalCAAckDelay: LocalCAAckDelay, PhysPortCnt: 1, NumCompVectors: runtime.GOMAXPROCS(0),
		AtomicCap: "ATOMIC_HCA",
	}
	limit := cfg.HoldLimit
	if limit <= 0 {
		limit = DefaultHoldLimit
	}
	d.out = newOutbox(d, limit)
	d.deferACKs = cfg.DeferACKs
	register(d)
	d.qps.init()
	d.rxBatch = make([]backend.Incoming, d.batch)
	d.lend.init(d)
	go d.receiveLoop()
	return d, nil
}

// Name returns the device name.
func (d *Device) Name() string { return d.name }

// LocalAddr returns the address and UDP port the device listens on.
func (d *Device) LocalAddr() netip.AddrPort { return d.local }

// MAC returns the port's MAC address, from which the link-local GID and the
// node GUID derive: the interface's when the backend owns one
// (backend.NIC), else a random locally administered one.
func (d *Device) MAC() [6]byte { return d.mac }

// Attr returns the device attributes (ibv_query_device).
func (d *Device) Attr() DeviceAttr { return d.attr }

// Port returns the port attributes (ibv_query_port).
func (d *Device) Port() PortAttr { return d.port }

// GIDs returns the port's GID table: index 0 is the link-local GID, index 1
// the RoCEv2 GID of the bound address (IPv4-mapped for IPv4).
func (d *Device) GIDs() []GIDEntry { return append([]GIDEntry(nil), d.gids...) }

// GID returns the GID at index i.
func (d *Device) GID(i int) (GID, error) {
	if i < 0 || i >= len(d.gids) {
		return GID{}, fmt.Errorf("device %s: GID index %d out of range 0..%d (use 1 for the RoCEv2 GID of %v)", d.name, i, len(d.gids)-1, d.local.Addr())
	}
	return d.gids[i].GID, nil
}

// Timers returns the device's timer service.
func (d *Device) Timers() *Timers { return d.timers }

// BatchSize is the number of packets one Backend call moves (the outbox holds that many).
func (d *Device) BatchSize() int { return d.batch }

// AllocPD allocates a protection domain.
func (d *Device) AllocPD() *PD { return &PD{dev: d, id: d.pdSeq.Add(1)} }

// LookupKey returns the memory region a key names and whether the key is
// its rkey (false: its lkey). It returns nil for an unknown key.
func (d *Device) LookupKey(key uint32) (*MR, bool) { return d.mrs.lookup(key) }

// AddQP gives h a fresh QP number and routes packets for it to h.
func (d *Device) AddQP(h QPHandler) (uint32, error) { return d.qps.add(h) }

// RemoveQP stops routing packets to qpn. A packet already being handled
// finishes first.
func (d *Device) RemoveQP(qpn uint32) { d.qps.remove(qpn) }

// Close stops the receive loop, the timers and publishing, and closes the
// backend. What waits in the outbox is sent first: a receive batch in
// progress finishes (and sends its answers), then any hold ends. Do not
// call it from a completion handler: those run on the receive goroutine,
// which Close waits for.
func (d *Device) Close() error {
	var err error
	d.closeOnce.Do(func() {
		unregister(d)
		d.stopPublishing()
		d.rxMu.Lock()
		d.acks.release()
		d.acks.flush()
		d.Flush()
		d.rxMu.Unlock()
		err = d.backend.Close()
		d.lend.stop()
		<-d.rxDone
		d.timers.Close()
	})
	return err
}
