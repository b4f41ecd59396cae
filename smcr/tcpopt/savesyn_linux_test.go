package tcpopt

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSYNHasOptionUnprivileged: a listener with SaveSYN sees that a plain
// client's SYN has no option; the kernel hands the SYN out once; a
// listener without SaveSYN has none. Needs no privilege.
func TestSYNHasOptionUnprivileged(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		t.Run(network, func(t *testing.T) {
			addr := map[string]string{"tcp4": "127.0.0.1:0", "tcp6": "[::1]:0"}[network]
			if network == "tcp6" && !haveIPv6Loopback() {
				t.Skip("skipping: no ::1 here")
			}
			ln := listenOn(t, network, addr, SaveSYN)
			_ = dial(t, nil, ln.Addr())
			a := accept(t, ln)
			got, err := SYNHasOption(a)
			require.NoError(t, err)
			require.False(t, got)
			_, err = SYNHasOption(a)
			require.ErrorIs(t, err, ErrNoSavedSYN, "the saved SYN is handed out once")

			plain := listenOn(t, network, addr, nil)
			_ = dial(t, nil, plain.Addr())
			_, err = SYNHasOption(accept(t, plain))
			require.ErrorIs(t, err, ErrNoSavedSYN)
		})
	}
}

// TestSYNHasOptionLive: an unprivileged listener (SaveSYN only) sees the
// option in a Signaller's SYN but does not echo it, so the dialer learns
// that its peer did not signal.
func TestSYNHasOptionLive(t *testing.T) {
	needRoot(t)
	s := openSignaller(t)
	ln := listen(t, SaveSYN)
	cp := startCapture(t, portOf(ln.Addr()))
	c := dial(t, s.Control, ln.Addr())
	a := accept(t, ln)
	got, err := SYNHasOption(a)
	require.NoError(t, err)
	require.True(t, got)
	got, err = s.PeerSignalled(c)
	require.NoError(t, err)
	require.False(t, got)
	h := cp.handshake(t)
	requireOption(t, "SYN", h.syn, true)
	requireOption(t, "SYN-ACK", h.synack, false)
}
