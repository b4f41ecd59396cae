package udp

import "github.com/goroce/goroce/rocev2/backend"

var _ backend.Poller = (*Backend)(nil)

// WaitReadable blocks in the runtime poller until a datagram is waiting on
// the socket. It reads nothing, so that the packets can be taken by whichever
// goroutine receives first, and it touches no receive state: it runs outside
// the caller's receive lock. (Packets left over from the last read are the
// receiver's business: the device drains them before it waits again.)
func (b *Backend) WaitReadable() error {
	if b.closed.Load() {
		return errClosed
	}
	if err := b.rx.kernel.waitReadable(); err != nil {
		return b.ioError("wait", err)
	}
	return nil
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
