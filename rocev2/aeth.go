package rocev2

import (
	"encoding/binary"
	"strconv"
)

// AETH is a view of the ACK Extended Transport Header.
//
//	0   syndrome
//	1-3 MSN (message sequence number)
//
// The syndrome's top bits select ACK (0 00 CCCCC, C = credit code), RNR NAK
// (0 01 TTTTT, T = RNR timer code) or NAK (0 11 NNNNN, N = NAK code).
type AETH []byte

// Syndrome returns the raw 'Syndrome' byte.
func (h AETH) Syndrome() Syndrome { return Syndrome(h[0]) }

// MSN returns the 24-bit 'Message Sequence Number'.
func (h AETH) MSN() uint32 { return binary.BigEndian.Uint32(h) & 0xFFFFFF }

// SetSyndrome sets the 'Syndrome' byte.
func (h AETH) SetSyndrome(s Syndrome) { h[0] = byte(s) }

// SetMSN sets the 'Message Sequence Number'.
func (h AETH) SetMSN(msn uint32) { h[1], h[2], h[3] = byte(msn>>16), byte(msn>>8), byte(msn) }

// Syndrome is the AETH syndrome byte.
type Syndrome uint8

// SyndromeKind is the decoded meaning of a syndrome's top bits.
type SyndromeKind uint8

const (
	KindACK      SyndromeKind = 0 // 0 00 xxxxx
	KindRNR      SyndromeKind = 1 // 0 01 xxxxx
	KindReserved SyndromeKind = 2 // 0 10 xxxxx and 1 xx xxxxx
	KindNAK      SyndromeKind = 3 // 0 11 xxxxx
)

func (k SyndromeKind) String() string {
	switch k {
	case KindACK:
		return "ack"
	case KindRNR:
		return "rnr"
	case KindNAK:
		return "nak"
	}
	return "reserved"
}

// NAK codes carried in the low five bits of a NAK syndrome.
const (
	NAKPSNSequence     uint8 = 0
	NAKInvalidRequest  uint8 = 1
	NAKRemoteAccess    uint8 = 2
	NAKRemoteOperation uint8 = 3
	NAKInvalidRD       uint8 = 4
)

// Common syndromes.
const (
	// SyndromeACKUnlimited is an ACK with credit code 31 ("invalid"): no
	// end-to-end credit information. rxe always sends it.
	SyndromeACKUnlimited Syndrome = 0x1F
	SyndromeNAKPSNSeq    Syndrome = 0x60
	SyndromeNAKInvalid   Syndrome = 0x61
	SyndromeNAKAccess    Syndrome = 0x62
	SyndromeNAKOperation Syndrome = 0x63
	SyndromeNAKInvalidRD Syndrome = 0x64
)

// ACKSyndrome returns an ACK syndrome with the given credit code (0..31).
func ACKSyndrome(credit uint8) Syndrome { return Syndrome(credit & 0x1F) }

// RNRSyndrome returns an RNR NAK syndrome with the given timer code (0..31).
func RNRSyndrome(timer uint8) Syndrome { return Syndrome(0x20 | timer&0x1F) }

// NAKSyndrome returns a NAK syndrome with the given NAK code.
func NAKSyndrome(code uint8) Syndrome { return Syndrome(0x60 | code&0x1F) }

// Kind decodes the syndrome's top three bits.
func (s Syndrome) Kind() SyndromeKind {
	if s&0x80 != 0 {
		return KindReserved
	}
	return SyndromeKind(s >> 5 & 3)
}

// Code returns the low five bits: the credit code of an ACK, the timer code of
// an RNR NAK, or the NAK code of a NAK.
func (s Syndrome) Code() uint8 { return uint8(s) & 0x1F }

// Credits returns the number of end-to-end credits an ACK advertises, and
// false for credit code 31 ("invalid", i.e. unlimited) or a non-ACK syndrome.
func (s Syndrome) Credits() (int, bool) {
	if s.Kind() != KindACK || s.Code() == 31 {
		return 0, false
	}
	c := s.Code()
	if c <= 4 {
		return int(c), true
	}
	// From 5 on the table alternates 1.5x and 2x steps: 6, 8, 12, 16, 24, …
	base := 4 << ((c - 4) / 2)
	if (c-4)%2 == 1 {
		base += base / 2
	}
	return base, true
}

// rnrTimerMicros is the RNR timer table (IBTA 9.7.5.2.8), in microseconds.
var rnrTimerMicros = [32]uint32{
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880,
	163840, 245760, 327680, 491520,
}

// RNRTimerMicros returns the delay in microseconds that RNR timer code c asks for.
func RNRTimerMicros(c uint8) uint32 { return rnrTimerMicros[c&0x1F] }

// String describes the syndrome, e.g. "ACK credits=unlimited", "RNR 0.64ms",
// "NAK psn-sequence".
func (s Syndrome) String() string {
	switch s.Kind() {
	case KindACK:
		if n, ok := s.Credits(); ok {
			return "ACK credits=" + strconv.Itoa(n)
		}
		return "ACK credits=unlimited"
	case KindRNR:
		return "RNR timer=" + strconv.Itoa(int(s.Code()))
	case KindNAK:
		return "NAK " + NAKCodeName(s.Code())
	}
	return "reserved syndrome 0x" + hex8(uint8(s))
}

// NAKCodeName names a NAK code.
func NAKCodeName(code uint8) string {
	switch code {
	case NAKPSNSequence:
		return "psn-sequence"
	case NAKInvalidRequest:
		return "invalid-request"
	case NAKRemoteAccess:
		return "remote-access"
	case NAKRemoteOperation:
		return "remote-operational"
	case NAKInvalidRD:
		return "invalid-rd-request"
	}
	return "reserved-" + strconv.Itoa(int(code))
}

func hex8(v uint8) string {
	const hex = "0123456789abcdef"
	return string([]byte{hex[v>>4], hex[v&15]})
}
