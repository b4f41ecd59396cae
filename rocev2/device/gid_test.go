package device

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A device without an interface of its own has a random MAC, locally
// administered and unicast, not one derived from its address (SMC-R's peer
// ID is made of it): two devices on the same address differ, and GID 0
// and the node GUID follow the MAC.
func TestMACRandomPerDevice(t *testing.T) {
	a, b := newTestDevice(t), newTestDevice(t)
	require.Equal(t, a.LocalAddr().Addr(), b.LocalAddr().Addr())
	assert.NotEqual(t, a.MAC(), b.MAC())
	for _, d := range []*Device{a, b} {
		mac := d.MAC()
		assert.Equal(t, byte(0x02), mac[0]&0x03, "locally administered unicast: %x", mac)
		g0, err := d.GID(0)
		require.NoError(t, err)
		assert.Equal(t, linkLocalGID(mac), g0)
		assert.Equal(t, guidFromMAC(mac), d.Attr().NodeGUID)
	}
}
