//go:build linux

package main

// Netlink framing: messages (nlmsghdr), generic netlink headers and
// attribute TLVs, built and parsed without trusting any length in a reply.
// Every parser here returns an error for a truncated or inconsistent
// buffer; none of them panics, whatever the bytes.

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Netlink constants (linux/netlink.h, linux/genetlink.h).
const (
	nlmsgHdrLen  = 16
	genlHdrLen   = 4
	nlaHdrLen    = 4
	nlmsgError   = 2
	nlmsgDone    = 3
	nlmFRequest  = 0x1
	nlmFMulti    = 0x2
	nlmFAck      = 0x4
	nlmFDump     = 0x300 // NLM_F_ROOT | NLM_F_MATCH
	nlmFCapped   = 0x100 // in an error message: the request's payload is left out
	nlmFAckTLVs  = 0x200 // in an error message: extended-ack attributes follow
	nlaFNested   = 0x8000
	nlaFNetOrder = 0x4000
	nlaTypeMask  = ^uint16(nlaFNested | nlaFNetOrder)

	nlmsgerrAttrMsg = 1 // NLMSGERR_ATTR_MSG: the kernel's error text
)

var errTruncated = errors.New("truncated netlink data")

// align4 rounds n up to netlink's 4-byte alignment.
func align4(n int) int { return (n + 3) &^ 3 }

// nlMsg is one netlink message.
type nlMsg struct {
	typ   uint16
	flags uint16
	seq   uint32
	pid   uint32
	data  []byte // the payload, after the 16-byte header
}

// appendMsg appends one message with payload to b.
func appendMsg(b []byte, typ, flags uint16, seq, pid uint32, payload []byte) []byte {
	var h [nlmsgHdrLen]byte
	binary.NativeEndian.PutUint32(h[0:], uint32(nlmsgHdrLen+len(payload)))
	binary.NativeEndian.PutUint16(h[4:], typ)
	binary.NativeEndian.PutUint16(h[6:], flags)
	binary.NativeEndian.PutUint32(h[8:], seq)
	binary.NativeEndian.PutUint32(h[12:], pid)
	b = append(b, h[:]...)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// parseMsgs splits a datagram into its messages.
func parseMsgs(b []byte) ([]nlMsg, error) {
	var out []nlMsg
	for len(b) > 0 {
		if len(b) < nlmsgHdrLen {
			return out, fmt.Errorf("netlink message header: %w (%d bytes left)", errTruncated, len(b))
		}
		n := int(binary.NativeEndian.Uint32(b[0:]))
		if n < nlmsgHdrLen || n > len(b) {
			return out, fmt.Errorf("netlink message length %d with %d bytes left: %w", n, len(b), errTruncated)
		}
		out = append(out, nlMsg{
			typ:   binary.NativeEndian.Uint16(b[4:]),
			flags: binary.NativeEndian.Uint16(b[6:]),
			seq:   binary.NativeEndian.Uint32(b[8:]),
			pid:   binary.NativeEndian.Uint32(b[12:]),
			data:  b[nlmsgHdrLen:n],
		})
		if a := align4(n); a < len(b) {
			b = b[a:]
		} else {
			b = nil
		}
	}
	return out, nil
}

// nlError is a netlink error reply: the errno and the kernel's extended
// ack text, if it sent one.
type nlError struct {
	errno int32 // negative, as the kernel sends it; 0 is an ACK
	text  string
}

// parseError reads the payload of an NLMSG_ERROR message.
func parseError(m nlMsg) (nlError, error) {
	if len(m.data) < 4 {
		return nlError{}, fmt.Errorf("netlink error message: %w", errTruncated)
	}
	e := nlError{errno: int32(binary.NativeEndian.Uint32(m.data))}
	if m.flags&nlmFAckTLVs == 0 {
		return e, nil
	}
	// The request's header (and, unless capped, its payload), then TLVs.
	rest := m.data[4:]
	if len(rest) < nlmsgHdrLen {
		return e, nil
	}
	skip := nlmsgHdrLen
	if m.flags&nlmFCapped == 0 {
		skip = int(binary.NativeEndian.Uint32(rest))
	}
	if skip < nlmsgHdrLen || align4(skip) > len(rest) {
		return e, nil // nothing trustworthy after it: the errno alone
	}
	attrs, err := parseAttrs(rest[align4(skip):])
	if err != nil {
		return e, nil
	}
	for _, a := range attrs {
		if a.typ == nlmsgerrAttrMsg {
			e.text = a.str()
		}
	}
	return e, nil
}

// nlAttr is one attribute: its type (without the nested and byte-order
// flags) and its value.
type nlAttr struct {
	typ    uint16
	nested bool
	data   []byte
}

// parseAttrs reads a run of attributes.
func parseAttrs(b []byte) ([]nlAttr, error) {
	var out []nlAttr
	for len(b) > 0 {
		if len(b) < nlaHdrLen {
			return out, fmt.Errorf("attribute header: %w (%d bytes left)", errTruncated, len(b))
		}
		n := int(binary.NativeEndian.Uint16(b[0:]))
		t := binary.NativeEndian.Uint16(b[2:])
		if n < nlaHdrLen || n > len(b) {
			return out, fmt.Errorf("attribute type %d length %d with %d bytes left: %w", t&nlaTypeMask, n, len(b), errTruncated)
		}
		out = append(out, nlAttr{typ: t & nlaTypeMask, nested: t&nlaFNested != 0, data: b[nlaHdrLen:n]})
		if a := align4(n); a < len(b) {
			b = b[a:]
		} else {
			b = nil
		}
	}
	return out, nil
}

// children parses a nested attribute's value.
func (a nlAttr) children() ([]nlAttr, error) { return parseAttrs(a.data) }

// uint reads an unsigned integer of 1, 2, 4 or 8 bytes (the kernel's
// nla_put_uint picks 4 or 8 by value).
func (a nlAttr) uint() (uint64, bool) {
	switch len(a.data) {
	case 1:
		return uint64(a.data[0]), true
	case 2:
		return uint64(binary.NativeEndian.Uint16(a.data)), true
	case 4:
		return uint64(binary.NativeEndian.Uint32(a.data)), true
	case 8:
		return binary.NativeEndian.Uint64(a.data), true
	}
	return 0, false
}

// str reads a string attribute, without its NUL and anything after it.
func (a nlAttr) str() string {
	for i, c := range a.data {
		if c == 0 {
			return string(a.data[:i])
		}
	}
	return string(a.data)
}

// appendAttr appends one attribute with value v.
func appendAttr(b []byte, typ uint16, v []byte) []byte {
	var h [nlaHdrLen]byte
	binary.NativeEndian.PutUint16(h[0:], uint16(nlaHdrLen+len(v)))
	binary.NativeEndian.PutUint16(h[2:], typ)
	b = append(b, h[:]...)
	b = append(b, v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// appendAttrString appends a NUL-terminated string attribute.
func appendAttrString(b []byte, typ uint16, s string) []byte {
	return appendAttr(b, typ, append([]byte(s), 0))
}

// appendAttrU8 appends a one-byte attribute.
func appendAttrU8(b []byte, typ uint16, v uint8) []byte { return appendAttr(b, typ, []byte{v}) }

// genlMsg is a generic netlink message: command, version and attributes.
type genlMsg struct {
	cmd     uint8
	version uint8
	attrs   []nlAttr
}

// genlPayload builds a generic netlink payload: header and attributes.
func genlPayload(cmd, version uint8, attrs []byte) []byte {
	return append([]byte{cmd, version, 0, 0}, attrs...)
}

// parseGenl reads a generic netlink payload.
func parseGenl(b []byte) (genlMsg, error) {
	if len(b) < genlHdrLen {
		return genlMsg{}, fmt.Errorf("generic netlink header: %w", errTruncated)
	}
	attrs, err := parseAttrs(b[genlHdrLen:])
	return genlMsg{cmd: b[0], version: b[1], attrs: attrs}, err
}
