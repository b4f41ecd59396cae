package afpacket

import (
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

// Receive path:
//
//  1. One recvmmsg fills up to a batch of messages, a frame each behind its
//     virtio_net_hdr (PACKET_VNET_HDR: whether it is a GSO super-frame),
//     with the frame's sockaddr_ll (its packet type) and PACKET_AUXDATA
//     (what the kernel knows of its VLAN tag and checksum).
//  2. drain hands them out, a GSO super-frame segment by segment. What the
//     kernel filled is checked like the frame itself: a length beyond the
//     buffer, a cut frame, a sockaddr or control message that is short or
//     missing all end in a drop.
//  3. rxCheck (frame.go) validates the frame and verifies each packet's
//     ICRC over the real headers it travelled in.

// Receive blocks until frames arrive and fills pkts[:n] with their RoCEv2
// packets, each with its ICRC verdict (ICRCVerified or ICRCBad) and IPv4
// ID, or with a Drop reason. The Bufs point into the backend's receive
// buffers and stay valid until the next call. Receive returns an error
// wrapping backend.ErrBackendClosed after Close.
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

// Serve is the receive loop of backend.Poller (see the UDP backend's):
// drain runs inside the runtime poller's read of the socket, so a frame
// (or, with the ring, a block) that arrives while drain works is a
// readiness the next wait sees, and a drain that left nothing parks
// without another system call. It touches no receive state itself.
func (b *Backend) Serve(drain func() bool) error {
	if b.closed.Load() {
		return errClosed
	}
	if err := b.rx.kernel.serve(drain); err != nil {
		return b.ioError("wait", err)
	}
	return errClosed
}

// recv reads up to want messages, waiting for the first one if wait is
// set; the buffers of the previous ones are all handed out by now.
func (b *Backend) recv(want int, wait bool) error {
	if b.ring != nil {
		return b.recvRing(want, wait)
	}
	b.resetHeaders()
	n, err := b.rx.kernel.recvmmsg(b.rx.hdrs[:want], wait)
	if err != nil {
		return b.ioError("receive", err)
	}
	b.rx.count, b.rx.next, b.rx.seg = min(max(n, 0), want), 0, 0
	return nil
}

// resetHeaders restores the fields the kernel changed in the messages the
// last read filled.
func (b *Backend) resetHeaders() {
	for i := range b.rx.count {
		h := &b.rx.hdrs[i]
		h.Len = 0
		h.Hdr.Namelen = unix.SizeofSockaddrLinklayer
		h.Hdr.SetControllen(rxOOBLen)
		h.Hdr.Flags = 0
	}
	b.rx.count = 0
}

// drain hands out the packets of the messages read last, cutting GSO
// super-frames into their segments.
func (b *Backend) drain(pkts []backend.Incoming) int {
	n := 0
	for n < len(pkts) && b.rx.next < b.rx.count {
		if b.rx.seg == 0 {
			b.rx.msg = b.message(b.rx.next)
		}
		m := &b.rx.msg
		for n < len(pkts) && b.rx.seg < m.segments() {
			b.check.packet(m, b.rx.seg, &pkts[n])
			n++
			b.rx.seg++
		}
		if b.rx.seg >= m.segments() {
			b.rx.next++
			b.rx.seg = 0
		}
	}
	return n
}

// recvRing copies up to want frames out of the ring, waiting in the
// runtime poller for a block if wait is set and none is ready. The kernel
// wakes the socket when it hands a block over.
func (b *Backend) recvRing(want int, wait bool) error {
	for {
		n := b.ring.fill(b.rx.slots[:want], b.rx.bufs, b.rx.bufSize)
		b.rx.count, b.rx.next, b.rx.seg = n, 0, 0
		if n > 0 || !wait {
			return nil
		}
		if err := b.rc.Read(b.ring.readyFn); err != nil {
			return b.ioError("receive", err)
		}
		if b.closed.Load() {
			return errClosed
		}
	}
}

// ringMessage validates the frame the ring copied into buffer i.
func (b *Backend) ringMessage(i int) rxMessage {
	s := &b.rx.slots[i]
	if s.drop != 0 {
		return rxMessage{drop: s.drop}
	}
	f := rxFrame{data: b.rx.bufs[i*b.rx.bufSize : i*b.rx.bufSize+s.size], pktType: s.pktType, status: s.status, vnet: s.vnet}
	return b.check.message(f)
}

// message validates message i of the last read.
func (b *Backend) message(i int) rxMessage {
	if b.ring != nil {
		return b.ringMessage(i)
	}
	h := &b.rx.hdrs[i]
	buf := b.rx.bufs[i*b.rx.bufSize : (i+1)*b.rx.bufSize]
	size := int(h.Len)
	switch {
	case size > len(buf) || size < vnetHdrLen:
		return rxMessage{drop: rocev2.ErrDatagram}
	case h.Hdr.Flags&unix.MSG_TRUNC != 0:
		// Longer than the buffer, which holds the longest GSO frame.
		return rxMessage{drop: rocev2.ErrDatagram}
	}
	f := rxFrame{data: buf[vnetHdrLen:size], pktType: 0xff} // no sockaddr: not to us
	copy(f.vnet[:], buf[:vnetHdrLen])
	if nl := int(h.Hdr.Namelen); nl >= 11 && nl <= unix.SizeofSockaddrLinklayer {
		f.pktType = b.rx.names[i][10] // sll_pkttype
	}
	oob := b.rx.oob[i*rxOOBLen : (i+1)*rxOOBLen]
	if cl := h.Hdr.Controllen; cl < uint64(len(oob)) {
		oob = oob[:cl]
	}
	f.status = auxStatus(oob)
	return b.check.message(f)
}

// auxStatus returns tp_status from the PACKET_AUXDATA control message, or
// 0 when there is none (nothing is then known of tags or checksums, and the
// checks make no assumption).
func auxStatus(oob []byte) uint32 {
	for len(oob) >= unix.SizeofCmsghdr {
		h, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			return 0
		}
		if h.Level == unix.SOL_PACKET && h.Type == unix.PACKET_AUXDATA && len(data) >= 4 {
			return binary.NativeEndian.Uint32(data)
		}
		oob = rest
	}
	return 0
}

// rxKernel is where received messages come from: the socket, or in tests
// a stand-in that fills the headers as a kernel would, or as a hostile or
// buggy one might (export_test.go).
type rxKernel interface {
	recvmmsg(hdrs []unix.Mmsghdr, wait bool) (int, error)
	// serve calls drain while it reports more, and parks between calls
	// until a frame may be waiting, until the socket is closed.
	serve(drain func() bool) error
	close()
}

// socketKernel is the rxKernel of the packet socket.
type socketKernel struct{ b *Backend }

func (k socketKernel) recvmmsg(hdrs []unix.Mmsghdr, wait bool) (int, error) {
	b := k.b
	if wait {
		return b.rx.call.Do(b.rc, hdrs)
	}
	return b.rx.call.Try(b.rc, hdrs)
}

func (k socketKernel) serve(drain func() bool) error {
	b := k.b
	b.rx.drain = drain
	defer func() { b.rx.drain = nil }()
	return b.rc.Read(b.rx.readFn)
}

// close does nothing: closing the socket wakes the runtime poller.
func (k socketKernel) close() {}
