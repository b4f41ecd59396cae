package shm

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The shared objects of a pairing: each side's ring (a sealed memfd) and
// each side's doorbell (an eventfd). What a peer passes is checked before
// it is mapped or written: a memfd it could shrink would SIGBUS us, and a
// descriptor that is not an eventfd could block a write.

// requiredSeals are the seals a peer's ring must carry: it cannot shrink
// (our accesses past the new end would fault) or grow.
const requiredSeals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW

// half is what one side creates for a pairing: its ring, mapped, and its
// doorbell. The descriptors go to the peer; the ring's is closed once sent.
type half struct {
	ringFD int
	mem    []byte
	bell   int
	ino    uint64 // the ring's inode (race_on.go)
}

// newHalf creates a ring of size data bytes and a doorbell.
func newHalf(size int) (h half, err error) {
	h = half{ringFD: -1, bell: -1}
	defer func() {
		if err != nil {
			h.close()
		}
	}()
	total := ringHeaderSize + size
	if h.ringFD, err = unix.MemfdCreate("goroce-shm-ring", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING); err != nil {
		return h, fmt.Errorf("shm: memfd_create: %w", err)
	}
	if err = unix.Ftruncate(h.ringFD, int64(total)); err != nil {
		return h, fmt.Errorf("shm: size the ring: %w", err)
	}
	if _, err = unix.FcntlInt(uintptr(h.ringFD), unix.F_ADD_SEALS, requiredSeals|unix.F_SEAL_SEAL); err != nil {
		return h, fmt.Errorf("shm: seal the ring: %w", err)
	}
	if h.mem, err = unix.Mmap(h.ringFD, 0, total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return h, fmt.Errorf("shm: map the ring: %w", err)
	}
	r, err := newRing(h.mem)
	if err != nil {
		return h, err
	}
	r.format()
	var st unix.Stat_t
	if err = unix.Fstat(h.ringFD, &st); err != nil {
		return h, fmt.Errorf("shm: fstat the ring: %w", err)
	}
	h.ino = st.Ino
	if h.bell, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return h, fmt.Errorf("shm: eventfd: %w", err)
	}
	return h, nil
}

// sent closes the ring's descriptor once the peer has it; the mapping stays.
func (h *half) sent() {
	if h.ringFD >= 0 {
		unix.Close(h.ringFD)
		h.ringFD = -1
	}
}

func (h *half) close() {
	h.sent()
	if h.mem != nil {
		unix.Munmap(h.mem)
		h.mem = nil
	}
	if h.bell >= 0 {
		unix.Close(h.bell)
		h.bell = -1
	}
}

// mapPeerRing checks that fd is a ring of size data bytes that cannot
// change size, maps it and closes fd. It returns the mapping and the ring's inode.
func mapPeerRing(fd int, size uint64) ([]byte, uint64, error) {
	defer unix.Close(fd)
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("shm: the peer's ring is not a sealable memfd: %w", err)
	}
	if seals&requiredSeals != requiredSeals {
		return nil, 0, fmt.Errorf("shm: the peer's ring is not sealed against shrinking and growing (seals %#x)", seals)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, 0, fmt.Errorf("shm: fstat the peer's ring: %w", err)
	}
	total := uint64(ringHeaderSize) + size
	if st.Mode&unix.S_IFMT != unix.S_IFREG || uint64(st.Size) != total {
		return nil, 0, fmt.Errorf("shm: the peer's ring is %d bytes, its hello said %d", st.Size, total)
	}
	mem, err := unix.Mmap(fd, 0, int(total), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, 0, fmt.Errorf("shm: map the peer's ring: %w", err)
	}
	return mem, st.Ino, nil
}

// checkBell checks that fd is an eventfd and makes it non-blocking.
func checkBell(fd int) error {
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return fmt.Errorf("shm: the peer's doorbell: %w", err)
	}
	if link != "anon_inode:[eventfd]" {
		return fmt.Errorf("shm: the peer's doorbell is %s, not an eventfd", link)
	}
	return unix.SetNonblock(fd, true)
}

// one is the eventfd increment a doorbell writes.
var one = func() (b [8]byte) { binary.NativeEndian.PutUint64(b[:], 1); return }()

// doorbell is the peer's eventfd, which our Sends ring from any goroutine
// while a teardown may close it: the read lock keeps the descriptor from
// being closed (and its number reused) under a write.
type doorbell struct {
	mu sync.RWMutex
	fd int
	// raw: ring without the runtime's system-call bookkeeping (a raw
	// write), for a peer of this process's own user. Entering a system
	// call the ordinary way wakes the runtime's sysmon thread whenever it
	// sleeps, as it does in a process that sleeps between messages: one
	// more context switch per message at one connection, a third of all
	// of them. A raw write that blocked would hold a processor; it blocks
	// only for a peer that filled its counter and cleared O_NONBLOCK on
	// the file description we share, which a process of our own user
	// could do to us anyway (it may ptrace us). A peer of another user
	// admitted by Config.AllowUIDs is rung the ordinary way.
	raw bool
}

// ring writes the doorbell. EAGAIN (the counter full) means it rang
// already.
// ring rings pr's peer's doorbell, counted.
func (b *Backend) ring(pr *pairing) {
	b.stats.doorbells.Add(1)
	pr.bell.ring()
}

func (d *doorbell) ring() {
	d.mu.RLock()
	switch {
	case d.fd < 0:
	case d.raw:
		unix.RawSyscall(unix.SYS_WRITE, uintptr(d.fd), uintptr(unsafe.Pointer(&one[0])), uintptr(len(one)))
	default:
		unix.Write(d.fd, one[:])
	}
	d.mu.RUnlock()
}

func (d *doorbell) close() {
	// A write blocked on a counter the peer filled after clearing
	// O_NONBLOCK (the file description is shared) holds the read lock:
	// emptying the counter lets it finish, so the teardown cannot hang.
	var buf [8]byte
	drainNoWait(d.fd, &buf)
	d.mu.Lock()
	if d.fd >= 0 {
		unix.Close(d.fd)
		d.fd = -1
	}
	d.mu.Unlock()
}

// drainNoWait reads an eventfd's counter, never blocking even if the peer
// that shares the descriptor cleared O_NONBLOCK (preadv2 RWF_NOWAIT).
func drainNoWait(fd int, buf *[8]byte) {
	if fd < 0 {
		return
	}
	iov := unix.Iovec{Base: &buf[0]}
	iov.SetLen(len(buf))
	unix.Syscall6(unix.SYS_PREADV2, uintptr(fd), uintptr(unsafe.Pointer(&iov)), 1, ^uintptr(0), 0, unix.RWF_NOWAIT)
}
