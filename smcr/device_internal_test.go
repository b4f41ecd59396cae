package smcr

import (
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A send that fails because the device's address is gone takes the device
// down, whichever errno the kernel picks for it: Linux 6.18 says
// ENETUNREACH for a UDP socket bound to an address deleted (the route
// lookup finds no device with that source), older ones EINVAL. Other
// errors, or an address still there, are loss that RC recovers from.
func TestSendFailedAddressGone(t *testing.T) {
	for _, tc := range []struct {
		err      error
		assigned bool
		down     bool
	}{
		{syscall.EINVAL, false, true},
		{syscall.EADDRNOTAVAIL, false, true},
		{syscall.ENETUNREACH, false, true},
		{syscall.ENODEV, false, true},
		{syscall.ENETDOWN, false, true},
		{syscall.ENETUNREACH, true, false},
		{syscall.ENOBUFS, false, false},
		{syscall.EAGAIN, false, false},
	} {
		t.Run(fmt.Sprintf("%v assigned=%v", tc.err, tc.assigned), func(t *testing.T) {
			d := &smcDevice{key: netip.MustParseAddrPort("198.18.0.2:4791"), links: map[uint32]*link{}, downHold: time.Hour,
				assigned: func(netip.Addr) bool { return tc.assigned }}
			d.lastCheck.Store(mono() - int64(time.Second)) // the interfaces not looked at lately
			d.sendFailed(fmt.Errorf("udp: sendmmsg: %w", tc.err))
			assert.Equal(t, tc.down, !d.up())
		})
	}
}
