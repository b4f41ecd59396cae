package udp

import (
	"net/netip"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

// verdict checks a received packet's ICRC against the flow it arrived in.
//
// Segment i of a GRO datagram most likely left as segment i of a UDP GSO
// send, with IPv4 ID i (a GSO send numbers its segments' IDs from the
// first): that ID is checked first, one ICRC instead of the full recovery
// of an unknown ID.
func verdict(d *backend.Incoming, local netip.AddrPort, ipv6 bool, likelyID uint16) {
	d.ICRC = backend.ICRCBad
	fl := rocev2.NewFlow(d.Src, local)
	if ipv6 {
		if fl.VerifyICRC(d.Buf) {
			d.ICRC = backend.ICRCOK
		}
		return
	}
	if likelyID != 0 {
		fl.IPv4ID = likelyID
		if fl.VerifyICRC(d.Buf) {
			d.ICRC, d.IPv4ID = backend.ICRCOK, likelyID
			return
		}
	}
	if id, ok := fl.InferIPv4ID(d.Buf); ok {
		d.ICRC, d.IPv4ID = backend.ICRCOK, id
	}
}
