//go:build linux

package main

import (
	"bytes"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/vethtest"
)

// On an interface, the device shows the interface's MAC: GID 0 is the
// interface's link-local address, and the node GUID derives from the MAC.
func TestAFPacketDevice(t *testing.T) {
	p := vethtest.New(t)
	var out, errOut bytes.Buffer
	code := -1
	require.NoError(t, vethtest.In(p.NSA, func() error {
		code = run([]string{"-backend", "afpacket", "-i", p.IfA, "-v"}, &out, &errOut)
		return nil
	}))
	require.Equal(t, 0, code, errOut.String())
	s := out.String()
	assert.Contains(t, s, "GID[  0]:\t\t"+p.LinkLocalA.WithZone("").String()+", RoCE v2")
	assert.Contains(t, s, "GID[  1]:\t\t::ffff:"+p.A.String()+", RoCE v2")
	assert.Contains(t, s, "netdev:\t\t\t\t"+p.IfA+" (AF_PACKET), MAC "+net.HardwareAddr(p.MACA[:]).String())
	g := p.LinkLocalA.As16()
	assert.Contains(t, s, "node_guid:\t\t\t"+hex4(g[8:10])+":"+hex4(g[10:12])+":"+hex4(g[12:14])+":"+hex4(g[14:16]))

	out.Reset()
	errOut.Reset()
	require.NoError(t, vethtest.In(p.NSA, func() error {
		code = run([]string{"-backend", "afpacket"}, &out, &errOut)
		return nil
	}))
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut.String(), "-i IFACE")
}

func hex4(b []byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[b[0]>>4], digits[b[0]&15], digits[b[1]>>4], digits[b[1]&15]})
}
