package afpacket

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseHopLimit(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want uint8
	}{
		{"64\n", 64},
		{"1", 1},
		{" 255 \n", 255},
		{"0", defaultHopLimit},
		{"256", defaultHopLimit},
		{"-3", defaultHopLimit},
		{"", defaultHopLimit},
		{"ttl", defaultHopLimit},
	} {
		assert.Equal(t, tt.want, parseHopLimit(tt.in), "%q", tt.in)
	}
	assert.NotZero(t, systemHopLimit("lo", false))
	assert.Equal(t, uint8(defaultHopLimit), systemHopLimit("no/such/iface", true), "an unreadable sysctl")
}
