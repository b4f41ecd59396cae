package rocev2

// ParseError says why a packet was rejected. It is a small integer so that a
// receive loop can return it as an error without allocating and count drops
// per reason in an array indexed by it (see ParseErrors for every value).
type ParseError uint8

// The reasons a RoCEv2 packet or frame is rejected. The order is stable: it
// indexes per-reason drop counters.
const (
	_                    ParseError = iota
	ErrShort                        // shorter than BTH + ICRC
	ErrUnknownOpcode                // opcode not in the RC/UC/UD/CNP table
	ErrTVer                         // BTH transport version is not 0
	ErrHeaderTruncated              // shorter than the opcode's headers + ICRC
	ErrPadCount                     // PadCnt larger than the payload, or non-zero without payload
	ErrUnexpectedPayload            // payload on an opcode that carries none
	ErrICRC                         // ICRC does not match
	ErrNotRoCE                      // frame is not IPv4/IPv6 UDP to port 4791
	ErrFrameTruncated               // Ethernet/IP/UDP headers or lengths are inconsistent
	ErrDatagram                     // the datagram itself is unusable: empty, cut by the receive buffer, or its length lies
	ErrSource                       // the source address is of an unknown family, or not the device's family
	ErrEncap                        // an encapsulation RoCEv2 does not use: a VLAN tag on an untagged port, IPv4 options, an IPv6 extension header, a fragment
	ErrChecksum                     // the IPv4 header checksum or a non-zero UDP checksum is wrong
	numParseErrors
)

// ParseErrors lists every ParseError value, for counter tables and tests.
var ParseErrors = []ParseError{
	ErrShort, ErrUnknownOpcode, ErrTVer, ErrHeaderTruncated, ErrPadCount,
	ErrUnexpectedPayload, ErrICRC, ErrNotRoCE, ErrFrameTruncated, ErrDatagram, ErrSource,
	ErrEncap, ErrChecksum,
}

// NumParseErrors sizes arrays indexed by ParseError.
const NumParseErrors = int(numParseErrors)

var parseErrorText = [numParseErrors]string{
	ErrShort:             "rocev2: packet shorter than BTH and ICRC",
	ErrUnknownOpcode:     "rocev2: unknown or unsupported BTH opcode",
	ErrTVer:              "rocev2: BTH transport version is not 0",
	ErrHeaderTruncated:   "rocev2: packet shorter than its opcode's headers and ICRC",
	ErrPadCount:          "rocev2: BTH pad count exceeds the payload",
	ErrUnexpectedPayload: "rocev2: payload on an opcode that carries none",
	ErrICRC:              "rocev2: ICRC mismatch",
	ErrNotRoCE:           "rocev2: frame is not RoCEv2 (IP/UDP to port 4791)",
	ErrFrameTruncated:    "rocev2: Ethernet/IP/UDP headers truncated or inconsistent",
	ErrDatagram:          "rocev2: datagram empty, larger than the receive buffer, or of a length the receiver cannot trust",
	ErrSource:            "rocev2: datagram from a source address of an unexpected family",
	ErrEncap:             "rocev2: frame with a VLAN tag, IPv4 options, an IPv6 extension header or a fragment, which RoCEv2 does not use",
	ErrChecksum:          "rocev2: IPv4 header checksum or UDP checksum wrong",
}

func (e ParseError) Error() string {
	if e == 0 || e >= numParseErrors {
		return "rocev2: unknown parse error"
	}
	return parseErrorText[e]
}

// CounterName is the name under which a device counts drops for this reason,
// in the style of rxe's hw counters.
func (e ParseError) CounterName() string {
	switch e {
	case ErrShort, ErrHeaderTruncated, ErrFrameTruncated:
		return "rcvd_truncated"
	case ErrUnknownOpcode:
		return "rcvd_bad_opcode"
	case ErrTVer:
		return "rcvd_bad_tver"
	case ErrPadCount, ErrUnexpectedPayload:
		return "rcvd_bad_length"
	case ErrICRC:
		return "rcvd_icrc_err"
	case ErrNotRoCE:
		return "rcvd_not_roce"
	case ErrDatagram:
		return "rcvd_bad_datagram"
	case ErrSource:
		return "rcvd_bad_source"
	case ErrEncap:
		return "rcvd_bad_encap"
	case ErrChecksum:
		return "rcvd_bad_checksum"
	}
	return "rcvd_unknown_err"
}
