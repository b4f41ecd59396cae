package rocev2

// PSN is a 24-bit packet sequence number. All arithmetic wraps modulo 2^24 and
// comparisons are made within a half window (2^23), as IBTA and rxe do: a PSN
// up to 2^23-1 ahead is "after", anything else is "before". This file is the
// only place that knows how; the transport never compares PSNs with < or -.
type PSN uint32

// PSNMask keeps the low 24 bits of a PSN.
const PSNMask = 0x00FFFFFF

// Add returns p+n modulo 2^24.
func (p PSN) Add(n uint32) PSN { return PSN((uint32(p) + n) & PSNMask) }

// Sub returns the signed distance p-q within the half window: positive when p
// is after q, negative when before, in the range [-2^23, 2^23).
func (p PSN) Sub(q PSN) int32 { return int32((uint32(p)-uint32(q))<<8) >> 8 }

// Before reports whether p comes strictly before q.
func (p PSN) Before(q PSN) bool { return p.Sub(q) < 0 }

// After reports whether p comes strictly after q.
func (p PSN) After(q PSN) bool { return p.Sub(q) > 0 }

// InRange reports whether p lies in the closed span [first, last].
func (p PSN) InRange(first, last PSN) bool { return p.Sub(first) >= 0 && last.Sub(p) >= 0 }

// Valid reports whether p fits in 24 bits.
func (p PSN) Valid() bool { return uint32(p)&^PSNMask == 0 }
