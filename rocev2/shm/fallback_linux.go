package shm

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/rocev2"
)

// The fallback's packets are merged with the rings': a bridge goroutine
// waits until the fallback is readable (its WaitReadable), flags it and
// rings a doorbell of ours in the waiter's epoll set, then waits for
// TryReceive to find the fallback empty before it waits again. So one
// goroutine (the device's) sleeps on every link, and the fallback costs
// nothing while it is quiet.

func (b *Backend) startBridge() error {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("shm: eventfd: %w", err)
	}
	if err := b.wait.add(fd, fbSlot, 0); err != nil {
		unix.Close(fd)
		return fmt.Errorf("shm: epoll: %w", err)
	}
	b.fb.bell = fd
	b.fb.drained = make(chan struct{}, 1)
	b.fb.done = make(chan struct{})
	go b.bridge()
	return nil
}

func (b *Backend) bridge() {
	defer close(b.fb.done)
	for {
		if err := b.fbPoll.WaitReadable(); err != nil {
			if errors.Is(err, rocev2.ErrBackendClosed) || b.closed.Load() {
				return
			}
			select { // a failing socket: do not spin on it
			case <-b.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		b.fb.ready.Store(true)
		unix.Write(b.fb.bell, one[:])
		select {
		case <-b.fb.drained:
		case <-b.stop:
			return
		}
	}
}

// stopBridge closes the fallback, which ends the bridge's wait, and waits
// for the bridge.
func (b *Backend) stopBridge() {
	if b.fb.done == nil {
		return
	}
	b.fallback.Close()
	<-b.fb.done
	b.wait.remove(b.fb.bell)
	closeFD(b.fb.bell)
	b.fb.bell = -1
}
