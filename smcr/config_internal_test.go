package smcr

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A library user's default linger is short: WaitIdle before exit waits
// for a client's group at most 15 s after its last connection, not
// Linux's 10 minutes (which a Config can still ask for).
func TestDefaultLinkGroupLinger(t *testing.T) {
	c, err := Config{}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, DefaultLinkGroupLinger, c.LinkGroupLinger)
	assert.LessOrEqual(t, lingerOf(roleClient, c.LinkGroupLinger), 15*time.Second)
	c, err = Config{LinkGroupLinger: LinuxLinkGroupLinger}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, 10*time.Minute, c.LinkGroupLinger)
}
