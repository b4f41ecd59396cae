package udp

import (
	"github.com/goroce/goroce/rocev2/backend"
)

var _ backend.Poller = (*Backend)(nil)

// Serve is the receive loop of backend.Poller: drain runs inside the
// runtime poller's read of the socket (syscall.RawConn.Read), so that a
// datagram that arrives while drain handles a batch is a readiness the
// next wait sees at once, and a drain that emptied the socket can park
// without another recvmmsg to find it empty. It touches no receive state
// itself: drain receives, under its caller's lock.
func (b *Backend) Serve(drain func() bool) error {
	return b.ServeUntil(drain, nil)
}

var _ backend.Lendable = (*Backend)(nil)

// ServeUntil is backend.Lendable's: Serve until done (nil: never) reports
// true, after a drain or before the read parks, or Interrupt is called.
func (b *Backend) ServeUntil(drain, done func() bool) error {
	if b.closed.Load() {
		return errClosed
	}
	err := b.rx.kernel.serve(drain, done)
	switch {
	case b.closed.Load():
		return errClosed
	case b.rx.kernel.interrupted(err):
		return nil
	case err != nil:
		return b.ioError("wait", err)
	}
	return nil
}

// Interrupt is backend.Lendable's: it ends the runtime poller's read of
// the socket that ServeUntil sleeps in, or the next one's
// (backend.InterruptRead). Receiving without waiting (TryReceive) does
// not look at deadlines.
func (b *Backend) Interrupt() { b.rx.kernel.interrupt() }

// TryReceive is Receive without waiting: it hands out what is left of the
// last read, or reads once without blocking, and returns 0 when nothing is
// waiting.
func (b *Backend) TryReceive(pkts []backend.Incoming) (int, error) {
	if b.closed.Load() {
		return 0, errClosed
	}
	if len(pkts) == 0 {
		return 0, nil
	}
	if n := b.drain(pkts); n > 0 {
		return n, nil
	}
	if err := b.recv(min(len(pkts), b.batch), false); err != nil {
		return 0, err
	}
	return b.drain(pkts), nil
}
