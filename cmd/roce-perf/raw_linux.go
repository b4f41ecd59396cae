//go:build linux

package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The raw UDP baseline moves datagrams the way goroce's UDP backend does,
// and does nothing else: sendmmsg and recvmmsg of up to rawBatch packets,
// GSO messages of up to 64 equal segments (65000 bytes) and GRO when
// goroce's backend uses them, the same socket buffers and DF setting. What
// goroce adds on top (headers, ICRC, RC reliability, memory regions,
// completions) is what the ratio measures.
const (
	rawBatch       = 64       // udp.DefaultBatchSize
	rawRxBufSize   = 64 << 10 // one GRO super-datagram
	rawMaxGSOSegs  = 64
	rawMaxGSOBytes = 65000
	rawSockBuf     = 8 << 20 // udp.DefaultSocketBuffer
	sockaddrLen    = unix.SizeofSockaddrInet6
)

// rawSocket is the baseline's UDP socket.
type rawSocket struct {
	conn     *net.UDPConn
	rc       syscall.RawConn
	local    netip.AddrPort
	gso, gro bool

	tx, rx mmsg
	txBuf  []byte // the payload every data packet carries
	rxBufs []byte
	txName [sockaddrLen]byte
	ctl    [ctlLen]byte

	// With spin, read polls the socket without blocking, yielding the
	// processor every 64 tries, as roce-perf's CQ pollers do: the latency
	// baseline then waits for packets the way the device it is compared
	// with does. deadline (Unix nanoseconds, 0: none) mirrors the read
	// deadline for the polling reader.
	spin     bool
	deadline atomic.Int64
	rxName   [sockaddrLen]byte
	poll     struct { // readSpin's call, bound once so that it does not allocate
		fn    func(fd uintptr)
		buf   []byte
		n     int
		errno syscall.Errno
	}
}

// mmsg is a preallocated sendmmsg or recvmmsg vector and its call, bound
// once so that a call does not allocate.
type mmsg struct {
	trap  uintptr
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names [][sockaddrLen]byte
	oob   []byte
	call  []unix.Mmsghdr // the messages of the call in progress
	n     int
	err   error
	fn    func(fd uintptr) bool
}

const rawOOBLen = 64 // room for a UDP_SEGMENT or UDP_GRO control message

func newMmsg(trap uintptr) mmsg {
	m := mmsg{
		trap:  trap,
		hdrs:  make([]unix.Mmsghdr, rawBatch),
		iovs:  make([]unix.Iovec, rawBatch),
		names: make([][sockaddrLen]byte, rawBatch),
		oob:   make([]byte, rawBatch*rawOOBLen),
	}
	return m
}

func (m *mmsg) do(fd uintptr) bool {
	for {
		n, _, e := unix.Syscall6(m.trap, fd, uintptr(unsafe.Pointer(&m.call[0])), uintptr(len(m.call)), 0, 0, 0)
		switch e {
		case 0:
			m.n, m.err = int(n), nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false // the runtime poller calls again when ready
		default:
			m.n, m.err = 0, e
		}
		return true
	}
}

// run makes one call on hdrs through the socket.
func (s *rawSocket) run(m *mmsg, hdrs []unix.Mmsghdr) (int, error) {
	m.call = hdrs
	var err error
	if m.trap == unix.SYS_SENDMMSG {
		err = s.rc.Write(m.fn)
	} else {
		err = s.rc.Read(m.fn)
	}
	m.call = nil
	if err != nil {
		return 0, err
	}
	return m.n, m.err
}

// openRaw binds a baseline socket to addr (port 0: any), with GSO and GRO
// as asked (and as the kernel allows).
func openRaw(addr netip.AddrPort, gso, gro bool) (*rawSocket, error) {
	network := "udp4"
	if addr.Addr().Is6() {
		network = "udp6"
	}
	conn, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return nil, fmt.Errorf("raw UDP baseline: %w", err)
	}
	s := &rawSocket{conn: conn, local: conn.LocalAddr().(*net.UDPAddr).AddrPort()}
	s.local = netip.AddrPortFrom(s.local.Addr().Unmap(), s.local.Port())
	if s.rc, err = conn.SyscallConn(); err != nil {
		conn.Close()
		return nil, err
	}
	var serr error
	cerr := s.rc.Control(func(fd uintptr) {
		f := int(fd)
		for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
			if unix.SetsockoptInt(f, unix.SOL_SOCKET, o[0], rawSockBuf) != nil {
				_ = unix.SetsockoptInt(f, unix.SOL_SOCKET, o[1], rawSockBuf)
			}
		}
		if addr.Addr().Is4() {
			serr = unix.SetsockoptInt(f, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
		}
		if gso {
			_, e := unix.GetsockoptInt(f, unix.IPPROTO_UDP, unix.UDP_SEGMENT)
			s.gso = e == nil
		}
		if gro {
			s.gro = unix.SetsockoptInt(f, unix.IPPROTO_UDP, unix.UDP_GRO, 1) == nil
		}
	})
	if err = errors.Join(cerr, serr); err != nil {
		conn.Close()
		return nil, fmt.Errorf("raw UDP baseline: socket options: %w", err)
	}
	s.tx, s.rx = newMmsg(unix.SYS_SENDMMSG), newMmsg(unix.SYS_RECVMMSG)
	s.tx.fn, s.rx.fn = s.tx.do, s.rx.do
	s.poll.fn = s.tryRecv
	s.txBuf = make([]byte, rawRxBufSize)
	for i := range s.txBuf {
		s.txBuf[i] = 0xd5
	}
	s.rxBufs = make([]byte, rawBatch*rawRxBufSize)
	for i := range s.rx.hdrs {
		s.rx.iovs[i].Base = &s.rxBufs[i*rawRxBufSize]
		s.rx.iovs[i].SetLen(rawRxBufSize)
		h := &s.rx.hdrs[i].Hdr
		h.Name = &s.rx.names[i][0]
		h.Iov = &s.rx.iovs[i]
		h.SetIovlen(1)
		h.Control = &s.rx.oob[i*rawOOBLen]
	}
	return s, nil
}

// port returns the bound UDP port.
func (s *rawSocket) port() uint16 { return s.local.Port() }

func (s *rawSocket) close() error { return s.conn.Close() }

// sendData sends up to count data packets of seg bytes to dst in one
// sendmmsg, as GSO messages when the socket has GSO, and returns how many
// it sent.
func (s *rawSocket) sendData(dst netip.AddrPort, count, seg int) (int, error) {
	nameLen := putSockaddr(&s.txName, dst)
	m := &s.tx
	msgs, iovs := 0, 0
	for iovs < min(count, rawBatch) {
		k := 1
		if s.gso {
			k = max(1, min(count-iovs, rawBatch-iovs, rawMaxGSOSegs, rawMaxGSOBytes/seg))
		}
		for j := range k {
			m.iovs[iovs+j].Base = &s.txBuf[0]
			m.iovs[iovs+j].SetLen(seg)
		}
		h := &m.hdrs[msgs].Hdr
		h.Name = &s.txName[0]
		h.Namelen = nameLen
		h.Iov = &m.iovs[iovs]
		h.SetIovlen(k)
		h.Control = nil
		h.SetControllen(0)
		if k > 1 {
			c := m.oob[msgs*rawOOBLen:]
			ch := (*unix.Cmsghdr)(unsafe.Pointer(&c[0]))
			ch.Level, ch.Type = unix.SOL_UDP, unix.UDP_SEGMENT
			ch.SetLen(unix.CmsgLen(2))
			binary.NativeEndian.PutUint16(c[unix.CmsgLen(0):], uint16(seg))
			h.Control = &c[0]
			h.SetControllen(unix.CmsgSpace(2))
		}
		msgs++
		iovs += k
	}
	sent := 0
	for done := 0; done < msgs; {
		n, err := s.run(m, m.hdrs[done:msgs])
		if err != nil {
			if s.gso && (errors.Is(err, unix.EIO) || errors.Is(err, unix.EINVAL)) {
				s.gso = false // as goroce's backend does: GSO off for good
				return sent, nil
			}
			return sent, fmt.Errorf("raw UDP baseline: sendmmsg: %w", err)
		}
		for _, h := range m.hdrs[done : done+n] {
			sent += int(h.Hdr.Iovlen)
		}
		done += n
	}
	return sent, nil
}

// recvBatch reads up to rawBatch messages; msg returns them.
func (s *rawSocket) recvBatch() (int, error) {
	m := &s.rx
	for i := range m.hdrs {
		h := &m.hdrs[i]
		h.Len = 0
		h.Hdr.Namelen = sockaddrLen
		h.Hdr.SetControllen(rawOOBLen)
		h.Hdr.Flags = 0
	}
	return s.run(m, m.hdrs)
}

// msg returns message i of the last recvBatch: its bytes, the size of the
// packets GRO coalesced into it (its length if none), and its source.
func (s *rawSocket) msg(i int) (data []byte, seg int, src netip.AddrPort) {
	h := &s.rx.hdrs[i]
	data = s.rxBufs[i*rawRxBufSize : i*rawRxBufSize+int(h.Len)]
	seg = len(data)
	oob := s.rx.oob[i*rawOOBLen : i*rawOOBLen+int(h.Hdr.Controllen)]
	for len(oob) >= unix.SizeofCmsghdr {
		ch, body, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			break
		}
		if ch.Level == unix.SOL_UDP && ch.Type == unix.UDP_GRO && len(body) >= 4 {
			seg = int(binary.NativeEndian.Uint32(body))
		}
		oob = rest
	}
	return data, max(seg, 1), getSockaddr(&s.rx.names[i])
}

// sendCtl sends one control datagram.
func (s *rawSocket) sendCtl(dst netip.AddrPort, typ byte, v int64) error {
	putCtl(s.ctl[:], typ, v)
	_, err := s.conn.WriteToUDPAddrPort(s.ctl[:], dst)
	return err
}

func putSockaddr(b *[sockaddrLen]byte, ap netip.AddrPort) uint32 {
	*b = [sockaddrLen]byte{}
	binary.BigEndian.PutUint16(b[2:], ap.Port())
	if a := ap.Addr().Unmap(); a.Is4() {
		binary.NativeEndian.PutUint16(b[0:], unix.AF_INET)
		a4 := a.As4()
		copy(b[4:8], a4[:])
		return unix.SizeofSockaddrInet4
	}
	binary.NativeEndian.PutUint16(b[0:], unix.AF_INET6)
	a16 := ap.Addr().As16()
	copy(b[8:24], a16[:])
	return unix.SizeofSockaddrInet6
}

func getSockaddr(b *[sockaddrLen]byte) netip.AddrPort {
	port := binary.BigEndian.Uint16(b[2:])
	if binary.NativeEndian.Uint16(b[0:]) == unix.AF_INET {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
	}
	return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])).Unmap(), port)
}

// setReadDeadline sets the socket's read deadline; a past deadline stops a
// reader (recvBatch or read) blocked in another goroutine.
func (s *rawSocket) setReadDeadline(t time.Time) error {
	var ns int64
	if !t.IsZero() {
		ns = t.UnixNano()
	}
	s.deadline.Store(ns)
	return s.conn.SetReadDeadline(t)
}

// setSpin makes read poll instead of block (see rawSocket.spin).
func (s *rawSocket) setSpin(spin bool) { s.spin = spin }

// write sends one datagram.
func (s *rawSocket) write(b []byte, dst netip.AddrPort) error {
	_, err := s.conn.WriteToUDPAddrPort(b, dst)
	return err
}

// read receives one datagram.
func (s *rawSocket) read(b []byte) (int, netip.AddrPort, error) {
	if s.spin {
		return s.readSpin(b)
	}
	return s.conn.ReadFromUDPAddrPort(b)
}

// readSpin polls for one datagram until one arrives or the deadline passes.
func (s *rawSocket) readSpin(b []byte) (int, netip.AddrPort, error) {
	s.poll.buf = b
	defer func() { s.poll.buf = nil }()
	for i := 0; ; i++ {
		if err := s.rc.Control(s.poll.fn); err != nil {
			return 0, netip.AddrPort{}, err
		}
		switch s.poll.errno {
		case 0:
			return s.poll.n, getSockaddr(&s.rxName), nil
		case unix.EAGAIN, unix.EINTR:
		default:
			return 0, netip.AddrPort{}, s.poll.errno
		}
		if i%64 == 63 {
			if d := s.deadline.Load(); d != 0 && time.Now().UnixNano() >= d {
				return 0, netip.AddrPort{}, os.ErrDeadlineExceeded
			}
			runtime.Gosched()
		}
	}
}

// tryRecv is one non-blocking recvfrom into s.poll.buf.
func (s *rawSocket) tryRecv(fd uintptr) {
	b := s.poll.buf
	nameLen := uint32(sockaddrLen)
	r, _, e := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
		unix.MSG_DONTWAIT, uintptr(unsafe.Pointer(&s.rxName[0])), uintptr(unsafe.Pointer(&nameLen)))
	s.poll.n, s.poll.errno = int(r), e
}
