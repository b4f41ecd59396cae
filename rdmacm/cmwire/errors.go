package cmwire

// ParseError is why a MAD, a CM message or the rdma_cm header was refused.
// Each has a counter in package rdmacm.
type ParseError uint8

const (
	ErrShort   ParseError = iota + 1 // shorter than the format
	ErrLength                        // longer than one MAD
	ErrVersion                       // rdma_cm header version or IP version not known
)

var parseErrorText = [...]string{
	ErrShort:   "cmwire: truncated (a MAD is 256 bytes, the rdma_cm header 36)",
	ErrLength:  "cmwire: longer than one MAD (256 bytes)",
	ErrVersion: "cmwire: rdma_cm header of an unknown version or IP version",
}

func (e ParseError) Error() string {
	if int(e) < len(parseErrorText) && parseErrorText[e] != "" {
		return parseErrorText[e]
	}
	return "cmwire: parse error"
}
