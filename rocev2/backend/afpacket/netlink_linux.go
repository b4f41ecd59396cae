package afpacket

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel's routing and neighbour tables, asked over rtnetlink, as
// ib_core asks them for rxe: the route to a destination (through the
// device's interface, from its address) gives the next hop (a gateway, or
// the destination itself), and the neighbour table gives the next hop's
// MAC. A missing or unresolved entry is resolved by the kernel, never by
// an ARP of our own: an RTM_NEWNEIGH with NTF_USE makes the kernel "use"
// the entry (neigh_event_send, what ib_core's address resolution calls when
// the entry is not valid), which creates it if needed and starts ARP or
// neighbour discovery; the resolver then asks again.
//
// Replies are parsed with bounds checks on every length: a short or
// lying message ends in an error, never a slice out of bounds.

// nlTimeout bounds the wait for one netlink reply.
const nlTimeout = time.Second

// nudValid are the neighbour states with a usable link-layer address
// (NUD_VALID in include/net/neighbour.h).
const nudValid = unix.NUD_PERMANENT | unix.NUD_NOARP | unix.NUD_REACHABLE | unix.NUD_PROBE | unix.NUD_STALE | unix.NUD_DELAY

var (
	errNoReply    = errors.New("afpacket: netlink: no reply")
	errNotOnLink  = errors.New("route leaves through another interface")
	errLocalRoute = errors.New("the destination is this host (goroce's AF_PACKET backend cannot send to its own host)")
)

// netlinkConn is a NETLINK_ROUTE socket used by one goroutine at a time
// (the resolver's).
type netlinkConn struct {
	fd  int
	seq uint32
	buf []byte
}

func openNetlink() (*netlinkConn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("afpacket: netlink socket: %w", err)
	}
	tv := unix.NsecToTimeval(nlTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("afpacket: netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("afpacket: netlink bind: %w", err)
	}
	return &netlinkConn{fd: fd, buf: make([]byte, 1<<16)}, nil
}

func (c *netlinkConn) close() { unix.Close(c.fd) }

// request builds a netlink message: header, fixed part, attributes.
type request struct{ b []byte }

func newRequest(typ, flags uint16, fixed int) *request {
	r := &request{b: make([]byte, unix.NLMSG_HDRLEN+fixed, 128)}
	binary.NativeEndian.PutUint16(r.b[4:], typ)
	binary.NativeEndian.PutUint16(r.b[6:], flags|unix.NLM_F_REQUEST)
	return r
}

func (r *request) fixed() []byte { return r.b[unix.NLMSG_HDRLEN:] }

func (r *request) attr(typ uint16, data []byte) {
	var h [unix.SizeofRtAttr]byte
	binary.NativeEndian.PutUint16(h[0:], uint16(unix.SizeofRtAttr+len(data)))
	binary.NativeEndian.PutUint16(h[2:], typ)
	r.b = append(r.b, h[:]...)
	r.b = append(r.b, data...)
	for len(r.b)%4 != 0 {
		r.b = append(r.b, 0)
	}
}

func addrBytes(a netip.Addr) []byte {
	if a.Is4() {
		b := a.As4()
		return b[:]
	}
	b := a.As16()
	return b[:]
}

func family(a netip.Addr) uint8 {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// do sends r and returns the payload of the reply of type want (header
// stripped). An NLMSG_ERROR reply returns its errno; with ack, an error
// code of 0 is success and returns nil.
func (c *netlinkConn) do(r *request, want uint16, ack bool) ([]byte, error) {
	c.seq++
	binary.NativeEndian.PutUint32(r.b[0:], uint32(len(r.b)))
	binary.NativeEndian.PutUint32(r.b[8:], c.seq)
	if err := unix.Sendto(c.fd, r.b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("afpacket: netlink send: %w", err)
	}
	deadline := time.Now().Add(nlTimeout)
	for time.Now().Before(deadline) {
		n, _, err := unix.Recvfrom(c.fd, c.buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("afpacket: netlink receive: %w", err)
		}
		for msg := c.buf[:max(n, 0)]; len(msg) >= unix.NLMSG_HDRLEN; {
			l := int(binary.NativeEndian.Uint32(msg[0:]))
			if l < unix.NLMSG_HDRLEN || l > len(msg) {
				return nil, errors.New("afpacket: netlink: malformed reply")
			}
			typ := binary.NativeEndian.Uint16(msg[4:])
			seq := binary.NativeEndian.Uint32(msg[8:])
			body := msg[unix.NLMSG_HDRLEN:l]
			msg = msg[min((l+3)&^3, len(msg)):]
			if seq != c.seq {
				continue // a late reply to an earlier request
			}
			switch typ {
			case unix.NLMSG_ERROR:
				if len(body) < 4 {
					return nil, errors.New("afpacket: netlink: malformed error reply")
				}
				if code := int32(binary.NativeEndian.Uint32(body)); code != 0 {
					return nil, unix.Errno(-code)
				}
				if ack {
					return nil, nil
				}
			case want:
				return body, nil
			}
		}
	}
	return nil, errNoReply
}

// attrs calls f for each attribute in b, stopping at the first that does
// not fit.
func attrs(b []byte, f func(typ uint16, data []byte)) {
	for len(b) >= unix.SizeofRtAttr {
		l := int(binary.NativeEndian.Uint16(b[0:]))
		if l < unix.SizeofRtAttr || l > len(b) {
			return
		}
		f(binary.NativeEndian.Uint16(b[2:])&^(1<<15|1<<14), b[unix.SizeofRtAttr:l]) // NLA_F_NESTED, NLA_F_NET_BYTEORDER
		b = b[min((l+3)&^3, len(b)):]
	}
}

// nextHop asks the kernel's routing table how src reaches dst through
// the interface ifindex (rxe_find_route's lookup: output interface and
// source fixed): the gateway, or dst itself when it is on the link.
func (c *netlinkConn) nextHop(src, dst netip.Addr, ifindex int) (netip.Addr, error) {
	r := newRequest(unix.RTM_GETROUTE, 0, unix.SizeofRtMsg)
	fx := r.fixed()
	fx[0] = family(dst)
	fx[1] = uint8(dst.BitLen())
	r.attr(unix.RTA_DST, addrBytes(dst))
	r.attr(unix.RTA_SRC, addrBytes(src))
	var oif [4]byte
	binary.NativeEndian.PutUint32(oif[:], uint32(ifindex))
	r.attr(unix.RTA_OIF, oif[:])
	body, err := c.do(r, unix.RTM_NEWROUTE, false)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("route to %v: %w", dst, err)
	}
	if len(body) < unix.SizeofRtMsg {
		return netip.Addr{}, fmt.Errorf("route to %v: malformed reply", dst)
	}
	switch body[7] { // rtm_type
	case unix.RTN_UNICAST:
	case unix.RTN_LOCAL:
		return netip.Addr{}, fmt.Errorf("route to %v: %w", dst, errLocalRoute)
	default:
		return netip.Addr{}, fmt.Errorf("route to %v: type %d (unreachable, prohibited or a blackhole)", dst, body[7])
	}
	hop, outIf := dst, -1
	attrs(body[unix.SizeofRtMsg:], func(typ uint16, data []byte) {
		switch typ {
		case unix.RTA_GATEWAY:
			if a, ok := netip.AddrFromSlice(data); ok && a.Is4() == dst.Is4() {
				hop = a
			}
		case unix.RTA_OIF:
			if len(data) >= 4 {
				outIf = int(binary.NativeEndian.Uint32(data))
			}
		}
	})
	if outIf >= 0 && outIf != ifindex {
		return netip.Addr{}, fmt.Errorf("route to %v: %w (index %d)", dst, errNotOnLink, outIf)
	}
	return hop, nil
}

// neighbour returns the MAC the kernel's neighbour table has for addr on
// the interface, and whether the entry is usable.
func (c *netlinkConn) neighbour(addr netip.Addr, ifindex int) ([6]byte, bool, error) {
	r := newRequest(unix.RTM_GETNEIGH, 0, unix.SizeofNdMsg)
	fx := r.fixed()
	fx[0] = family(addr)
	binary.NativeEndian.PutUint32(fx[4:], uint32(ifindex))
	r.attr(unix.NDA_DST, addrBytes(addr))
	body, err := c.do(r, unix.RTM_NEWNEIGH, false)
	if errors.Is(err, unix.ENOENT) {
		return [6]byte{}, false, nil
	}
	if err != nil {
		return [6]byte{}, false, fmt.Errorf("neighbour %v: %w", addr, err)
	}
	if len(body) < unix.SizeofNdMsg {
		return [6]byte{}, false, fmt.Errorf("neighbour %v: malformed reply", addr)
	}
	state := binary.NativeEndian.Uint16(body[8:])
	var mac [6]byte
	have := false
	attrs(body[unix.SizeofNdMsg:], func(typ uint16, data []byte) {
		if typ == unix.NDA_LLADDR && len(data) == 6 {
			mac, have = [6]byte(data), true
		}
	})
	return mac, have && state&nudValid != 0, nil
}

// use asks the kernel to resolve addr on the interface: it creates the
// neighbour entry if there is none and sends ARP requests or neighbour
// solicitations until it is valid or failed.
func (c *netlinkConn) use(addr netip.Addr, ifindex int) error {
	r := newRequest(unix.RTM_NEWNEIGH, unix.NLM_F_CREATE|unix.NLM_F_ACK, unix.SizeofNdMsg)
	fx := r.fixed()
	fx[0] = family(addr)
	binary.NativeEndian.PutUint32(fx[4:], uint32(ifindex))
	binary.NativeEndian.PutUint16(fx[8:], unix.NUD_NONE)
	fx[10] = unix.NTF_USE
	r.attr(unix.NDA_DST, addrBytes(addr))
	if _, err := c.do(r, 0, true); err != nil {
		return fmt.Errorf("resolve %v: %w", addr, err)
	}
	return nil
}
