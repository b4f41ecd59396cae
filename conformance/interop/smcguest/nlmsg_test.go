//go:build linux

package main

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAttrRoundTrip(t *testing.T) {
	b := appendAttrString(nil, pnetName, "GOROCEPNET")
	b = appendAttrU8(b, pnetIBPort, 1)
	b = appendAttr(b, 7, nil)
	assert.Zero(t, len(b)%4, "attributes are 4-byte aligned")
	attrs, err := parseAttrs(b)
	require.NoError(t, err)
	require.Len(t, attrs, 3)
	assert.Equal(t, uint16(pnetName), attrs[0].typ)
	assert.Equal(t, "GOROCEPNET", attrs[0].str())
	assert.Equal(t, []byte("GOROCEPNET\x00"), attrs[0].data, "strings go NUL-terminated")
	v, ok := attrs[1].uint()
	assert.True(t, ok)
	assert.Equal(t, uint64(1), v)
	assert.Empty(t, attrs[2].data)
}

func TestAttrUintSizes(t *testing.T) {
	for _, n := range []int{1, 2, 4, 8} {
		a := nlAttr{data: make([]byte, n)}
		a.data[0] = 0x2a
		v, ok := a.uint()
		assert.True(t, ok, "%d bytes", n)
		assert.Equal(t, uint64(0x2a), v)
	}
	_, ok := nlAttr{data: make([]byte, 3)}.uint()
	assert.False(t, ok, "3 bytes is no number")
}

func TestNestedFlagsMasked(t *testing.T) {
	inner := appendAttrU8(nil, 2, 9)
	var h [4]byte
	binary.NativeEndian.PutUint16(h[0:], uint16(4+len(inner)))
	binary.NativeEndian.PutUint16(h[2:], 5|nlaFNested)
	attrs, err := parseAttrs(append(h[:], inner...))
	require.NoError(t, err)
	assert.Equal(t, uint16(5), attrs[0].typ)
	assert.True(t, attrs[0].nested)
	ch, err := attrs[0].children()
	require.NoError(t, err)
	assert.Equal(t, uint16(2), ch[0].typ)
}

func TestParseAttrsTruncated(t *testing.T) {
	good := appendAttrString(nil, 1, "abc")
	for _, b := range [][]byte{
		good[:3],                 // header cut
		good[:6],                 // value cut: length says 8
		{2, 0, 1, 0},             // length 2 < header
		{0xff, 0xff, 1, 0, 0, 0}, // length far past the end
	} {
		_, err := parseAttrs(b)
		assert.ErrorIs(t, err, errTruncated, "% x", b)
	}
	// The last attribute's padding may be missing: the kernel's isn't.
	attrs, err := parseAttrs(appendAttrU8(nil, 1, 5)[:5])
	require.NoError(t, err)
	assert.Len(t, attrs, 1)
}

func TestMsgRoundTrip(t *testing.T) {
	b := appendMsg(nil, 0x1c, nlmFRequest|nlmFDump, 7, 42, genlPayload(smcCmdGetStats, 1, nil))
	b = appendMsg(b, nlmsgDone, nlmFMulti, 7, 42, []byte{0, 0, 0, 0})
	msgs, err := parseMsgs(b)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	assert.Equal(t, nlMsg{typ: 0x1c, flags: nlmFRequest | nlmFDump, seq: 7, pid: 42, data: []byte{smcCmdGetStats, 1, 0, 0}}, msgs[0])
	assert.Equal(t, uint16(nlmsgDone), msgs[1].typ)

	_, err = parseMsgs(b[:10])
	assert.ErrorIs(t, err, errTruncated)
	bad := append([]byte(nil), b...)
	binary.NativeEndian.PutUint32(bad, 1000)
	_, err = parseMsgs(bad)
	assert.ErrorIs(t, err, errTruncated)
}

// errMsg builds an NLMSG_ERROR payload: errno, the request's header
// (capped) and an extended-ack text.
func errMsg(errno int32, text string) nlMsg {
	var p [4]byte
	binary.NativeEndian.PutUint32(p[:], uint32(errno))
	req := appendMsg(nil, 0x1c, nlmFRequest, 1, 0, nil)
	data := append(p[:], req...)
	data = appendAttrString(data, nlmsgerrAttrMsg, text)
	return nlMsg{typ: nlmsgError, flags: nlmFCapped | nlmFAckTLVs, data: data}
}

func TestParseError(t *testing.T) {
	e, err := parseError(errMsg(-17, "UEID exists"))
	require.NoError(t, err)
	assert.Equal(t, int32(-17), e.errno)
	assert.Equal(t, "UEID exists", e.text)
	assert.Equal(t, "EEXIST (file exists): UEID exists", kernelError(e).Error())

	e, err = parseError(nlMsg{data: []byte{0, 0, 0, 0}})
	require.NoError(t, err)
	assert.Zero(t, e.errno, "an ACK")

	_, err = parseError(nlMsg{data: []byte{1}})
	assert.ErrorIs(t, err, errTruncated)

	// TLV flag set but the echoed header is garbage: the errno alone.
	m := errMsg(-22, "x")
	m.flags = nlmFAckTLVs // not capped: the header's length counts
	binary.NativeEndian.PutUint32(m.data[4:], 0xffffff)
	e, err = parseError(m)
	require.NoError(t, err)
	assert.Equal(t, int32(-22), e.errno)
	assert.Empty(t, e.text)
}

func TestParseGenl(t *testing.T) {
	g, err := parseGenl(genlPayload(3, 1, appendAttrString(nil, ctrlAttrFamilyName, "SMC_PNETID")))
	require.NoError(t, err)
	assert.Equal(t, uint8(3), g.cmd)
	assert.Equal(t, "SMC_PNETID", g.attrs[0].str())
	_, err = parseGenl([]byte{1, 2})
	assert.ErrorIs(t, err, errTruncated)
}

func TestParseFamily(t *testing.T) {
	op := func(id, flags uint32) []byte {
		var v [4]byte
		binary.NativeEndian.PutUint32(v[:], id)
		a := appendAttr(nil, ctrlAttrOpID, v[:])
		binary.NativeEndian.PutUint32(v[:], flags)
		return appendAttr(a, ctrlAttrOpFlags, v[:])
	}
	ops := appendAttr(nil, 1, op(7, genlCmdCapDump))
	ops = appendAttr(ops, 2, op(10, genlCmdCapDo|genlAdminPerm))
	var id [2]byte
	binary.NativeEndian.PutUint16(id[:], 0x1d)
	attrs := appendAttr(nil, ctrlAttrFamilyID, id[:])
	attrs = appendAttrString(attrs, ctrlAttrFamilyName, "SMC_GEN_NETLINK")
	attrs = appendAttr(attrs, ctrlAttrOps, ops)
	g, err := parseGenl(genlPayload(1, 2, attrs))
	require.NoError(t, err)
	f, err := parseFamily(g)
	require.NoError(t, err)
	assert.Equal(t, uint16(0x1d), f.id)
	assert.Equal(t, []genlOp{{7, genlCmdCapDump}, {10, genlCmdCapDo | genlAdminPerm}}, f.ops)
	var sb strings.Builder
	printFamily(&sb, f)
	assert.Contains(t, sb.String(), "op.7=dump\nop.10=do,admin\n")

	g.attrs = g.attrs[1:]
	_, err = parseFamily(g)
	assert.ErrorContains(t, err, "no family ID")
}

func TestUEID(t *testing.T) {
	for _, ok := range []string{"GOROCE-INTEROP-UEID", "A", "RXEVM.TEST-1", strings.Repeat("X", 32)} {
		assert.NoError(t, checkUEID(ok), ok)
	}
	for _, bad := range []string{"", "lower", "-LEADING", "SPACE IN", strings.Repeat("X", 33), "UNDER_SCORE"} {
		assert.Error(t, checkUEID(bad), bad)
	}
	a, err := parseAttrs(ueidAttr("GOROCE-INTEROP-UEID"))
	require.NoError(t, err)
	assert.Len(t, a[0].data, smcMaxEIDLen+1, "the kernel wants exactly 33 bytes")
	assert.Equal(t, byte(0), a[0].data[32])
	assert.Equal(t, "GOROCE-INTEROP-UEID"+strings.Repeat(" ", 13), a[0].str())
}
