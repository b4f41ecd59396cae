// Package device is goroce's software RDMA device: it owns a packet backend,
// the port (GIDs, MTU, attributes), protection domains and memory regions,
// the table of queue pairs, the device's counters and its timers, and runs
// the receive loop that hands every valid packet to its queue pair.
//
// Receive path (one goroutine per device, run to completion):
//
//  1. Backend.Receive fills a batch of datagrams (recvmmsg, GRO).
//  2. Each packet is parsed in place (rocev2.Packet), its ICRC verdict
//     checked, its P_Key matched and its destination QP looked up in a
//     lock-free table.
//  3. The QP handles it inline: responder or completer, data placed into
//     memory regions, completions pushed to CQs; packets it answers with go
//     into the loop's TxBatch.
//  4. After the batch, the TxBatch goes out in one Backend.Send (sendmmsg,
//     GSO).
//
// Send path: a poster (PostSend, a timer, the receive loop) takes a TxBatch,
// the QP's requester builds packets straight into it, and Flush sends them.
package device

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/goroce/goroce/rocev2"
)

// QPHandler is what the device needs of a queue pair.
type QPHandler interface {
	// HandlePacket processes one packet addressed to the QP, inline on the
	// receive loop. pkt and its buffer are valid only during the call.
	// Packets sent in response go into tx.
	HandlePacket(pkt *rocev2.Packet, src netip.AddrPort, tx *TxBatch)
}

// Config configures a device.
type Config struct {
	// Name is the device name shown by tools (default "goroce0").
	Name string
	// Backend carries the packets. The device owns it and closes it.
	Backend rocev2.Backend
	// MaxMTU caps the port's active MTU below what the link allows (0: no cap).
	MaxMTU rocev2.MTU
}

// Device is a software RDMA device with one port.
type Device struct {
	name     string
	backend  rocev2.Backend
	local    netip.AddrPort
	mac      [6]byte
	gids     []GIDEntry
	attr     DeviceAttr
	port     PortAttr
	batch    int
	Counters Counters

	qps      qpTable
	mrs      mrTable
	atomicMu sync.Mutex // serializes atomics device-wide
	pdSeq    atomic.Uint32
	timers   *Timers
	// txFree holds idle TxBatches: a bounded free list that, unlike a
	// sync.Pool, the GC does not empty, so batches are not reallocated. A
	// mutex and a slice cost less per post than a channel send and receive.
	txMu   sync.Mutex
	txFree []*TxBatch

	// The receive path's state, used by whoever holds rxMu: the receive
	// goroutine, or with a Poller backend, a goroutine in Progress.
	rxMu    sync.Mutex
	rxBatch []rocev2.Datagram
	rxPkt   rocev2.Packet
	rxTx    *TxBatch
	// rxHeld is set while rxTx holds packets a Progress call held back
	// (see Progress); it is written under rxMu and read without it.
	rxHeld atomic.Bool
	hold   holdState
	sb     sendBatch // posts during a poller run (batch.go)
	hooks  rxHooks   // see OnReceiveBatch
	// inHooks is set while the receive goroutine runs the end hooks:
	// Progress and Release then do nothing (see receiveBatch).
	inHooks atomic.Bool

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
	d.mac = macFor(d.local.Addr())
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
		LocalCAAckDelay: LocalCAAckDelay, PhysPortCnt: 1, NumCompVectors: runtime.GOMAXPROCS(0),
		AtomicCap: "ATOMIC_HCA",
	}
	d.hold.tm.Init(d.onHoldTick)
	register(d)
	d.qps.init()
	d.txFree = make([]*TxBatch, 0, 2*runtime.GOMAXPROCS(0)+2)
	d.rxBatch = make([]rocev2.Datagram, d.batch)
	d.rxTx = newTxBatch(d)
	d.sb.tx = newTxBatch(d)
	d.sb.tx.shared = true
	go d.receiveLoop()
	return d, nil
}

// Name returns the device name.
func (d *Device) Name() string { return d.name }

// LocalAddr returns the address and UDP port the device listens on.
func (d *Device) LocalAddr() netip.AddrPort { return d.local }

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

// BatchSize is the number of packets a TxBatch holds before it flushes.
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
// backend.
func (d *Device) Close() error {
	var err error
	d.closeOnce.Do(func() {
		unregister(d)
		d.stopPublishing()
		// Send the last ACKs a poller's Progress held back, waiting for
		// the receive goroutine if it is running: Release would leave them
		// to it, and its flush could come after the backend is closed (the
		// peer would then wait for those ACKs in vain).
		d.rxMu.Lock()
		d.releaseLocked()
		d.rxMu.Unlock()
		err = d.backend.Close()
		<-d.rxDone
		d.timers.Close()
	})
	return err
}

func (d *Device) receiveLoop() {
	defer close(d.rxDone)
	if p, ok := d.backend.(rocev2.Poller); ok {
		for {
			if err := p.WaitReadable(); err != nil {
				if errors.Is(err, rocev2.ErrBackendClosed) {
					return
				}
				d.Counters.LinkDowned.Add(1)
				continue
			}
			d.receiveBatch(p, 0)
		}
	}
	for {
		n, err := d.backend.Receive(d.rxBatch)
		if err != nil {
			if errors.Is(err, rocev2.ErrBackendClosed) {
				return
			}
			d.Counters.LinkDowned.Add(1)
			continue
		}
		d.receiveBatch(nil, n)
	}
}

// pollLocked receives and handles everything waiting; it reports whether
// there was anything. The packets they call for wait in rxTx (it sends
// itself when full); the caller flushes it or holds it back. The caller
// holds rxMu.
func (d *Device) pollLocked(p rocev2.Poller) bool {
	any := false
	for {
		n, err := p.TryReceive(d.rxBatch)
		if err != nil || n == 0 {
			return any
		}
		any = true
		d.deliverBatch(n)
		if n < len(d.rxBatch) {
			return any
		}
		d.rxTx.Flush() // more to come: do not hold these back behind it
	}
}

func (d *Device) deliverBatch(n int) {
	for i := range d.rxBatch[:n] {
		d.deliver(&d.rxBatch[i], &d.rxPkt, d.rxTx)
	}
}

// releaseLocked sends whatever rxTx holds. The caller holds rxMu.
func (d *Device) releaseLocked() {
	d.rxTx.Flush()
	d.rxHeld.Store(false)
}

// Progress handles, on the calling goroutine, whatever packets are waiting,
// and reports whether there were any. A CQ calls it when a poll finds it
// empty, so an application that busy-polls drives the device itself rather
// than waiting for the receive goroutine to be scheduled. It never blocks:
// if another goroutine is receiving, or the receive goroutine is running
// its batch's end hooks (which will receive again next), it returns false
// at once. On a
// backend that cannot receive without blocking (not a rocev2.Poller) it
// does nothing.
//
// The packets the received ones call for (ACKs, READ responses) are held
// back, not sent, until the caller's next device call: the next Progress,
// Release (CQ.Arm calls it, and CQ.Poll when Progress gave it nothing to
// return), a post (PutTx sends them in the same system call as the posted
// packets: after a single packet, before a burst), Close, or the receive
// goroutine's next run; and
// Progress on another device of the process, or a backstop timer, if none
// of those comes (see hold.go). The caller got its completions first, so
// its reply leaves before the ACK instead of one system call later: on a
// ping-pong the ACK's send is off the critical path.
func (d *Device) Progress() bool {
	p, ok := d.backend.(rocev2.Poller)
	if !ok || d.inHooks.Load() || !d.rxMu.TryLock() {
		return false
	}
	defer d.rxMu.Unlock()
	d.releaseOthers()
	d.releaseLocked() // what the last call held back
	any := d.pollLocked(p)
	if d.rxTx.Len() > 0 {
		d.rxHeld.Store(true)
		d.noteHold()
	}
	return any
}

// Release sends the packets a Progress call held back. If another
// goroutine is receiving, or the receive goroutine is running its batch's
// end hooks (OnReceiveBatch), it returns at once: that goroutine sends
// them.
func (d *Device) Release() {
	if d.rxHeld.Load() && !d.inHooks.Load() && d.rxMu.TryLock() {
		d.releaseLocked()
		d.rxMu.Unlock()
	}
}

// deliver validates one datagram and hands it to its QP.
func (d *Device) deliver(dg *rocev2.Datagram, pkt *rocev2.Packet, tx *TxBatch) {
	if dg.Drop != 0 {
		d.countDrop(dg.Drop)
		return
	}
	if err := pkt.Parse(dg.Buf); err != nil {
		if pe, ok := err.(rocev2.ParseError); ok {
			d.countDrop(pe)
		}
		return
	}
	switch dg.ICRC {
	case rocev2.ICRCOK:
		if dg.IPv4ID != 0 {
			d.Counters.RcvdICRCIDInferred.Add(1)
		}
	case rocev2.ICRCBad:
		d.Counters.Dropped[rocev2.ErrICRC].Add(1)
		return
	case rocev2.ICRCUnverifiable:
		d.Counters.RcvdICRCUnverifiable.Add(1)
	default:
		if !d.checkICRC(dg) {
			d.Counters.Dropped[rocev2.ErrICRC].Add(1)
			return
		}
	}
	bth := pkt.BTH()
	// P_Key: our one table entry is the default full-member key 0xFFFF;
	// a packet matches when the low 15 bits agree (IBTA 10.9.3).
	if bth.PKey()&0x7FFF != 0x7FFF {
		d.Counters.RcvdPKeyErr.Add(1)
		return
	}
	h := d.qps.lookup(bth.DestQP())
	if h == nil {
		d.Counters.RcvdUnknownQP.Add(1)
		return
	}
	d.Counters.RcvdPkts.Add(1)
	h.HandlePacket(pkt, dg.Addr, tx)
}

// countDrop counts a datagram rejected for reason e. A reason outside the
// table (a backend's bug) is counted as rcvd_bad_datagram rather than
// indexing out of bounds.
func (d *Device) countDrop(e rocev2.ParseError) {
	if int(e) >= len(d.Counters.Dropped) || e == 0 {
		e = rocev2.ErrDatagram
	}
	d.Counters.Dropped[e].Add(1)
}

// checkICRC verifies a packet whose backend left the ICRC unchecked.
func (d *Device) checkICRC(dg *rocev2.Datagram) bool {
	fl := rocev2.NewFlow(dg.Addr, d.local)
	if fl.IsIPv6() {
		return fl.VerifyICRC(dg.Buf)
	}
	id, ok := fl.InferIPv4ID(dg.Buf)
	if ok && id != 0 {
		d.Counters.RcvdICRCIDInferred.Add(1)
	}
	return ok
}

// GetTx returns an empty TxBatch; PutTx flushes it and gives it back.
func (d *Device) GetTx() *TxBatch {
	d.txMu.Lock()
	if n := len(d.txFree); n > 0 {
		tx := d.txFree[n-1]
		d.txFree[n-1] = nil
		d.txFree = d.txFree[:n-1]
		d.txMu.Unlock()
		return tx
	}
	d.txMu.Unlock()
	return newTxBatch(d)
}

// PutTx flushes tx and returns it to the free list. Packets a Progress
// call held back go out in the same send (see TxBatch.flushWith).
func (d *Device) PutTx(tx *TxBatch) {
	if d.rxHeld.Load() && d.rxMu.TryLock() {
		tx.flushWith(d.rxTx)
		d.rxHeld.Store(false)
		d.rxMu.Unlock()
	} else {
		tx.Flush()
	}
	d.txMu.Lock()
	if len(d.txFree) < cap(d.txFree) { // else enough idle batches already
		d.txFree = append(d.txFree, tx)
	}
	d.txMu.Unlock()
}
