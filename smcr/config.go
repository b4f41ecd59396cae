package smcr

import (
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/device"
	"github.com/goroce/goroce/smcr/smcwire"
)

// Signalling says how a connection learns that its peer speaks SMC.
type Signalling uint8

const (
	// SignalAuto uses the TCP option when the process may (SignalOption),
	// and otherwise speaks SMC only to peers Config.PeerSpeaksSMC names
	// (SignalConfigured).
	SignalAuto Signalling = iota
	// SignalOption puts the SMC TCP option into the handshake with a
	// sock_ops BPF program (needs CAP_BPF and CAP_NET_ADMIN), as Linux
	// requires: a kernel peer then chooses SMC-R. Listen and Dial fail
	// when the program cannot be loaded.
	SignalOption
	// SignalConfigured sends no option (an unprivileged process cannot):
	// SMC is spoken only when Config.PeerSpeaksSMC says the peer does, on
	// both sides; everything else is plain TCP. A Linux peer never speaks
	// SMC in this mode, since it requires the option (so it is plain TCP
	// to a side without PeerSpeaksSMC, and closed by one with it).
	SignalConfigured
)

func (s Signalling) String() string {
	switch s {
	case SignalOption:
		return "tcp-option"
	case SignalConfigured:
		return "configured"
	}
	return "auto"
}

// CQDesign is how a device's link completions reach their handlers: it
// makes the completion design (a cq.Allocator) of each device a stack
// opens. PooledCQ is goroce's; a benchmark brings the design it compares
// it with (smc-bench brings Linux SMC-R's original one).
type CQDesign interface {
	// NewAllocator returns the design for dev. onOrphan takes the
	// completions that name no handler (a failed unsignaled WRITE, in a
	// design whose reservations tag none): the link they belong to is
	// taken down.
	NewAllocator(dev *device.Device, onOrphan func(*cq.WC)) cq.Allocator
	// String names the design (DeviceStats, errors).
	String() string
}

// PooledCQ takes each link's CQ from a cq.Pool that runs to completion on
// the device's receive goroutine, and names each work request's handler in
// its completion (ib_cqe): the design Linux moved SMC-R to ("transition to
// RDMA core CQ pooling"). The default.
var PooledCQ CQDesign = pooledCQ{}

type pooledCQ struct{}

func (pooledCQ) NewAllocator(dev *device.Device, onOrphan func(*cq.WC)) cq.Allocator {
	return cq.NewPool(cq.PoolConfig{Devices: []cq.Device{dev}, OnOrphan: onOrphan})
}

func (pooledCQ) String() string { return "pooled" }

// Config configures SMC-R listeners and dialers. The zero value works: a
// device on the TCP connection's local address, 64 KiB buffers, the CQ
// pool, the TCP option when the process may send it.
type Config struct {
	// Device is the local address of the goroce device the connections
	// use (its RoCEv2 GID is this address). Zero means the TCP
	// connection's local address. One device serves every listener and
	// dialer of the process that names it.
	Device netip.Addr
	// Devices, if set, are the addresses of several goroce devices (Device
	// must then be zero or the first): the first carries each link
	// group's first link and is the one the CLC handshake names; the
	// others are alternate paths, offered in the SMC-Rv2 GID list, for a
	// link group's second link (ADD_LINK), to which connections move when
	// a path fails.
	Devices []netip.Addr
	// DevicePort is the device's UDP port (0: 4791, RoCEv2's).
	DevicePort uint16

	// Signalling: see Signalling (default SignalAuto).
	Signalling Signalling
	// PeerSpeaksSMC, in SignalConfigured mode (or SignalAuto without
	// privileges), says the peer speaks SMC although no option said so:
	// the client sends a CLC Proposal, the server expects one. Both sides
	// must set it: a peer taken to speak SMC that answers with something
	// else is closed (a dial fails with ErrPeerNotSMC), as Linux closes a
	// peer that signalled SMC and then does not speak it.
	PeerSpeaksSMC bool

	// UEIDs are the user-defined EIDs SMC-Rv2 negotiates (as `smcr ueid
	// add` sets them on Linux). Without one only SMC-Rv1 is proposed; a
	// Linux peer on Soft-RoCE needs v2 (it has no RoCEv1 GIDs).
	UEIDs []string
	// NoV1 stops a client from offering SMC-R v1 beside v2.
	NoV1 bool

	// SendBufSize and RecvBufSize are each connection's send buffer and
	// RMB (the buffer the peer writes into) in bytes, rounded up to a
	// power of two from 16 KiB to 1 MiB (0: 64 KiB each, as Linux).
	SendBufSize, RecvBufSize int

	// CQ chooses the completion design (nil: PooledCQ).
	CQ CQDesign
	// MaxConnsPerLinkGroup caps the connections of one link group (0:
	// 255, SMC's maximum). The CQ-pooling experiment used 32.
	MaxConnsPerLinkGroup int
	// LinkGroupLinger is how long a server's link group without
	// connections stays up for reuse (0: DefaultLinkGroupLinger); a
	// client's stays longer (10 s, as Linux, or for a linger under 20 s
	// half of it but at least 1 s), so that the server ends it. WaitIdle
	// waits for it.
	LinkGroupLinger time.Duration
	// TestLinkInterval is how long a link stays idle before a TEST_LINK
	// checks it (0: 30 s, Linux's default; negative: never).
	TestLinkInterval time.Duration

	// HandshakeTimeout bounds each wait for a CLC message (0: 6 s, as
	// Linux; the whole handshake takes at most a few of them).
	HandshakeTimeout time.Duration
	// ProposalTimeout bounds a listener's wait for a client's whole CLC
	// Proposal, which a client sends as soon as it is connected (0: 2 s;
	// at most HandshakeTimeout): a connection that says nothing, or half
	// a message, is closed that soon.
	ProposalTimeout time.Duration
	// MaxPendingHandshakes bounds the handshakes a listener runs at once
	// (0: 256), and MaxHandshakesPerSource those of them for one client
	// IP address (0: 16). Connections beyond them wait their turn, the
	// addresses taking turns, so that connections that never finish their
	// CLC exchange hold up only those from their own address; at most
	// four times MaxPendingHandshakes wait (then the oldest of the address
	// with the most waiting is closed).
	MaxPendingHandshakes   int
	MaxHandshakesPerSource int
	// Hostname is sent in the v2 first-contact extension (0: os.Hostname).
	Hostname string

	// OnLink, if set, is told of every link of the link groups this
	// Config's handshakes create as it becomes active and as it goes
	// (failed, deleted, or with its group). It is called on the group's
	// goroutines, with no lock held, and must return soon.
	OnLink func(LinkEvent)

	// BusyPoll is how long a Read that finds nothing to read polls the
	// device from its own goroutine before it sleeps (Linux's busy_read,
	// SO_BUSY_POLL; 0: never, as Linux by default). The data then needs
	// no hand-off from the device's receive goroutine: lower latency for
	// a processor spent looking. Only a backend that receives without a
	// system call is polled (the shared-memory link); one Read per device
	// polls at a time.
	BusyPoll time.Duration

	// Backend, if set, opens the backend of the goroce device when a
	// listener or dialer of this Config opens it, on the device's address
	// and port (the AF_PACKET backend, the shared-memory link; nil: a UDP
	// socket, udp.Open).
	Backend func(addr netip.AddrPort) (backend.Backend, error)
	// WrapBackend, if set, wraps that backend (a capture: pcap.NewTap). A
	// device already open in the process is shared as it is.
	WrapBackend func(backend.Backend) backend.Backend

	// hooks are the tests' (export_test.go), never set otherwise.
	hooks testHooks
}

// testHooks are what a test sets on a Config to make its link groups
// misbehave as some peers do, or notice sooner.
type testHooks struct {
	// dropConfirmLinks is how many CONFIRM_LINK requests a client's link
	// group drops, as a Linux client drops one that arrives before it
	// waits for it.
	dropConfirmLinks int32
	// testLinkWait replaces how long TEST_LINK waits for its answer, and
	// relinkInterval how long a group that lost a link waits before it
	// adds one again (0: the defaults).
	testLinkWait, relinkInterval time.Duration
	// deviceDownHold replaces how long a device counts as down after its
	// address went (0: deviceDownHold), and addrAssigned the look at the
	// interfaces that tells whether it went (nil: addrAssigned).
	deviceDownHold time.Duration
	addrAssigned   func(netip.Addr) bool
	// holdFailover runs before a group moves the connections of a failed
	// link (it may block), testLinkAnswered after the group answered a
	// peer's TEST_LINK: a test orders the two sides' flows with them.
	holdFailover, testLinkAnswered func()
}

// Link group lingers. Linux keeps an unused link group 10 minutes: its
// kernel outlives any program. A goroce group lives in its process, whose
// end (WaitIdle before exit, so that peers see DELETE_LINK) would wait
// that long; so the default is short, and reconnecting after it costs a
// first contact (a few round trips), not a failure.
const (
	// DefaultLinkGroupLinger is LinkGroupLinger's default: a client's
	// group ends within 15 s of its last connection.
	DefaultLinkGroupLinger = 10 * time.Second
	// LinuxLinkGroupLinger is Linux's (SMC_LGR_FREE_DELAY_SERV).
	LinuxLinkGroupLinger = 10 * time.Minute
)

const (
	defaultBufSize         = 64 << 10
	minBufSize             = 16 << 10
	maxBufSize             = 1 << 20
	defaultMaxConns        = 255
	defaultTestLink        = 30 * time.Second
	defaultHandshakeWait   = 6 * time.Second
	defaultProposalWait    = 2 * time.Second
	defaultPendingHandshks = 256
	defaultPerSource       = 16
)

// withDefaults returns c with every zero field set to its default, or an
// error naming a field that is out of range.
func (c Config) withDefaults() (Config, error) {
	if c.DevicePort == 0 {
		c.DevicePort = 4791
	}
	if c.CQ == nil {
		c.CQ = PooledCQ
	}
	var err error
	if c.SendBufSize, err = bufSize("SendBufSize", c.SendBufSize); err != nil {
		return c, err
	}
	if c.RecvBufSize, err = bufSize("RecvBufSize", c.RecvBufSize); err != nil {
		return c, err
	}
	switch {
	case c.MaxConnsPerLinkGroup == 0:
		c.MaxConnsPerLinkGroup = defaultMaxConns
	case c.MaxConnsPerLinkGroup < 1 || c.MaxConnsPerLinkGroup > defaultMaxConns:
		return c, fmt.Errorf("smcr: MaxConnsPerLinkGroup %d out of range 1..%d", c.MaxConnsPerLinkGroup, defaultMaxConns)
	}
	if c.LinkGroupLinger <= 0 {
		c.LinkGroupLinger = DefaultLinkGroupLinger
	}
	if c.TestLinkInterval == 0 {
		c.TestLinkInterval = defaultTestLink
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = defaultHandshakeWait
	}
	if c.ProposalTimeout <= 0 {
		c.ProposalTimeout = defaultProposalWait
	}
	c.ProposalTimeout = min(c.ProposalTimeout, c.HandshakeTimeout)
	if c.MaxPendingHandshakes <= 0 {
		c.MaxPendingHandshakes = defaultPendingHandshks
	}
	if c.MaxHandshakesPerSource <= 0 {
		c.MaxHandshakesPerSource = defaultPerSource
	}
	if c.Hostname == "" {
		c.Hostname, _ = os.Hostname()
	}
	if len(c.Devices) > 0 && c.Device.IsValid() && c.Device.Unmap() != c.Devices[0].Unmap() {
		return c, fmt.Errorf("smcr: Device %v is not the first of Devices %v: set one of them", c.Device, c.Devices)
	}
	seen := map[netip.Addr]bool{}
	for _, a := range c.Devices {
		if !a.IsValid() || a.IsUnspecified() || seen[a.Unmap()] {
			return c, fmt.Errorf("smcr: Devices %v: each must be a distinct specific address", c.Devices)
		}
		seen[a.Unmap()] = true
	}
	for _, u := range c.UEIDs {
		if len(u) == 0 || len(u) > len(smcwire.EID{}) {
			return c, fmt.Errorf("smcr: UEID %q must be 1 to 32 characters", u)
		}
	}
	return c, nil
}

// bufSize rounds n up to a power of two within the RMB sizes SMC-R can
// announce (16 KiB << code).
func bufSize(name string, n int) (int, error) {
	if n == 0 {
		return defaultBufSize, nil
	}
	if n < 0 || n > maxBufSize {
		return 0, fmt.Errorf("smcr: %s %d out of range (up to %d bytes)", name, n, maxBufSize)
	}
	size := minBufSize
	for size < n {
		size <<= 1
	}
	return size, nil
}
