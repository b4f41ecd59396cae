package udp

import "net/netip"

// Defaults for the zero values of Config.
const (
	// DefaultBatchSize is the number of datagrams moved per system call.
	DefaultBatchSize = 64
	// DefaultSocketBuffer is the SO_RCVBUF and SO_SNDBUF size asked for: a
	// few bursts of 64 GSO super-datagrams, so that a receiver that falls
	// behind for a moment does not drop.
	DefaultSocketBuffer = 8 << 20

	// maxBatchSize is the kernel's limit on messages per sendmmsg/recvmmsg
	// (UIO_MAXIOV).
	maxBatchSize = 1024
)

// Config configures a UDP backend. Every field but Addr has a usable zero
// value.
type Config struct {
	// Addr is the address and port to bind. The address must be specific
	// (not 0.0.0.0 or ::): it is covered by every ICRC the backend seals and
	// verifies. Port 0 picks an ephemeral port (for tests); RoCEv2 peers
	// send to rocev2.UDPPort.
	Addr netip.AddrPort

	// DisableGSO turns off UDP generic segmentation offload on send. GSO is
	// used where the kernel supports it unless this is set.
	DisableGSO bool
	// DisableGRO turns off UDP generic receive offload. GRO is used where the
	// kernel supports it (and is not older than 5.12) unless this is set.
	DisableGRO bool

	// SocketBuffer is the SO_RCVBUF and SO_SNDBUF size in bytes; 0 means
	// DefaultSocketBuffer and a negative value leaves the kernel defaults.
	// As root the backend uses the *BUFFORCE options to exceed
	// net.core.rmem_max and wmem_max; otherwise the kernel caps the size.
	SocketBuffer int

	// BatchSize is the number of datagrams per system call; 0 means
	// DefaultBatchSize. It is capped at 1024 (UIO_MAXIOV).
	BatchSize int
}

func (c Config) withDefaults() Config {
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	c.BatchSize = min(c.BatchSize, maxBatchSize)
	if c.SocketBuffer == 0 {
		c.SocketBuffer = DefaultSocketBuffer
	}
	return c
}
