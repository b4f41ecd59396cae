package backend

import (
	"errors"
	"net/netip"
	"os"
	"time"

	"github.com/goroce/goroce/rocev2"
)

// Backend moves RoCEv2 packets (UDP payloads, BTH through ICRC) between a
// device and the network. It is batch-first, like wireguard-go's conn.Bind:
// every call moves a slice of datagrams so that an implementation can use
// sendmmsg/recvmmsg, UDP GSO/GRO or a packet ring, and a device never makes
// a system call per packet.
//
// Send and Receive may be called concurrently with each other; Send may be
// called from several goroutines; Receive is called by one goroutine at a
// time (the device's receive loop).
type Backend interface {
	// Send transmits pkts in order. It reads each Buf only during the call
	// and keeps no reference to it (a backend that must hold a packet, for
	// a neighbour not yet resolved or a fault injector's delay, copies it).
	// On return each packet's Buf holds it sealed (the last four bytes are
	// the ICRC) for the IP and UDP headers it travels in, which only the
	// backend knows (the IPv4 ID of a GSO segment, a per-QP source port),
	// and its Wire says what those headers were. The caller may then reuse
	// the buffers.
	Send(pkts []Outgoing) error

	// Receive blocks until at least one packet arrives and fills pkts[:n].
	// Each Buf points into memory the backend owns, valid until the next
	// Receive or TryReceive; the backend never changes it before then.
	// Receive returns an error wrapping ErrBackendClosed after Close.
	Receive(pkts []Incoming) (n int, err error)

	// LocalAddr is the address and UDP port the backend sends from and
	// receives on.
	LocalAddr() netip.AddrPort

	// BatchSize is the number of datagrams a Send or Receive moves at most
	// in one system call; callers size their batches to it.
	BatchSize() int

	// LinkMTU is the IP MTU of the path (1500 for Ethernet, 65535 for lo):
	// the device derives the port's active IB MTU from it.
	LinkMTU() int

	// Close stops the backend and unblocks Receive.
	Close() error
}

// Outgoing is one packet of a Send batch. The caller owns it and its Buf;
// Send fills in Wire.
type Outgoing struct {
	// Buf holds the packet, BTH through ICRC; Send seals the ICRC in place.
	Buf []byte
	// Dst is where the packet goes.
	Dst netip.AddrPort
	// Sender is the QP that built the packet and what its address vector
	// asks of the headers (see Sender).
	Sender Sender
	// Wire is set by Send: the headers the packet was sealed for.
	Wire Wire
}

// Wire is what a backend chose of the IP and UDP headers a packet left in,
// which a capture needs to frame it as it travelled.
type Wire struct {
	// IPv4ID is the IPv4 identification (0 over IPv6).
	IPv4ID uint16
	// SrcPort is the UDP source port, set by a backend that chooses one
	// per QP (afpacket); 0 means the port of LocalAddr.
	SrcPort uint16
	// Unsealed is set for a packet the backend holds to send later
	// through another backend whose headers it cannot know yet (a fault
	// injector's delay): Buf is not sealed, and the inner backend seals
	// its own copy when the packet leaves.
	Unsealed bool
}

// Incoming is one packet Receive or TryReceive hands out. The backend
// owns Buf (see Receive); the rest is the caller's copy.
type Incoming struct {
	// Buf holds the packet, BTH through ICRC.
	Buf []byte
	// Src is who sent it.
	Src netip.AddrPort
	// IPv4ID is the IPv4 identification the packet travelled with, when
	// the backend knows it (ICRC Matches over IPv4).
	IPv4ID uint16
	// ICRC is the backend's verdict on the ICRC.
	ICRC ICRCStatus
	// TTL and TOS are the IPv4 TTL and TOS (for IPv6: the hop limit and
	// traffic class) the packet arrived with, when the backend learns them
	// (0 otherwise). Only UD receives use them: their completions carry
	// the IP header in front of the payload.
	TTL, TOS uint8
	// Drop, when not zero, is why the backend itself rejects the datagram
	// before anyone parses it (rocev2.ErrDatagram: empty, cut short by the
	// receive buffer, a length that lies; rocev2.ErrSource: a sender
	// address of the wrong family). The device counts it under that
	// reason and looks no further: Buf may be empty and Src invalid.
	Drop rocev2.ParseError
}

// Sender is what a backend that builds the IP and UDP headers itself
// (afpacket) needs to know of the QP that sent a packet: rxe derives the
// UDP source port and the IPv6 flow label from the QP's number and its
// address vector, and takes the hop limit and traffic class from the
// vector (see SourcePort). A backend on a UDP socket, whose kernel builds
// the headers, ignores it.
type Sender struct {
	// QPN is the sending QP's number (0: not sent by a QP).
	QPN uint32
	// FlowLabel is the address vector's IPv6 flow label; 0 means the one
	// ib_core derives from the two QP numbers (CalcFlowLabel).
	FlowLabel uint32
	// HopLimit is the IPv4 TTL or IPv6 hop limit; 0 means 64.
	HopLimit uint8
	// TrafficClass is the IPv4 TOS or IPv6 traffic class (DSCP and ECN).
	TrafficClass uint8
}

// NIC is implemented by backends that own a network interface (afpacket):
// a device takes its MAC from the interface, and with it the node GUID and
// the link-local GID at index 0, instead of deriving a MAC from its address.
type NIC interface {
	// HardwareAddr returns the interface's MAC address.
	HardwareAddr() [6]byte
}

// HardwareAddrOf returns the MAC of the interface b or a backend it decorates owns
// (decorators say whom they decorate with an Unwrap method, as pcap.Tap
// does), and false when none owns one.
func HardwareAddrOf(b Backend) ([6]byte, bool) {
	for range 16 { // decorators do not nest deeper; a cycle must not hang
		switch v := b.(type) {
		case NIC:
			return v.HardwareAddr(), true
		case interface{ decorated() Backend }: // KeepPolling's, of every kind
			b = v.decorated()
		case interface{ Unwrap() Backend }:
			b = v.Unwrap()
		default:
			return [6]byte{}, false
		}
		if b == nil {
			break
		}
	}
	return [6]byte{}, false
}

// ICRCStatus is what a backend could establish about a received ICRC.
type ICRCStatus uint8

const (
	// ICRCUnchecked: the backend did not look; the device must verify.
	ICRCUnchecked ICRCStatus = iota
	// ICRCOK: the ICRC matches the headers the packet arrived in.
	ICRCOK
	// ICRCBad: the ICRC does not match; the packet must be dropped.
	ICRCBad
	// ICRCVerified: the ICRC matches the IP header the packet arrived in,
	// which the backend saw whole (afpacket): all 32 bits checked over the
	// real IPv4 ID, nothing inferred.
	ICRCVerified
)

// Matches reports whether the backend found the ICRC right (ICRCOK or
// ICRCVerified).
func (s ICRCStatus) Matches() bool { return s == ICRCOK || s == ICRCVerified }

func (s ICRCStatus) String() string {
	switch s {
	case ICRCOK:
		return "ok"
	case ICRCBad:
		return "bad"
	case ICRCVerified:
		return "verified"
	}
	return "unchecked"
}

// ErrBackendClosed is returned by backends after Close.
var ErrBackendClosed = errors.New("rocev2: backend closed")

// Poller is implemented by backends that can receive without blocking.
// With it, the device's receive goroutine receives under a lock that any
// goroutine may take: an application that busy-polls a CQ then drives the
// device itself (device.Poller), instead of waiting for the runtime to
// schedule the receive goroutine — which, with every P spinning, can take
// a scheduler time slice (10 ms).
type Poller interface {
	// TryReceive is Receive without blocking: it returns 0 when nothing
	// is waiting.
	TryReceive(pkts []Incoming) (n int, err error)
	// Serve is the receive goroutine's loop. It calls drain whenever
	// packets may be waiting, at once and then after each readiness
	// notification, until the backend is closed; then it returns an error
	// wrapping ErrBackendClosed. drain takes what waits (TryReceive) and
	// reports whether it may have left some (it filled its batch): then it
	// is called again at once; otherwise Serve parks until more arrive.
	// So no system call asks whether packets wait (no MSG_PEEK), and none
	// is spent on a receive that finds nothing after one that emptied the
	// socket: a wait ends on the readiness the runtime's poller reports.
	Serve(drain func() (more bool)) error
}

// A BusyPoller is a Poller whose TryReceive costs no system call (it looks
// at rings in shared memory), so that a goroutine waiting for data may
// call it in a loop for a while instead of sleeping until the receive
// goroutine hands the data over (Linux's busy polling of a socket). While
// a goroutine busy-polls, from BeginBusyPoll to EndBusyPoll, the backend
// tells its peers that a receiver is awake, so they wake nobody (no
// doorbell, no system call). EndBusyPoll tells them that the receiver
// sleeps again and reports whether something arrived meanwhile, which the
// caller must then take (TryReceive) before it calls EndBusyPoll again:
// so no packet waits for a wake-up that was never sent. The caller
// serializes these calls with its TryReceive calls.
type BusyPoller interface {
	Poller
	BeginBusyPoll()
	EndBusyPoll() (arrived bool)
}

// A Lendable is a Poller whose receive loop any goroutine may run for a
// while, so that the goroutine that waits for data is the one the
// runtime's poller wakes when it arrives: it receives, runs what the
// packets fire, finds its data and returns, one wake-up where the receive
// goroutine would take two (its own, then the reader's). The device lends
// its receive loop this way (device.Device.WaitOn); one goroutine at a
// time serves.
type Lendable interface {
	Poller
	// ServeUntil is Serve that also returns, with nil, once done reports
	// true (it is asked after every drain and before every sleep) or
	// Interrupt is called.
	ServeUntil(drain, done func() (ok bool)) error
	// Interrupt makes the ServeUntil in progress, or else the next one,
	// return soon: what its done reports has changed without a packet.
	Interrupt()
}

// ReadDeadliner is a descriptor a receive loop sleeps on in Go's runtime
// poller (a socket, an epoll set's file).
type ReadDeadliner interface{ SetReadDeadline(time.Time) error }

// InterruptRead is Interrupt for a backend whose ServeUntil sleeps in the
// runtime poller's read of f: it moves f's read deadline into the past,
// which ends that read, or else the next one, with os.ErrDeadlineExceeded
// (see Interrupted).
func InterruptRead(f ReadDeadliner) { f.SetReadDeadline(longAgo) }

// Interrupted reports whether err is what InterruptRead made a read of f
// return, and if so re-opens f for the next read: the caller returns nil
// from ServeUntil, whose caller looks again at its done.
func Interrupted(f ReadDeadliner, err error) bool {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	f.SetReadDeadline(time.Time{})
	return true
}

// longAgo is a deadline that has passed.
var longAgo = time.Unix(1, 0)

// KeepPolling is for backends that decorate another (a capture tap, a fault
// injector): it returns b, the decorator, able to poll when inner can. Its
// Serve serves inner, and its TryReceive receives from inner and hands
// what it got to received, which must do to the packets what b's Receive
// does. When inner cannot poll, it returns b as it is; when inner can be
// busy-polled or lent, so can b.
func KeepPolling(b, inner Backend, received func([]Incoming)) Backend {
	p, ok := inner.(Poller)
	if !ok {
		return b
	}
	d := &pollingDecorator{Backend: b, inner: p, received: received}
	bp, busy := inner.(BusyPoller)
	lp, lend := inner.(Lendable)
	switch {
	case busy && lend:
		return &busyLendingDecorator{&busyPollingDecorator{d, bp}, lender{lp}}
	case lend:
		return &lendingDecorator{d, lender{lp}}
	case busy:
		return &busyPollingDecorator{d, bp}
	}
	return d
}

// lender passes a decorated Lendable's methods through.
type lender struct{ lend Lendable }

func (p lender) ServeUntil(drain, done func() bool) error { return p.lend.ServeUntil(drain, done) }
func (p lender) Interrupt()                               { p.lend.Interrupt() }

type lendingDecorator struct {
	*pollingDecorator
	lender
}

type busyLendingDecorator struct {
	*busyPollingDecorator
	lender
}

// pollingDecorator is a decorating Backend that polls through its inner one.
type pollingDecorator struct {
	Backend
	inner    Poller
	received func([]Incoming)
}

type busyPollingDecorator struct {
	*pollingDecorator
	busy BusyPoller
}

func (p *busyPollingDecorator) BeginBusyPoll()    { p.busy.BeginBusyPoll() }
func (p *busyPollingDecorator) EndBusyPoll() bool { return p.busy.EndBusyPoll() }

func (p *pollingDecorator) Serve(drain func() bool) error { return p.inner.Serve(drain) }

// decorated is the decorator KeepPolling was given (HardwareAddrOf looks
// through it).
func (p *pollingDecorator) decorated() Backend { return p.Backend }

func (p *pollingDecorator) TryReceive(pkts []Incoming) (int, error) {
	n, err := p.inner.TryReceive(pkts)
	p.received(pkts[:n])
	return n, err
}
