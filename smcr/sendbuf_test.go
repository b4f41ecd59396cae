package smcr_test

import (
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/smcr"
)

// ackDropper drops every RC ACK it is asked to send while drop is set.
type ackDropper struct {
	backend.Backend
	drop *atomic.Bool
}

func (a ackDropper) Send(pkts []backend.Outgoing) error {
	if !a.drop.Load() {
		return a.Backend.Send(pkts)
	}
	keep := make([]backend.Outgoing, 0, len(pkts))
	for _, p := range pkts {
		if len(p.Buf) > 0 && rocev2.Opcode(p.Buf[0]) == rocev2.RCAcknowledge {
			continue
		}
		keep = append(keep, p)
	}
	return a.Backend.Send(keep)
}

// A connection that ends while its last WRITE is unacknowledged keeps its
// send buffer registered until the CDC after that WRITE completes: the
// requester may still retransmit the WRITE from it, and a deregistered
// buffer would fail it with a local protection error and kill the link
// group's only link (seen under loss: the next connection declined with
// "buffer registration failed"). The link then carries a new connection.
func TestSendBufferOutlivesUnackedWrites(t *testing.T) {
	noLeaks(t)
	var drop atomic.Bool
	wrapBackends(t, func(b backend.Backend) backend.Backend { return ackDropper{b, &drop} })
	p := newPair(t, nil)
	c, s := p.dial(t)
	requireMode(t, c, smcr.ModeSMCRv2)

	drop.Store(true)            // from now on no WRITE or CDC completes
	msg := make([]byte, 64<<10) // beyond the inline size: from the send buffer
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	_, err := c.Write(msg)
	require.NoError(t, err)
	got := make([]byte, len(msg))
	_, err = io.ReadFull(s, got)
	require.NoError(t, err)
	require.Equal(t, msg, got)
	require.NoError(t, c.Close())
	require.NoError(t, s.Close())
	// Both closed: the client's connection is released (on a goroutine of
	// its group), its CDCs are not acknowledged, so its send buffer must
	// still be registered.
	var valid bool
	require.Eventually(t, func() bool {
		var released bool
		released, valid = smcr.SendBufferState(c)
		return released
	}, 30*time.Second, time.Millisecond, "the connection was never released")
	require.True(t, valid, "the send buffer went while a WRITE from it was unacknowledged")

	drop.Store(false) // the retransmissions are acknowledged now
	c2, s2 := p.dial(t)
	requireMode(t, c2, smcr.ModeSMCRv2)
	require.NoError(t, transfer(t, c2, s2, 70001))
}
