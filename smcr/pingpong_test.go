package smcr_test

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/cqlegacy"
	"github.com/goroce/goroce/smcr"
)

// Request/response on one connection, as a redis client and server do it,
// on both CQ designs: every round trip must complete.
func TestPingPongBothDesigns(t *testing.T) {
	for _, design := range []smcr.CQDesign{smcr.PooledCQ, cqlegacy.SMCR{}} {
		t.Run(design.String(), func(t *testing.T) {
			noLeaks(t)
			p := newPair(t, func(c *smcr.Config) { c.CQ = design })
			c, s := p.dial(t)
			requireMode(t, c, smcr.ModeSMCRv2)
			const rounds = 2000
			done := make(chan error, 1)
			go func() {
				buf := make([]byte, 200)
				for range rounds {
					if _, err := io.ReadFull(s, buf); err != nil {
						done <- err
						return
					}
					if _, err := s.Write(make([]byte, 1000)); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			req, resp := make([]byte, 200), make([]byte, 1000)
			finished := make(chan int, 1)
			go func() {
				i := 0
				defer func() { finished <- i }()
				for ; i < rounds; i++ {
					if _, err := c.Write(req); err != nil {
						return
					}
					if _, err := io.ReadFull(c, resp); err != nil {
						return
					}
				}
			}()
			select {
			case i := <-finished:
				require.Equal(t, rounds, i)
			case <-time.After(60 * time.Second): // hang guard only
				c.Close()
				s.Close()
				t.Fatalf("hung: round trips stopped completing (%d done)", <-finished)
			}
			require.NoError(t, <-done)
		})
	}
}
