package afpacket

import (
	"encoding/binary"
	"net/netip"

	"golang.org/x/net/bpf"

	"github.com/goroce/goroce/rocev2"
)

// The classic BPF filter the kernel runs on every frame of the interface
// before anything reaches the socket: it takes IPv4 or IPv6 UDP to port
// 4791 for the device's address, and nothing else. The socket is bound to
// the address family's EtherType, so a VLAN tag is already off (the kernel
// reports it in PACKET_AUXDATA, and the receive path drops and counts such
// frames). Frames addressed to the device that RoCEv2 never uses but whose
// drop the device should count pass too: IPv4 fragments (a later fragment
// has no UDP header to match) and IPv6 with an extension header. The
// receive path checks every field again: the filter is a sieve, not a
// guard.

// snapLen is what the filter accepts of a frame: all of it (the receive
// buffer then decides, and a frame longer than it is dropped whole).
const snapLen = 1 << 18

// filter returns the program for local, an IPv4 or IPv6 address.
func filter(local netip.Addr) []bpf.Instruction {
	accept := bpf.RetConstant{Val: snapLen}
	reject := bpf.RetConstant{Val: 0}
	if local.Is4() {
		a := local.As4()
		// Offsets: EtherType 12, IPv4 header at 14 (flags/fragment 20,
		// protocol 23, destination 30), UDP at 14+IHL.
		return []bpf.Instruction{
			bpf.LoadAbsolute{Off: 12, Size: 2},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: ethTypeIPv4, SkipFalse: 10},
			bpf.LoadAbsolute{Off: 30, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: binary.BigEndian.Uint32(a[:]), SkipFalse: 8},
			bpf.LoadAbsolute{Off: 23, Size: 1},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: protoUDP, SkipFalse: 6},
			bpf.LoadAbsolute{Off: 20, Size: 2},
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: 0x1FFF, SkipTrue: 3}, // a later fragment: no UDP header
			bpf.LoadMemShift{Off: 14},                                   // X = IHL in bytes
			bpf.LoadIndirect{Off: 14 + 2, Size: 2},                      // UDP destination port
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: rocev2.UDPPort, SkipFalse: 1},
			accept,
			reject,
		}
	}
	a := local.As16()
	w := func(i int) uint32 { return binary.BigEndian.Uint32(a[4*i:]) }
	// Offsets: IPv6 header at 14 (next header 20, destination 38), UDP at
	// 54.
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: 12, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: ethTypeIPv6, SkipFalse: 19},
		bpf.LoadAbsolute{Off: 38, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: w(0), SkipFalse: 17},
		bpf.LoadAbsolute{Off: 42, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: w(1), SkipFalse: 15},
		bpf.LoadAbsolute{Off: 46, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: w(2), SkipFalse: 13},
		bpf.LoadAbsolute{Off: 50, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: w(3), SkipFalse: 11},
		bpf.LoadAbsolute{Off: 20, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: protoUDP, SkipTrue: 5},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: nextHopByHop, SkipTrue: 7},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: nextRouting, SkipTrue: 6},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: nextFragment, SkipTrue: 5},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: nextDestOpts, SkipTrue: 4},
		reject,
		bpf.LoadAbsolute{Off: 56, Size: 2}, // UDP destination port
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: rocev2.UDPPort, SkipTrue: 1},
		reject,
		accept,
		reject,
	}
}

// holdFilter is the program of the socket that holds UDP port 4791 for the
// host's stack (hold_linux.go): it drops every datagram.
func holdFilter() []bpf.Instruction {
	return []bpf.Instruction{bpf.RetConstant{Val: 0}}
}
