package pcap

// Format is a capture file format.
type Format int

const (
	// FormatPCAPNG is pcapng: per-packet direction and comments, nanosecond
	// timestamps. The default.
	FormatPCAPNG Format = iota
	// FormatPCAP is the classic libpcap format (nanosecond variant), for
	// tools that predate pcapng. It has no direction or comments.
	FormatPCAP
)

// String returns "pcapng" or "pcap".
func (f Format) String() string {
	switch f {
	case FormatPCAPNG:
		return "pcapng"
	case FormatPCAP:
		return "pcap"
	}
	return "unknown format"
}

// Direction says whether the capturing device received or sent a packet.
// Its values are those of the pcapng epb_flags direction bits.
type Direction uint8

const (
	// DirectionUnknown is a packet of unrecorded direction.
	DirectionUnknown Direction = 0
	// Inbound is a packet the device received.
	Inbound Direction = 1
	// Outbound is a packet the device sent.
	Outbound Direction = 2
)

// String returns "in", "out" or "" for an unknown direction.
func (d Direction) String() string {
	switch d {
	case Inbound:
		return "in"
	case Outbound:
		return "out"
	}
	return ""
}
