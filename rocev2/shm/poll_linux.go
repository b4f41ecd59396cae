package shm

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// waiter lets one goroutine sleep on every doorbell of the backend: each
// pairing's eventfd and the fallback bridge's, in one level-triggered epoll
// set whose own descriptor is registered with Go's netpoller. A doorbell
// per peer, so that a peer that fills its counter (or never lets it drain)
// cannot silence another's.
type waiter struct {
	epfd   int
	file   *os.File
	rc     syscall.RawConn
	events [32]unix.EpollEvent
	// rung has a bit per slot whose doorbell epoll reported, and fbRung
	// the bridge's: TryReceive empties those counters (WaitReadable runs
	// outside the receive lock and reads nothing).
	rung   []atomic.Uint64
	fbRung atomic.Bool
	ready  func(fd uintptr) bool // bound once: waiting does not allocate
}

// fbSlot is the epoll tag of the fallback bridge's doorbell.
const fbSlot = -1

func (w *waiter) init(slots int) error {
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
	w.rung = make([]atomic.Uint64, (slots+63)/64)
	w.ready = w.poll
	return nil
}

// add registers a doorbell under tag (a slot, or fbSlot).
func (w *waiter) add(fd, tag int, gen uint32) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(tag), Pad: int32(gen)}
	return unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev)
}

// remove unregisters a doorbell: the peer may still hold it, so closing it
// would not take it out of the set.
func (w *waiter) remove(fd int) { unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, fd, nil) }

// sleep blocks until a doorbell rings or the waiter is closed.
func (w *waiter) sleep() error { return w.rc.Read(w.ready) }

// poll is the netpoller's callback: it reports (in rung) which doorbells
// rang, and false, to wait, when none did.
func (w *waiter) poll(fd uintptr) bool {
	n, err := unix.EpollWait(int(fd), w.events[:], 0)
	if err != nil || n <= 0 {
		return errors.Is(err, unix.EBADF)
	}
	for _, ev := range w.events[:n] {
		if tag := int(ev.Fd); tag == fbSlot {
			w.fbRung.Store(true)
		} else if tag >= 0 && tag/64 < len(w.rung) {
			w.rung[tag/64].Or(1 << (tag % 64))
		}
	}
	return true
}

func (w *waiter) close() {
	if w.file != nil {
		w.file.Close() // wakes a sleep with os.ErrClosed
	}
}
