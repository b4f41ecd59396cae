// Package backendtest holds the checks every rocev2.Backend's tests run.
package backendtest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/goroce/goroce/rocev2"
)

// CloseUnblocksReceive checks that Close makes a Receive blocked on b
// return rocev2.ErrBackendClosed, that Receive and Send fail with it after
// Close, and that a second Close is harmless. pkts is a batch b could send
// while open.
func CloseUnblocksReceive(t *testing.T, b rocev2.Backend, pkts []rocev2.Datagram) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := b.Receive(make([]rocev2.Datagram, 4))
		done <- err
	}()
	assert.NoError(t, b.Close())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, rocev2.ErrBackendClosed)
	case <-time.After(5 * time.Second): // hang guard only
		t.Fatal("Receive did not return after Close")
	}
	_, err := b.Receive(make([]rocev2.Datagram, 1))
	assert.ErrorIs(t, err, rocev2.ErrBackendClosed)
	assert.ErrorIs(t, b.Send(pkts), rocev2.ErrBackendClosed)
	assert.NoError(t, b.Close(), "second Close")
}
