package afpacket

import "net/netip"

// Defaults for the zero values of Config.
const (
	// DefaultBatchSize is the number of frames moved per system call.
	DefaultBatchSize = 64
	// DefaultSocketBuffer is the SO_RCVBUF and SO_SNDBUF size asked for.
	DefaultSocketBuffer = 8 << 20

	// maxBatchSize is the kernel's limit on messages per sendmmsg and
	// recvmmsg (UIO_MAXIOV).
	maxBatchSize = 1024
)

// Config configures an AF_PACKET backend. Every field but Interface has a
// usable zero value.
type Config struct {
	// Interface is the Ethernet interface to send and receive on (veth0,
	// eth0, a bridge port).
	Interface string

	// Addr is the device's IP address, which the ICRC covers; it must be
	// one of the interface's addresses, so that the host answers ARP and
	// neighbour solicitations for it. The zero value takes the
	// interface's first address. An IPv6 link-local address gets the
	// interface as its zone.
	Addr netip.Addr

	// BatchSize is the number of frames per system call; 0 means
	// DefaultBatchSize. It is capped at 1024 (UIO_MAXIOV).
	BatchSize int

	// SocketBuffer is the packet socket's SO_RCVBUF and SO_SNDBUF in bytes;
	// 0 means DefaultSocketBuffer and a negative value leaves the kernel's
	// defaults. As root the *BUFFORCE options exceed net.core.rmem_max.
	SocketBuffer int
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
