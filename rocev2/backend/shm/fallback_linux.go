package shm

import (
	"errors"
	"fmt"
	"time"

	"github.com/goroce/goroce/rocev2/backend"
	"golang.org/x/sys/unix"
)

// The fallback's packets are merged with the rings': a bridge goroutine
// runs the fallback's Serve loop, whose drain flags the fallback readable
// and rings a doorbell of ours in the waiter's epoll set, then waits for
// TryReceive to find the fallback empty before it lets the loop park
// again. So one goroutine (the device's) receives from every link, and the
// fallback costs nothing while it is quiet.

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
	ready := func() bool {
		b.fb.ready.Store(true)
		unix.Write(b.fb.bell, one[:])
		select {
		case <-b.fb.drained:
		case <-b.stop:
		}
		return false // wait for the fallback to be readable again
	}
	for {
		err := b.fbPoll.Serve(ready)
		if err == nil || errors.Is(err, backend.ErrBackendClosed) || b.closed.Load() {
			return
		}
		select { // a failing socket: do not spin on it
		case <-b.stop:
			return
		case <-time.After(10 * time.Millisecond):
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
