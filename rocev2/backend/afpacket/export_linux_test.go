package afpacket

import (
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FakeMessage is one message as FakeKernel reports it: every field that
// recvmmsg(2) fills for a packet socket, including lengths that lie.
type FakeMessage struct {
	Data    []byte // written into the message's buffer (as much as fits): a virtio_net_hdr, then the frame
	Len     int    // reported length (msg_len)
	Name    []byte // written into the sockaddr_ll buffer (as much as fits)
	NameLen int    // reported msg_namelen
	Control []byte // written into the control buffer (as much as fits)
	CtlLen  int    // reported msg_controllen
	Flags   int32  // msg_flags (MSG_TRUNC, ...)
}

// FakeKernel stands in for the packet socket on the receive side, so that
// tests and fuzz targets can feed the backend what no kernel here would
// produce.
type FakeKernel struct {
	mu      sync.Mutex
	cond    *sync.Cond
	batches [][]FakeMessage
	closed  bool
	pushed  uint64
	idle    uint64
}

// UseFakeKernel makes b receive from a FakeKernel.
func UseFakeKernel(b *Backend) *FakeKernel {
	k := &FakeKernel{}
	k.cond = sync.NewCond(&k.mu)
	b.rx.kernel = k
	return k
}

// Push queues one recvmmsg result and returns its number for IdleAfter.
func (k *FakeKernel) Push(batch []FakeMessage) uint64 {
	k.mu.Lock()
	k.batches = append(k.batches, batch)
	k.pushed++
	n := k.pushed
	k.mu.Unlock()
	k.cond.Broadcast()
	return n
}

// IdleAfter reports whether a receive found nothing left after batch n was
// pushed: by then a device has handled every frame of it.
func (k *FakeKernel) IdleAfter(n uint64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.idle >= n
}

func (k *FakeKernel) recvmmsg(hdrs []unix.Mmsghdr, wait bool) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for len(k.batches) == 0 && !k.closed {
		k.idle = k.pushed
		if !wait {
			return 0, nil
		}
		k.cond.Wait()
	}
	if k.closed {
		return 0, net.ErrClosed
	}
	b := k.batches[0]
	n := min(len(b), len(hdrs))
	for i := range n {
		h, m := &hdrs[i], &b[i]
		copy(unsafe.Slice(h.Hdr.Iov.Base, h.Hdr.Iov.Len), m.Data)
		h.Len = uint32(m.Len)
		copy(unsafe.Slice(h.Hdr.Name, unix.SizeofSockaddrLinklayer), m.Name)
		h.Hdr.Namelen = uint32(m.NameLen)
		copy(unsafe.Slice(h.Hdr.Control, h.Hdr.Controllen), m.Control)
		h.Hdr.SetControllen(m.CtlLen)
		h.Hdr.Flags = m.Flags
	}
	if n == len(b) {
		k.batches = k.batches[1:]
	} else {
		k.batches[0] = b[n:]
	}
	return n, nil
}

func (k *FakeKernel) serve(drain func() bool) error {
	for {
		for drain() {
		}
		k.mu.Lock()
		for len(k.batches) == 0 && !k.closed {
			k.idle = k.pushed
			k.cond.Wait()
		}
		closed := k.closed
		k.mu.Unlock()
		if closed {
			return net.ErrClosed
		}
	}
}

func (k *FakeKernel) close() {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.cond.Broadcast()
}

// OpenFake returns a backend for local on a made-up interface (MTU 1500)
// that needs no privileges: it receives from a FakeKernel, knows peer's MAC
// without asking, and discards what it sends (counting the frames). The
// backend owns the pipe it pretends is its socket.
func OpenFake(tb testing.TB, local, peer netip.Addr) (*Backend, *FakeKernel, *SentCount) {
	tb.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	w.Close()
	l := link{name: "fake0", index: 1, mac: [6]byte{0x02, 0, 0, 0, 0, 1}, mtu: 1500, addr: local}
	b, err := newBackend(l, r, Config{}.withDefaults())
	if err != nil {
		tb.Fatal(err)
	}
	b.neigh = newResolver(b, nil, l.mtu)
	b.neigh.seed(peer.WithZone(""), [6]byte{0x02, 0, 0, 0, 0, 2})
	sent := &SentCount{}
	b.tx.write = func(hdrs []unix.Mmsghdr) (int, error) {
		sent.mu.Lock()
		sent.n += len(hdrs)
		sent.mu.Unlock()
		return len(hdrs), nil
	}
	return b, UseFakeKernel(b), sent
}

// SentCount counts the frames a fake backend sent.
type SentCount struct {
	mu sync.Mutex
	n  int
}

// N returns the count.
func (s *SentCount) N() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Sockaddr returns a sockaddr_ll for a frame of packet type pktType.
func Sockaddr(pktType uint8) []byte {
	b := make([]byte, 18)
	b[0] = unix.AF_PACKET
	b[10] = pktType
	b[11] = 6
	return b
}

// AuxData returns a PACKET_AUXDATA control message with tp_status status.
func AuxData(status uint32) []byte {
	b := make([]byte, unix.CmsgSpace(20))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.SOL_PACKET, unix.PACKET_AUXDATA
	h.SetLen(unix.CmsgLen(20))
	*(*uint32)(unsafe.Pointer(&b[unix.CmsgLen(0)])) = status
	return b
}

// Frame returns the frame from peer to local carrying pkt (BTH through
// ICRC), its ICRC sealed, as a peer's NIC would send it.
func Frame(local, peer netip.Addr, srcPort, id uint16, pkt []byte) []byte {
	h := header{srcMAC: [6]byte{0x02, 0, 0, 0, 0, 2}, dstMAC: [6]byte{0x02, 0, 0, 0, 0, 1},
		src: peer.WithZone(""), dst: local.WithZone(""), srcPort: srcPort, dstPort: 4791, ipv4ID: id, hopLimit: 64}
	hdr := make([]byte, maxHeaderLen)
	n := h.put(hdr, len(pkt))
	if len(pkt) >= 4 {
		seal(hdr[:n], pkt)
	}
	return append(hdr[:n:n], pkt...)
}

// SetResolveTimeout shortens how long b's resolver waits for the kernel.
func SetResolveTimeout(b *Backend, d time.Duration) {
	b.neigh.mu.Lock()
	b.neigh.timeout = d
	b.neigh.mu.Unlock()
}

// Constants for tests.
const (
	StatusVLANValid = statusVLANValid
	PacketHost      = packetHost
)

// VnetHdrLen is the size of the virtio_net_hdr in front of each frame.
const VnetHdrLen = vnetHdrLen
