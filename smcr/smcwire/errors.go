package smcwire

// ParseError says why an SMC message was rejected. Like rocev2.ParseError
// it is a small integer, so a receive path can return it without
// allocating and count rejects per reason.
type ParseError uint8

// The reasons an SMC message is rejected. The order is stable.
const (
	_              ParseError = iota
	ErrShort                  // shorter than the message's fixed part or its length field
	ErrEyecatcher             // CLC eyecatcher is neither SMC-R nor SMC-D
	ErrTrailer                // CLC trailer eyecatcher missing
	ErrLength                 // length field below the minimum or above the maximum for the type
	ErrType                   // unknown message type, or not the type the caller asked for
	ErrVersion                // CLC version 0
	ErrOffset                 // a CLC offset points outside the message
	ErrCount                  // a count of entries does not fit in the message
	ErrUnsupported            // a valid message this package does not decode (SMC-D Accept/Confirm)
	numParseErrors
)

// ParseErrors lists every ParseError value, for counter tables and tests.
var ParseErrors = []ParseError{
	ErrShort, ErrEyecatcher, ErrTrailer, ErrLength, ErrType, ErrVersion,
	ErrOffset, ErrCount, ErrUnsupported,
}

var parseErrorText = [numParseErrors]string{
	ErrShort:       "smcwire: message truncated",
	ErrEyecatcher:  "smcwire: bad CLC eyecatcher",
	ErrTrailer:     "smcwire: bad CLC trailer eyecatcher",
	ErrLength:      "smcwire: length field out of range",
	ErrType:        "smcwire: unexpected message type",
	ErrVersion:     "smcwire: bad CLC version",
	ErrOffset:      "smcwire: CLC offset outside the message",
	ErrCount:       "smcwire: entry count does not fit in the message",
	ErrUnsupported: "smcwire: message kind not supported",
}

func (e ParseError) Error() string {
	if e == 0 || e >= numParseErrors {
		return "smcwire: unknown parse error"
	}
	return parseErrorText[e]
}
