//go:build linux

package afpacket_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/hostile"
	"github.com/goroce/goroce/internal/vethtest"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/afpacket"
)

// Neighbour resolution goes through the kernel: a destination behind a
// gateway is sent to the gateway's MAC, and one the kernel cannot resolve
// fails with an error that names it.
func TestVethNeighbours(t *testing.T) { forModes(t, testVethNeighbours) }

func testVethNeighbours(t *testing.T, mode afpacket.ReceiveMode) {
	p := vethtest.New(t)
	// 198.19.x.0/24 is reached through B.
	beyond := netip.AddrFrom4([4]byte{198, 19, p.A.As4()[2], 5})
	vethtest.Run(t, "-n", p.NSA, "route", "add", netip.PrefixFrom(beyond, 24).Masked().String(), "via", p.B.String())
	a := open(t, p.NSA, afpacket.Config{Receive: mode, Interface: p.IfA})
	capB := newWireCapture(t, p.NSB, p.IfB)

	t.Run("through a gateway", func(t *testing.T) {
		pkts := packets(t, netip.AddrPortFrom(beyond, rocev2.UDPPort), 1, 3)
		require.NoError(t, a.Send(pkts))
		var got [][]byte
		require.True(t, hostile.WaitFor(context.Background(), 10*time.Second, func() bool {
			got = append(got, capB.drain()...)
			return len(got) >= 3
		}), "frames reach the gateway")
		for _, fr := range got {
			assert.Equal(t, p.MACB[:], fr[0:6], "to the gateway's MAC")
			var f rocev2.Frame
			require.NoError(t, rocev2.ParseEthernetFrame(fr, rocev2.UDPPort, &f))
			assert.Equal(t, beyond, f.Dst(), "to the destination's address")
		}
	})

	t.Run("no answer", func(t *testing.T) {
		afpacket.SetResolveTimeout(a, 200*time.Millisecond)
		nobody := netip.AddrFrom4([4]byte{198, 18, p.A.As4()[2], 99})
		dst := netip.AddrPortFrom(nobody, rocev2.UDPPort)
		require.NoError(t, a.Send(packets(t, dst, 1, 2)), "parked while the kernel asks")
		require.True(t, hostile.WaitFor(context.Background(), 10*time.Second, func() bool {
			return a.Stats().Unresolved >= 2
		}), "dropped once the kernel gives up")
		// For a second after, sends to it fail at once (this machine
		// being slow only makes the test not see it: then it parks again
		// and the kernel is asked again).
		err := a.Send(packets(t, dst, 1, 1))
		if err == nil {
			t.Skip("more than a second passed: the destination is being resolved again")
		}
		assert.Contains(t, err.Error(), "cannot reach "+nobody.String())
		assert.False(t, errors.Is(err, backend.ErrBackendClosed))
	})

	t.Run("the host itself", func(t *testing.T) {
		for _, dst := range []netip.Addr{netip.MustParseAddr("127.0.0.1"), p.A} {
			err := a.Send(packets(t, netip.AddrPortFrom(dst, rocev2.UDPPort), 1, 1))
			require.Error(t, err, "%v", dst)
			assert.Contains(t, err.Error(), "not loopback, not the device's own")
		}
	})
}
