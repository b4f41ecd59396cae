package tcpopt

import (
	"errors"
	"fmt"

	"github.com/goroce/goroce/smcr/smcwire"
)

// The SMC TCP option: an RFC 6994 experimental option (kind 254) whose
// 4-byte ExID is "SMCR" in EBCDIC.
const (
	optKind = 254        // TCP option kind (experimental, RFC 6994)
	optLen  = 6          // option length: kind, length and the 4-byte ExID
	optExID = 0xE2D4C3D9 // the ExID, "SMCR" in EBCDIC
)

// Option is the 8 bytes Linux puts into its SYN and SYN-ACK: two NOPs,
// then kind, length and ExID. The NOPs only align the option; a parser
// must not depend on them (a Signaller's SYN carries the 6 option bytes
// followed by the kernel's NOP padding instead, see Signaller).
var Option = [8]byte{1, 1, optKind, optLen, 0xE2, 0xD4, 0xC3, 0xD9}

// ErrMalformedSYN is wrapped by SYNHasOption's error when the saved SYN's
// IP or TCP header does not hold together (truncated, unknown IP version,
// lengths out of range).
var ErrMalformedSYN = errors.New("tcpopt: malformed saved SYN")

// Protocol numbers met while walking to the TCP header.
const (
	protoHopByHop = 0
	protoTCP      = 6
	protoRouting  = 43
	protoFragment = 44
	protoAH       = 51
	protoDstOpts  = 60
)

// maxExtHeaders bounds the IPv6 extension header walk (each header is at
// least 8 bytes, so the length check ends it anyway; this is belt and
// braces against a loop on hostile input).
const maxExtHeaders = 16

// parseSYN reports whether the TCP options of a SYN, given as its IPv4 or
// IPv6 header followed by its TCP header (what getsockopt(TCP_SAVED_SYN)
// returns), carry the SMC option: kind 254, a length of at least 6 and
// the ExID. It checks every length against the bytes given, even though
// they come from the kernel, and wraps ErrMalformedSYN when a header does
// not fit. Within the options it follows Linux (tcp_parse_options): End
// of Option List or an option whose length is below 2 or runs past the
// header ends the walk, without error, and what came before counts.
//
// Length: Linux itself only takes a length of exactly 6 as SMC; parseSYN
// accepts longer options with the ExID too (RFC 6994 lets an experiment
// carry data after its ExID), as bpf_load_hdr_opt does on the BPF side.
func parseSYN(b []byte) (bool, error) {
	tcp, err := tcpHeader(b)
	if err != nil {
		return false, err
	}
	if len(tcp) < 20 {
		return false, fmt.Errorf("%w: TCP header of %d bytes", ErrMalformedSYN, len(tcp))
	}
	doff := int(tcp[12]>>4) * 4
	if doff < 20 || doff > len(tcp) {
		return false, fmt.Errorf("%w: TCP data offset %d with %d bytes", ErrMalformedSYN, doff, len(tcp))
	}
	return smcwire.HasSMCOption(tcp[20:doff]), nil
}

// tcpHeader returns the bytes from the start of the TCP header, after the
// IPv4 header or the IPv6 header and its extension headers.
func tcpHeader(b []byte) ([]byte, error) {
	if len(b) < 1 {
		return nil, fmt.Errorf("%w: empty", ErrMalformedSYN)
	}
	switch b[0] >> 4 {
	case 4:
		if len(b) < 20 {
			return nil, fmt.Errorf("%w: IPv4 header of %d bytes", ErrMalformedSYN, len(b))
		}
		ihl := int(b[0]&0x0f) * 4
		if ihl < 20 || ihl > len(b) {
			return nil, fmt.Errorf("%w: IPv4 header length %d with %d bytes", ErrMalformedSYN, ihl, len(b))
		}
		if b[9] != protoTCP {
			return nil, fmt.Errorf("%w: IPv4 protocol %d is not TCP", ErrMalformedSYN, b[9])
		}
		return b[ihl:], nil
	case 6:
		if len(b) < 40 {
			return nil, fmt.Errorf("%w: IPv6 header of %d bytes", ErrMalformedSYN, len(b))
		}
		next, off := b[6], 40
		for range maxExtHeaders {
			switch next {
			case protoTCP:
				return b[off:], nil
			case protoHopByHop, protoRouting, protoDstOpts, protoFragment, protoAH:
			default:
				return nil, fmt.Errorf("%w: IPv6 next header %d is not TCP", ErrMalformedSYN, next)
			}
			if len(b)-off < 8 {
				return nil, fmt.Errorf("%w: truncated IPv6 extension header", ErrMalformedSYN)
			}
			var n int
			switch next {
			case protoFragment:
				n = 8
			case protoAH: // length in 4-byte units, minus 2
				n = (int(b[off+1]) + 2) * 4
			default: // length in 8-byte units, not counting the first
				n = (int(b[off+1]) + 1) * 8
			}
			if n > len(b)-off {
				return nil, fmt.Errorf("%w: IPv6 extension header of %d bytes with %d left", ErrMalformedSYN, n, len(b)-off)
			}
			next, off = b[off], off+n
		}
		return nil, fmt.Errorf("%w: more than %d IPv6 extension headers", ErrMalformedSYN, maxExtHeaders)
	default:
		return nil, fmt.Errorf("%w: IP version %d", ErrMalformedSYN, b[0]>>4)
	}
}
