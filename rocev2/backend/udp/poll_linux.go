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
	if b.closed.Load() {
		return errClosed
	}
	if err := b.rx.kernel.serve(drain); err != nil {
		return b.ioError("wait", err)
	}
	return errClosed
}

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
