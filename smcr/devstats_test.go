package smcr_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/cqlegacy"
	"github.com/goroce/goroce/smcr"
)

// The device counters see the completions of a request/response exchange,
// on both designs, and the device disappears from them once it closed.
func TestStatsOfDevice(t *testing.T) {
	for _, design := range []smcr.CQDesign{smcr.PooledCQ, cqlegacy.SMCR{}} {
		t.Run(design.String(), func(t *testing.T) {
			noLeaks(t)
			p := newPair(t, func(c *smcr.Config) { c.CQ = design })
			c, s := p.dial(t)
			dev := p.d.LocalAddr
			before, ok := smcr.StatsOfDevice(dev, 0)
			require.True(t, ok)
			assert.Equal(t, design.String(), before.Design)
			assert.Equal(t, 1, before.LinkGroups)
			buf := make([]byte, 3)
			for range 10 {
				_, err := c.Write([]byte("req"))
				require.NoError(t, err)
				_, err = s.Read(buf)
				require.NoError(t, err)
			}
			// Ten CDCs sent: their SEND completions come with the
			// peer's ACKs, which may still be on their way.
			waitFor(t, 30*time.Second, func() bool {
				after, ok := smcr.StatsOfDevice(dev, 0)
				return ok && after.CQ.Completions-before.CQ.Completions >= 10 && after.CQ.Wakeups > 0
			})
			_, ok = smcr.StatsOfDevice(netip.MustParseAddr("127.77.255.254"), 0)
			assert.False(t, ok)
		})
	}
}
