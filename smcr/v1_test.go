package smcr_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/smcr"
)

// Without a UEID only SMC-Rv1 is proposed, whose IP area must put the
// client on the server's subnet: two loopback addresses (the README's
// first example, 127.0.0.2 to 127.0.0.1; here a fresh pair of 127/8) are
// on lo's 127.0.0.0/8, and speak SMC-Rv1, not TCP.
func TestSMCRv1BetweenLoopbackAddresses(t *testing.T) {
	p := newPair(t, func(c *smcr.Config) { c.UEIDs = nil })
	c, s := p.dial(t)
	for _, conn := range []any{c, s} {
		info := conn.(*smcr.Conn).Info()
		require.Equal(t, smcr.ModeSMCRv1, info.Mode, "%+v", info)
	}
	exchange(t, c, s, 100000)
	assert.NoError(t, c.Close())
}
