package device

import (
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
)

// post builds one packet per payload as PostSend does (GetPostTx,
// PutPostTx), one post each. It may run on the receive goroutine: it
// reports errors without FailNow.
func post(t *testing.T, d *Device, payloads ...string) {
	t.Helper()
	f := rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: 0x99}
	for _, p := range payloads {
		tx := d.GetPostTx()
		b, err := f.Append(tx.Buffer(), []byte(p))
		if assert.NoError(t, err) {
			tx.Commit(b, netip.MustParseAddrPort("127.0.0.2:4791"))
		}
		d.PutPostTx(tx)
	}
}

// Posts made while a poller run is open wait for its end and leave in one
// Backend.Send; posts outside a run leave at once; a run left open is sent
// by the backstop.
func TestPostsDuringARunLeaveTogether(t *testing.T) {
	d, be, _ := openEcho(t)

	post(t, d, "now")
	require.Equal(t, [][]string{{"now"}}, be.sent(), "no run open: sent at once")

	d.BeginBatch()
	d.BeginBatch() // two pollers in a run
	post(t, d, "a", "b")
	assert.Len(t, be.sent(), 1, "held while the runs are open")
	d.EndBatch()
	assert.Equal(t, []string{"a", "b"}, be.sent()[1], "the first run to end sends them, in one call")
	post(t, d, "c")
	d.EndBatch()
	assert.Equal(t, []string{"c"}, be.sent()[2])
	post(t, d, "d")
	assert.Equal(t, []string{"d"}, be.sent()[3], "all runs ended: sent at once again")

	d.BeginBatch() // a run that never ends (a handler that blocks)
	post(t, d, "stuck")
	require.Eventually(t, func() bool { return len(be.sent()) == 5 }, time.Second, holdBackstop/4,
		"the backstop did not send the posts of a run that never ended")
	assert.Equal(t, []string{"stuck"}, be.sent()[4])
	d.EndBatch()
}

// readyBackend is a pollOnly whose WaitReadable returns once per ready
// token, so that the device's receive goroutine handles queued packets.
type readyBackend struct {
	*pollOnly
	ready chan struct{}
}

func (r *readyBackend) WaitReadable() error {
	select {
	case <-r.ready:
		return nil
	case <-r.closed:
		return rocev2.ErrBackendClosed
	}
}

// The receive goroutine calls the hooks around each batch; the answers the
// batch calls for are held until end returns, so that what end posts in a
// run goes out with them in one send; without hooks, or after remove, they
// go out at once.
func TestReceiveBatchHooks(t *testing.T) {
	be := &readyBackend{pollOnly: newPollOnly(), ready: make(chan struct{})}
	d, err := New(Config{Backend: be})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	qpn, err := d.AddQP(&echoQP{qpn: 0x99})
	require.NoError(t, err)

	var begins, ends atomic.Int32
	endDone := make(chan []int, 1)
	var progressed atomic.Bool
	remove := d.OnReceiveBatch(func() { begins.Add(1) }, func() {
		ends.Add(1)
		// A handler's CQ poll and arm inside the hooks: no receiving (the
		// goroutine receives next), no sending of the held answer alone.
		be.queue(t, qpn, "later")
		progressed.Store(d.Progress())
		d.Release()
		held := len(be.sent()) // nothing sent yet: the answer is held
		d.BeginBatch()
		post(t, d, "reply")
		d.EndBatch()
		endDone <- []int{held, len(be.sent())}
	})

	be.queue(t, qpn, "req")
	be.ready <- struct{}{}
	got := <-endDone
	assert.False(t, progressed.Load(), "Progress inside the hooks receives nothing")
	assert.Equal(t, []int{0, 1}, got, "held during the batch, then one send")
	assert.Equal(t, [][]string{{"reply", "re:req"}}, be.sent(), "the reply first, the held answer with it")
	assert.EqualValues(t, 1, begins.Load())
	assert.EqualValues(t, 1, ends.Load())

	remove()
	be.queue(t, qpn, "again")
	be.ready <- struct{}{}
	require.Eventually(t, func() bool { return len(be.sent()) == 2 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, []string{"re:later", "re:again"}, be.sent()[1], "no hooks: the answers leave after the batch")
	assert.EqualValues(t, 1, ends.Load(), "removed hooks are not called")
}
