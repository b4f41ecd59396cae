package rocev2

import "strconv"

// MTU is the IB MTU enum (ibv_mtu): the payload bytes per packet of a
// connected QP's messages. SMC's CLC qp_mtu nibble uses the same values.
type MTU uint8

const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, or 0 for an invalid value.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// Valid reports whether m is one of the five IB MTUs.
func (m MTU) Valid() bool { return m >= MTU256 && m <= MTU4096 }

func (m MTU) String() string {
	if !m.Valid() {
		return "invalid(" + strconv.Itoa(int(m)) + ")"
	}
	return strconv.Itoa(m.Bytes())
}

// MTUFromBytes returns the largest IB MTU not above n bytes (at least MTU256).
func MTUFromBytes(n int) MTU {
	m := MTU4096
	for m > MTU256 && m.Bytes() > n {
		m--
	}
	return m
}

// RoCEOverhead is what rxe subtracts from the link MTU to get the largest IB
// MTU that fits (RXE_MAX_HDR_LENGTH): IP, UDP, BTH, the largest extended
// headers and the ICRC.
const RoCEOverhead = 80

// ActiveMTU derives a port's active IB MTU from the link's IP MTU, as rxe
// does: Ethernet 1500 gives 1024, 9000 gives 4096.
func ActiveMTU(linkMTU int) MTU { return MTUFromBytes(linkMTU - RoCEOverhead) }
