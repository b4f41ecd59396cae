package udp

import (
	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/rocev2/backend"
)

// Receive path:
//
//  1. One recvmmsg fills up to a batch of messages (rxKernel.recvmmsg): a
//     message is one datagram, or with GRO a super-datagram of equal
//     segments plus a final shorter one.
//  2. drain hands them out packet by packet. Every field the kernel filled
//     is treated as untrusted (message splits it): the length is bounded by
//     the buffer, the GRO segment size comes from a control message that
//     may be missing, truncated or nonsensical, and the sender's address
//     may be of any family. A message that fails a check is handed out
//     once, with Incoming.Drop saying why, for the device to count; it is
//     never split, parsed or verified.
//  3. verdict checks each packet's ICRC against the flow it came in.

// Receive blocks until packets arrive and fills pkts[:n] with them, each
// with its ICRC verdict: ICRCOK (and for IPv4 the ID the packet travelled
// with, recovered from its ICRC) or ICRCBad, or with a Drop reason. The
// Bufs point into the backend's receive buffers and stay valid until the
// next call. Receive returns an error wrapping backend.ErrBackendClosed after
// Close.
func (b *Backend) Receive(pkts []backend.Incoming) (int, error) {
	if len(pkts) == 0 {
		return 0, nil
	}
	for {
		if b.closed.Load() {
			return 0, errClosed
		}
		if n := b.drain(pkts); n > 0 {
			return n, nil
		}
		if err := b.recv(min(len(pkts), b.batch), true); err != nil {
			return 0, err
		}
	}
}

// recv reads up to want messages, waiting for the first one if wait is
// set; the buffers of the previous ones are all handed out by now.
func (b *Backend) recv(want int, wait bool) error {
	m := &b.rx.m
	b.resetHeaders()
	n, err := b.rx.kernel.recvmmsg(m.hdrs[:want], wait)
	if err != nil {
		return b.ioError("receive", err)
	}
	b.rx.count, b.rx.next, b.rx.off = min(max(n, 0), want), 0, 0
	return nil
}

// resetHeaders restores the fields the kernel changed in the messages the
// last read filled (only those: a read that found nothing changed none, and
// a busy poller makes many of those).
func (b *Backend) resetHeaders() {
	m := &b.rx.m
	for i := range b.rx.count {
		h := &m.hdrs[i]
		h.Len = 0
		h.Hdr.Namelen = sockaddrLen
		h.Hdr.SetControllen(m.oobLen)
		h.Hdr.Flags = 0
	}
	b.rx.count = 0
}

// drain hands out the packets of the messages read last, splitting GRO
// super-datagrams, until pkts is full or the messages are used up.
func (b *Backend) drain(pkts []backend.Incoming) int {
	n := 0
	for n < len(pkts) && b.rx.next < b.rx.count {
		msg := b.message(b.rx.next)
		if msg.drop != 0 {
			pkts[n] = backend.Incoming{Buf: msg.data, Src: msg.src, Drop: msg.drop}
			n++
			b.rx.next++
			b.rx.off = 0
			continue
		}
		for n < len(pkts) {
			off := b.rx.off
			end := min(off+msg.seg, len(msg.data))
			d := &pkts[n]
			*d = backend.Incoming{Buf: msg.data[off:end], Src: msg.src, TTL: msg.ttl, TOS: msg.tos}
			verdict(d, b.local, b.ipv6, uint16(off/msg.seg))
			n++
			b.rx.off = end
			if end >= len(msg.data) {
				b.rx.next++
				b.rx.off = 0
				break
			}
		}
	}
	return n
}

// rxKernel is where received messages come from: the socket, or in tests
// a stand-in that fills the headers as a kernel would, or as a hostile or
// buggy one might (export_test.go).
type rxKernel interface {
	// recvmmsg fills hdrs as recvmmsg(2) does and returns how many
	// messages it filled; without wait it returns 0 when none is waiting.
	recvmmsg(hdrs []unix.Mmsghdr, wait bool) (int, error)
	// serve calls drain while it reports more, and parks between calls
	// until a datagram may be waiting, until the socket is closed, done
	// (nil: never) reports true (nil), or interrupt is called (an error
	// for which interrupted reports true, having re-opened the wait).
	serve(drain, done func() bool) error
	interrupt()
	interrupted(err error) bool
	// close wakes what waits in the two above (the backend is closing).
	close()
}

// socketKernel is the rxKernel of a real socket.
type socketKernel struct{ b *Backend }

func (k socketKernel) recvmmsg(hdrs []unix.Mmsghdr, wait bool) (int, error) {
	b := k.b
	if wait {
		return b.rx.call.Do(b.rc, hdrs)
	}
	return b.rx.call.Try(b.rc, hdrs)
}

func (k socketKernel) serve(drain, done func() bool) error {
	b := k.b
	b.rx.drain, b.rx.done = drain, done
	defer func() { b.rx.drain, b.rx.done = nil, nil }()
	return b.rc.Read(b.rx.readFn)
}

func (k socketKernel) interrupt()                 { backend.InterruptRead(k.b.conn) }
func (k socketKernel) interrupted(err error) bool { return backend.Interrupted(k.b.conn, err) }

// close does nothing: closing the socket wakes the runtime poller.
func (k socketKernel) close() {}
