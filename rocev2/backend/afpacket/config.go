package afpacket

import (
	"fmt"
	"net/netip"
	"time"
)

// Defaults for the zero values of Config.
const (
	// DefaultBatchSize is the number of frames moved per system call.
	DefaultBatchSize = 64
	// DefaultSocketBuffer is the SO_RCVBUF and SO_SNDBUF size asked for.
	DefaultSocketBuffer = 8 << 20

	// DefaultRingBlockSize is a TPACKET_V3 block's size: room for the
	// longest GSO super-frame a virtual link hands over (64 KiB of IP
	// behind the ring's own headers), which must fit in one block.
	DefaultRingBlockSize = 128 << 10
	// DefaultRingBlocks is the number of blocks: 8 MiB in all, as much as
	// DefaultSocketBuffer queues in recvmmsg mode.
	DefaultRingBlocks = 64
	// DefaultRingRetire is how long the kernel fills a block before it
	// hands it over anyway. The kernel counts it in milliseconds and its
	// timer in jiffies (4 ms at HZ=250): this is what a lone packet waits.
	DefaultRingRetire = time.Millisecond

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

	// Receive is how frames come from the kernel: ReceiveMmsg (the zero
	// value) or ReceiveRing.
	Receive ReceiveMode

	// Ring sizes the TPACKET_V3 ring of ReceiveRing.
	Ring RingConfig
}

// ReceiveMode is how the backend takes frames from the kernel.
type ReceiveMode uint8

const (
	// ReceiveMmsg: one recvmmsg of up to BatchSize frames into the
	// backend's buffers per system call. The default: the kernel wakes
	// the receiver per frame, so a lone packet waits for nothing.
	ReceiveMmsg ReceiveMode = iota
	// ReceiveRing: a TPACKET_V3 receive ring mapped into the process. The
	// kernel fills blocks of frames and hands a block over when it is full
	// or Ring.Retire has passed, so receiving takes no system call while
	// blocks are ready, but a lone packet waits for the retire timer.
	ReceiveRing
)

func (m ReceiveMode) String() string {
	switch m {
	case ReceiveMmsg:
		return "mmsg"
	case ReceiveRing:
		return "ring"
	}
	return fmt.Sprintf("ReceiveMode(%d)", uint8(m))
}

// ParseReceiveMode parses "mmsg" or "ring" (what String returns).
func ParseReceiveMode(s string) (ReceiveMode, error) {
	switch s {
	case "mmsg", "":
		return ReceiveMmsg, nil
	case "ring":
		return ReceiveRing, nil
	}
	return 0, fmt.Errorf("afpacket: receive mode %q: use mmsg (recvmmsg) or ring (TPACKET_V3)", s)
}

// RingConfig sizes a TPACKET_V3 receive ring. Its zero value takes the
// defaults.
type RingConfig struct {
	// BlockSize is the size of a block in bytes, a multiple of the page
	// size; 0 means DefaultRingBlockSize. A frame longer than a block is
	// cut by the kernel and dropped by the backend, so blocks smaller than
	// 128 KiB drop the GSO super-frames a virtual link passes on.
	BlockSize int
	// Blocks is the number of blocks; 0 means DefaultRingBlocks.
	Blocks int
	// Retire is how long the kernel keeps a block that is not full before
	// handing it over; 0 means DefaultRingRetire. It is rounded up to
	// whole milliseconds, the kernel's unit.
	Retire time.Duration
}

func (c Config) withDefaults() Config {
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	c.BatchSize = min(c.BatchSize, maxBatchSize)
	if c.SocketBuffer == 0 {
		c.SocketBuffer = DefaultSocketBuffer
	}
	if c.Ring.BlockSize <= 0 {
		c.Ring.BlockSize = DefaultRingBlockSize
	}
	if c.Ring.Blocks <= 0 {
		c.Ring.Blocks = DefaultRingBlocks
	}
	if c.Ring.Retire <= 0 {
		c.Ring.Retire = DefaultRingRetire
	}
	return c
}
