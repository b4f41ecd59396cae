package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// The hello is the one message each side of a rendezvous sends, the dialer
// first; the file descriptors of its ring and doorbell travel with it
// (SCM_RIGHTS). A listener's hello is its answer: Status says whether the
// pairing is on.
//
//	offset  size  field
//	0       8     magic "goroceSH"
//	8       2     version (1)
//	10      2     status (answer only)
//	12      4     reserved, 0
//	16      8     instance: random per backend, tells a restarted peer from a live one
//	24      20    from: address (16, IPv4-mapped for IPv4), port (2), family 4 or 6, 0
//	44      20    to: the same
//	64      8     ring data bytes of the sender's ring
//	72      4     largest packet the sender writes
//	76      4     reserved, 0
const (
	helloLen     = 80
	helloMagic   = "goroceSH"
	helloVersion = 1
)

// Answer statuses.
const (
	statusOK      = 0
	statusBusy    = 1 // a pairing of ours with you lives or is being set up: use it
	statusRefused = 2 // full, not the address you asked for, or yourself
	statusVersion = 3 // a version we do not speak
)

var (
	errHelloShort   = errors.New("shm: hello cut short")
	errHelloMagic   = errors.New("shm: hello magic wrong (not a goroce shared-memory peer)")
	errHelloVersion = errors.New("shm: hello of another version (upgrade both sides to the same goroce)")
	errHelloAddr    = errors.New("shm: hello address invalid (family, unspecified, port 0)")
)

type hello struct {
	status    uint16
	instance  uint64
	from, to  netip.AddrPort
	ringSize  uint64
	maxPacket uint32
}

func (h *hello) encode(b *[helloLen]byte) {
	clear(b[:])
	copy(b[0:], helloMagic)
	binary.LittleEndian.PutUint16(b[8:], helloVersion)
	binary.LittleEndian.PutUint16(b[10:], h.status)
	binary.LittleEndian.PutUint64(b[16:], h.instance)
	putAddr(b[24:44], h.from)
	putAddr(b[44:64], h.to)
	binary.LittleEndian.PutUint64(b[64:], h.ringSize)
	binary.LittleEndian.PutUint32(b[72:], h.maxPacket)
}

// decodeHello parses a hello; a version error still fills nothing but tells
// the listener to answer statusVersion.
func decodeHello(b []byte) (hello, error) {
	if len(b) < helloLen {
		return hello{}, errHelloShort
	}
	if string(b[:8]) != helloMagic {
		return hello{}, errHelloMagic
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != helloVersion {
		return hello{}, fmt.Errorf("%w: version %d, this side speaks %d", errHelloVersion, v, helloVersion)
	}
	h := hello{
		status:    binary.LittleEndian.Uint16(b[10:]),
		instance:  binary.LittleEndian.Uint64(b[16:]),
		ringSize:  binary.LittleEndian.Uint64(b[64:]),
		maxPacket: binary.LittleEndian.Uint32(b[72:]),
	}
	var ok1, ok2 bool
	h.from, ok1 = getAddr(b[24:44])
	h.to, ok2 = getAddr(b[44:64])
	if !ok1 || !ok2 {
		return hello{}, errHelloAddr
	}
	return h, nil
}

func putAddr(b []byte, ap netip.AddrPort) {
	a := ap.Addr().Unmap()
	s := a.As16()
	copy(b, s[:])
	binary.LittleEndian.PutUint16(b[16:], ap.Port())
	b[18] = 6
	if a.Is4() {
		b[18] = 4
	}
}

func getAddr(b []byte) (netip.AddrPort, bool) {
	a := netip.AddrFrom16([16]byte(b[:16]))
	switch b[18] {
	case 4:
		if !a.Is4In6() {
			return netip.AddrPort{}, false
		}
		a = a.Unmap()
	case 6:
		if a.Is4In6() {
			return netip.AddrPort{}, false
		}
	default:
		return netip.AddrPort{}, false
	}
	port := binary.LittleEndian.Uint16(b[16:])
	if port == 0 || a.IsUnspecified() || a.IsMulticast() {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a, port), true
}
