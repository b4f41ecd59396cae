package shm

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// waiter lets one goroutine sleep on every doorbell of the backend: each
// pairing's eventfd and the fallback bridge's, in one epoll set whose own
// descriptor is registered with Go's netpoller. A doorbell per peer, so
// that a peer that fills its counter cannot silence another's.
//
// The doorbells are never read, and the set is never waited on itself:
// every write to a doorbell wakes the set's own waiters (the kernel's
// ep_poll_callback wakes them whether or not the doorbell was ready
// already), which reaches the netpoller's edge-triggered registration of
// the set as a new event. So a wake-up costs the producer's write and
// nothing more on this side: no epoll_wait of our own, no read to reset a
// counter. The rings themselves say what there is to take.
type waiter struct {
	epfd int
	file *os.File
	rc   syscall.RawConn
}

// fbSlot is the epoll tag of the fallback bridge's doorbell.
const fbSlot = -1

func (w *waiter) init() error {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("shm: epoll_create1: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return fmt.Errorf("shm: epoll: %w", err)
	}
	w.epfd = fd
	w.file = os.NewFile(uintptr(fd), "goroce-shm-epoll")
	if w.rc, err = w.file.SyscallConn(); err != nil {
		w.file.Close()
		return fmt.Errorf("shm: epoll: %w", err)
	}
	return nil
}

// add registers a doorbell under tag (a slot, or fbSlot).
func (w *waiter) add(fd, tag int, gen uint32) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: int32(tag), Pad: int32(gen)}
	return unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev)
}

// remove unregisters a doorbell: the peer may still hold it, so closing it
// would not take it out of the set.
func (w *waiter) remove(fd int) { unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, fd, nil) }

func (w *waiter) close() {
	if w.file != nil {
		w.file.Close() // wakes a sleep with os.ErrClosed
	}
}
