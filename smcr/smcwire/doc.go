// Package smcwire holds the wire formats of SMC-R (RFC 7609 and the IBM
// SMC Version 2 specification, as Linux net/smc speaks them): the CLC
// handshake messages that run over the TCP connection, the LLC link
// control messages and CDC cursor updates that run as RC SENDs over RoCE,
// and the SMC TCP option.
//
// Like package rocev2, every message is a view into the caller's buffer:
// a Parse function checks bounds, lengths and counts once and returns a
// view (a named byte slice, or a small struct of offsets for the CLC
// Proposal) whose accessors read the fields without copying or
// allocating. Parse errors are ParseError values. Nothing here panics on
// hostile input: every accessor of a view returned by a Parse function
// stays inside the bytes Parse checked. Converting raw bytes to a view
// type by hand skips those checks; do that only with bytes a Parse
// function accepted for that message type.
//
// Each message also has a Fields struct (plain values, for tests, tools and
// JSON) and an Append builder that encodes a Fields struct, so that the
// SMC-R stack can send what this package parses. Builders write what
// Linux on x86 writes, including its little-endian quirks (see LLC).
//
// Byte and bit order: all multi-byte fields are big endian (network
// order) except the two SMC-Rv2 LLC fields Linux declares as plain u16
// (see LLC.Length and AddLinkV2Ext.NumRKeys). Bit flags are named by their
// mask in the wire byte, most significant bit first, as RFC 7609 draws
// them; the C bitfield declarations in the Linux headers list them in the
// reverse order on little-endian machines, which is easy to misread.
package smcwire
