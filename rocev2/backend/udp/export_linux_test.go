package udp

import (
	"errors"
	"net"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FakeMessage is one message as FakeKernel reports it: every field that
// recvmmsg(2) fills, including lengths that lie about the bytes written.
type FakeMessage struct {
	Data    []byte // written into the message's buffer (as much as fits)
	Len     int    // reported length (msg_len)
	Name    []byte // written into the sockaddr buffer (as much as fits)
	NameLen int    // reported msg_namelen
	Control []byte // written into the control buffer (as much as fits)
	CtlLen  int    // reported msg_controllen
	Flags   int32  // msg_flags (MSG_TRUNC, MSG_CTRUNC, ...)
}

// FakeKernel stands in for the socket on the receive side: it hands out
// the batches a test pushes as recvmmsg results, with every field the test
// chose, so that tests and fuzz targets can feed the backend what no real
// kernel on this machine would produce. Sends still use the socket.
type FakeKernel struct {
	mu      sync.Mutex
	cond    *sync.Cond
	batches [][]FakeMessage
	closed  bool
	kicked  bool   // interrupt was called
	pushed  uint64 // batches pushed
	idle    uint64 // pushed, when a receive last found nothing left
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
// pushed. The backend only reads again once it has handed out everything
// it read before, a device hands a batch to its QPs before it asks for the
// next, and it waits for readiness only after that: so by then every
// datagram of batch n has been handled.
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
		fill(&hdrs[i], &b[i])
	}
	if n == len(b) {
		k.batches = k.batches[1:]
	} else {
		k.batches[0] = b[n:]
	}
	return n, nil
}

// fill writes m into h the way the kernel writes a message, except that
// the reported lengths are m's, true or not.
func fill(h *unix.Mmsghdr, m *FakeMessage) {
	buf := unsafe.Slice(h.Hdr.Iov.Base, h.Hdr.Iov.Len)
	copy(buf, m.Data)
	h.Len = uint32(m.Len)
	copy(unsafe.Slice(h.Hdr.Name, sockaddrLen), m.Name)
	h.Hdr.Namelen = uint32(m.NameLen)
	copy(unsafe.Slice(h.Hdr.Control, h.Hdr.Controllen), m.Control)
	h.Hdr.SetControllen(m.CtlLen)
	h.Hdr.Flags = m.Flags
}

func (k *FakeKernel) serve(drain, done func() bool) error {
	for {
		for drain() {
		}
		if done != nil && done() {
			return nil
		}
		k.mu.Lock()
		for len(k.batches) == 0 && !k.closed && !k.kicked {
			// A device waits only once it has handled all it took.
			k.idle = k.pushed
			k.cond.Wait()
		}
		closed, kicked := k.closed, k.kicked
		k.mu.Unlock()
		if closed {
			return net.ErrClosed
		}
		if kicked {
			return os.ErrDeadlineExceeded
		}
	}
}

func (k *FakeKernel) interrupt() {
	k.mu.Lock()
	k.kicked = true
	k.cond.Broadcast()
	k.mu.Unlock()
}

func (k *FakeKernel) interrupted(err error) bool {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.kicked = false
	return true
}

func (k *FakeKernel) close() {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.cond.Broadcast()
}

// SockaddrLen is the size of the backend's sockaddr buffers.
const SockaddrLen = sockaddrLen

// RxOOBLen is the size of a message's control buffer.
var RxOOBLen = (rxOOBLen + 7) &^ 7
