//go:build linux

package smcr_test

import (
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/shm"
	"github.com/goroce/goroce/smcr"
	"github.com/stretchr/testify/require"
)

// overShm has a pair's stacks use the shared-memory link between their
// devices, in a run directory of the test's own.
func overShm(t *testing.T) func(*smcr.Config) {
	dir := t.TempDir()
	return func(c *smcr.Config) {
		c.Backend = func(ap netip.AddrPort) (backend.Backend, error) { return shm.Open(shm.Config{Addr: ap, Dir: dir}) }
	}
}

// SMC-R over the shared-memory link: every size across every wrap, and a
// link group of 200 connections, as over UDP.
func TestTransferSizesOverShm(t *testing.T) { testTransferSizes(t, overShm(t)) }

func TestManyConnectionsOverShm(t *testing.T) { testManyConnectionsShareALinkGroup(t, overShm(t)) }

// Busy-polled Reads (Config.BusyPoll) take their data on their own
// goroutine: every size across every wrap still arrives intact, and on a
// ping-pong the Reads do take the packets (the budget is long enough that
// every answer comes within it, however busy the machine).
func TestBusyPolledReadsOverShm(t *testing.T) {
	busy := func(budget time.Duration) func(*smcr.Config) {
		shmMod := overShm(t)
		return func(c *smcr.Config) { shmMod(c); c.BusyPoll = budget }
	}
	t.Run("sizes", func(t *testing.T) { testTransferSizes(t, busy(50*time.Microsecond)) })
	t.Run("ping-pong", func(t *testing.T) {
		p := newPair(t, busy(time.Second))
		c, s := p.dial(t)
		defer c.Close()
		defer s.Close()
		msg, got := make([]byte, 100), make([]byte, 100)
		for i := range 200 {
			msg[0] = byte(i)
			for _, dir := range [][2]net.Conn{{c, s}, {s, c}} {
				_, err := dir[0].Write(msg)
				require.NoError(t, err)
				_, err = io.ReadFull(dir[1], got)
				require.NoError(t, err)
				require.Equal(t, msg, got)
			}
		}
		for _, a := range []net.Addr{c.LocalAddr(), s.LocalAddr()} {
			ap := netip.MustParseAddrPort(a.String())
			st, ok := smcr.StatsOfDevice(ap.Addr(), 0)
			require.True(t, ok, "the device of %v is open", ap)
			require.NotZero(t, st.BusyPolled, "the Reads on %v took packets themselves", ap)
		}
	})
}
