package afpacket

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// ErrNoCapNetRaw is wrapped by Open's error when the process may not open
// a packet socket.
var ErrNoCapNetRaw = errors.New("the AF_PACKET backend needs CAP_NET_RAW (run as root, or give the program the capability: setcap cap_net_raw+ep PROGRAM); without it, use the UDP backend (udp.Open, -backend udp)")

// ethType returns the EtherType the socket binds to for the device's
// address family: the kernel then hands it only IPv4 or only IPv6 frames
// (after taking any VLAN tag off), and never the frames the host sends.
func ethType(ipv6 bool) uint16 {
	if ipv6 {
		return unix.ETH_P_IPV6
	}
	return unix.ETH_P_IP
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// openPacketSocket opens a non-blocking AF_PACKET socket on the interface,
// with the filter attached before it is bound: a socket bound with
// protocol 0 receives nothing, so no frame the filter would refuse is ever
// queued. Given a ring request, it also sets up and maps the receive ring
// (before the bind, for the same reason) and returns the mapping.
func openPacketSocket(l *link, prog []bpf.Instruction, buffer int, ringReq *unix.TpacketReq3) (*os.File, []byte, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, nil, fmt.Errorf("afpacket: open a packet socket on %s: %w: %w", l.name, err, ErrNoCapNetRaw)
		}
		return nil, nil, fmt.Errorf("afpacket: open a packet socket on %s: %w", l.name, err)
	}
	mem, err := configurePacketSocket(fd, l, prog, buffer, ringReq)
	if err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("afpacket: packet socket on %s: %w", l.name, err)
	}
	return os.NewFile(uintptr(fd), "afpacket:"+l.name), mem, nil
}

func configurePacketSocket(fd int, l *link, prog []bpf.Instruction, buffer int, ringReq *unix.TpacketReq3) (mem []byte, err error) {
	if err := attachFilter(fd, prog); err != nil {
		return nil, err
	}
	// What the kernel knows of each frame: whether it took a VLAN tag off,
	// whether the checksum is left to offload or was checked.
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
		return nil, fmt.Errorf("PACKET_AUXDATA: %w", err)
	}
	// A virtio_net_hdr in front of every frame, both ways: on receive it
	// tells a GSO super-frame (a virtual link passes UDP GSO sends on
	// unsegmented) and its segment size; on send the backend writes a
	// zero one.
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
		return nil, fmt.Errorf("PACKET_VNET_HDR: %w", err)
	}
	if buffer > 0 {
		setBuffer(fd, unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, buffer)
		setBuffer(fd, unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, buffer)
	}
	// The ring after PACKET_VNET_HDR, which the kernel refuses once a
	// ring exists.
	if ringReq != nil {
		if mem, err = setupRing(fd, *ringReq); err != nil {
			return nil, err
		}
	}
	proto := htons(ethType(l.addr.Is6()))
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: l.index}); err != nil {
		if mem != nil {
			_ = unix.Munmap(mem)
		}
		return nil, fmt.Errorf("bind: %w", err)
	}
	return mem, nil
}

// attachFilter assembles prog and attaches it to the socket.
func attachFilter(fd int, prog []bpf.Instruction) error {
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return fmt.Errorf("assemble the filter: %w", err)
	}
	ins := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		ins[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fp := unix.SockFprog{Len: uint16(len(ins)), Filter: &ins[0]}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fp); err != nil {
		return fmt.Errorf("SO_ATTACH_FILTER: %w", err)
	}
	return nil
}

func setBuffer(fd, force, plain, n int) {
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, force, n) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, plain, n)
	}
}
