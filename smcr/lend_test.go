//go:build linux

package smcr_test

import (
	"io"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/smcr"
)

// A Read that waits serves its device itself (device.WaitOn) once the
// device's receive goroutine has stepped aside: on a ping-pong between an
// echo goroutine and a client, over either link, with and without read
// deadlines (go-redis sets one per command), both sides' Reads lend, the
// bytes arrive intact, and a deadline that passes during a lent Read ends
// it.
func TestLentReads(t *testing.T) {
	cases := []struct {
		name      string
		shm       bool
		deadlines bool
	}{
		{"udp", false, false},
		{"udp with deadlines", false, true},
		{"shm", true, false},
		{"shm with deadlines", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mod func(*smcr.Config)
			if tc.shm {
				mod = overShm(t)
			}
			p := newPair(t, mod)
			c, s := p.dial(t)
			defer c.Close()
			defer s.Close()
			setDeadline := func(conn net.Conn) {
				if tc.deadlines {
					require.NoError(t, conn.SetReadDeadline(time.Now().Add(time.Minute)))
				}
			}
			const rounds, size = 300, 64
			echoed := make(chan error, 1)
			go func() {
				buf := make([]byte, size)
				for range rounds {
					if tc.deadlines {
						s.SetReadDeadline(time.Now().Add(time.Minute))
					}
					if _, err := io.ReadFull(s, buf); err != nil {
						echoed <- err
						return
					}
					if _, err := s.Write(buf); err != nil {
						echoed <- err
						return
					}
				}
				echoed <- nil
			}()
			msg, got := make([]byte, size), make([]byte, size)
			for i := range rounds {
				for k := range msg {
					msg[k] = byte(i + k)
				}
				_, err := c.Write(msg)
				require.NoError(t, err)
				setDeadline(c)
				_, err = io.ReadFull(c, got)
				require.NoError(t, err)
				require.Equal(t, msg, got, "round %d", i)
			}
			require.NoError(t, <-echoed)
			for _, a := range []net.Addr{c.LocalAddr(), s.LocalAddr()} {
				ap := netip.MustParseAddrPort(a.String())
				st, ok := smcr.StatsOfDevice(ap.Addr(), 0)
				require.True(t, ok, "the device of %v is open", ap)
				require.NotZero(t, st.LentWaits, "the Reads on %v served their device", ap)
			}

			// Nothing comes: the deadline ends the Read, lent or not.
			require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
			_, err := c.Read(got)
			require.ErrorIs(t, err, os.ErrDeadlineExceeded)
			// Then a Read that waits with no deadline ends when the peer
			// writes.
			require.NoError(t, c.SetReadDeadline(time.Time{}))
			go s.Write(msg[:1])
			n, err := c.Read(got)
			require.NoError(t, err)
			require.Equal(t, 1, n)
		})
	}
}
