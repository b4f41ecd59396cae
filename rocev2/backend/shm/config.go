package shm

import (
	"net/netip"
	"time"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

// Defaults for the zero values of Config, and the bounds of what a peer may
// ask for.
const (
	// DefaultRingSize is the data bytes of each direction's ring: twice the
	// bytes an RC send window of 512 full packets keeps in flight, so that a
	// bulk transfer rarely finds the ring full.
	DefaultRingSize = 4 << 20
	// DefaultBacklog bounds each peer's private queue (packets waiting for
	// the pairing, or for room in a full ring): one more send window.
	DefaultBacklog = 4 << 20
	// DefaultBatchSize is the datagrams a Receive hands out at most.
	DefaultBatchSize = 64
	// DefaultMaxPeers is how many pairings a backend keeps at once.
	DefaultMaxPeers = 64
	// DefaultRetryAfter is how long a destination that offers no pairing
	// (or whose pairing failed) goes to the fallback before the next try.
	DefaultRetryAfter = 2 * time.Second

	minRingSize = 16 << 10
	maxRingSize = 1 << 30

	// maxPacket is the largest RoCEv2 packet carried (UDP payload): IB MTU
	// 4096 and the largest headers, pad and ICRC, as memlink's buffers.
	maxPacket = 4096 + 128
	// linkMTU is what the backend reports as its link's IP MTU: a packet of
	// maxPacket bytes in IPv6 and UDP headers. The device derives IB MTU
	// 4096 from it.
	linkMTU = maxPacket + rocev2.IPv6HeaderLen + rocev2.UDPHeaderLen

	// maxFailed bounds the remembered destinations without a pairing.
	maxFailed = 1024
	// rendezvousTimeout bounds one rendezvous: connect, hellos, fds.
	rendezvousTimeout = 2 * time.Second
	// maxHandshakes bounds the incoming rendezvous in progress at once.
	maxHandshakes = 8
)

// Config configures a shared-memory backend. Every field but Addr has a
// usable zero value.
type Config struct {
	// Addr is the address and port the device has, the one its peers send
	// to: every ICRC covers it, and the rendezvous socket is named after
	// it. With a Fallback, an invalid Addr means the fallback's; a valid
	// one must be the fallback's.
	Addr netip.AddrPort

	// Dir is the run directory the rendezvous sockets live in; "" means
	// $GOROCE_RUN_DIR, else goroce-UID in the system's temporary
	// directory. A backend that listens needs it to belong to this user
	// and have mode 0700 (it is created so if missing): its socket is how
	// another process reaches this one. A dialer only looks its peers up
	// there, and trusts them by SO_PEERCRED.
	Dir string

	// Fallback, if set, carries the packets to destinations that offer no
	// pairing (a kernel rxe, another host, a process without this
	// backend), and its received packets are merged with the rings'. It
	// must be able to receive without blocking (backend.Poller), as the UDP
	// backend and memlink can. The backend owns it and closes it. Without
	// a fallback, packets to such destinations are dropped and counted.
	Fallback backend.Backend

	// NoListen makes a backend that pairs only with peers it sends to
	// first: it offers no rendezvous socket of its own.
	NoListen bool

	// RingSize is the data bytes of each ring this backend creates (a
	// power of two, 16 KiB to 1 GiB); 0 means DefaultRingSize.
	RingSize int
	// Backlog bounds each peer's private queue in bytes; 0 means
	// DefaultBacklog.
	Backlog int
	// BatchSize is the datagrams a Receive hands out at most; 0 means the
	// fallback's, else DefaultBatchSize.
	BatchSize int
	// MaxPeers bounds the pairings; 0 means DefaultMaxPeers.
	MaxPeers int
	// RetryAfter is how long a destination without a pairing waits for the
	// next rendezvous attempt; 0 means DefaultRetryAfter.
	RetryAfter time.Duration

	// Spin is how long a receiver that finds nothing looks again before it
	// sleeps on its doorbells, when the last packet came within that time
	// too (a busy link; after a longer gap it sleeps at once). A packet that
	// comes within the spin costs no doorbell and no wake-up on either
	// side; see the package documentation for what that was measured to
	// buy, and why it is off by default. 0 never spins.
	Spin time.Duration

	// AllowUIDs are users besides this process's whose processes may pair
	// with it. By default only the same user's may: a peer can write into
	// our rings and ring our doorbells. With AllowUIDs the rendezvous
	// socket is made connectable by every user (mode 0777), and a peer is
	// admitted by SO_PEERCRED. A process of another user cannot listen in
	// this user's Dir (it is not its own): it opens its backend on the
	// same Dir with NoListen and AllowUIDs naming this user, and dials;
	// the directory must let it through (chmod 0711: searchable, still
	// writable by its owner only).
	AllowUIDs []uint32
}

func (c Config) withDefaults() Config {
	if c.RingSize == 0 {
		c.RingSize = DefaultRingSize
	}
	if c.Backlog <= 0 {
		c.Backlog = DefaultBacklog
	}
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
		if c.Fallback != nil {
			c.BatchSize = c.Fallback.BatchSize()
		}
	}
	if c.MaxPeers <= 0 {
		c.MaxPeers = DefaultMaxPeers
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.Dir == "" {
		c.Dir = DefaultDir()
	}
	return c
}

// validRingSize reports whether n is a ring data size a backend creates or
// accepts from a peer.
func validRingSize(n uint64) bool {
	return n >= minRingSize && n <= maxRingSize && n&(n-1) == 0
}
