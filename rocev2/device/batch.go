package device

import (
	"sync"
	"sync/atomic"

	"github.com/goroce/goroce/rocev2"
)

// Send batching: one system call per poller run instead of one per post.
//
// A CQ poller that hands a batch of completions to their handlers brackets
// the run with BeginBatch and EndBatch (cq.PoolConfig.Devices). While a run
// is open, PostSend builds its packets into the device's shared batch
// instead of sending them at once, and EndBatch sends them together: the
// replies that 20 handlers post go out in one sendmmsg, as one UDP GSO
// datagram when they share a destination and size, and the peer receives
// them as one GRO datagram. This is the doorbell batching a NIC driver does
// with xmit_more at the end of a NAPI run.
//
// The open-run count is device-wide, not per goroutine (Go has no cheap way
// to tell which goroutine posts), so a post from any goroutine during a run
// waits for that run's end. Runs are bounded by their budget, and handlers
// must not block (as in a softirq); should one block anyway, the hold
// backstop (hold.go) sends what waits within two ticks.
type sendBatch struct {
	open atomic.Int32 // runs between BeginBatch and EndBatch
	mu   sync.Mutex   // guards tx; held from GetPostTx to PutPostTx
	tx   *TxBatch
}

// BeginBatch opens a run: posts until the matching EndBatch are sent
// together.
func (d *Device) BeginBatch() { d.sb.open.Add(1) }

// EndBatch closes a run and sends what the posts during it built (and what
// a Progress call held back).
func (d *Device) EndBatch() {
	d.sb.open.Add(-1)
	d.flushBatch()
	d.Release()
}

// flushBatch sends the shared batch, with what the receive path holds back
// in the same system call. Whichever run ends last after a post sends it: a
// post appends only while it sees a run open, under the lock that run's
// EndBatch takes after closing it.
func (d *Device) flushBatch() {
	d.sb.mu.Lock()
	if d.rxHeld.Load() && d.rxMu.TryLock() {
		d.sb.tx.flushWith(d.rxTx)
		d.rxHeld.Store(false)
		d.rxMu.Unlock()
	} else {
		d.sb.tx.Flush()
	}
	d.sb.mu.Unlock()
}

// GetPostTx returns the TxBatch a post builds its packets in: the shared
// batch while a run is open (locked until PutPostTx), else one of GetTx.
func (d *Device) GetPostTx() *TxBatch {
	if d.sb.open.Load() > 0 {
		d.sb.mu.Lock()
		if d.sb.open.Load() > 0 {
			if d.sb.tx.Len() == 0 {
				d.noteHold() // the backstop, should the run never end
			}
			return d.sb.tx
		}
		d.sb.mu.Unlock()
	}
	return d.GetTx()
}

// PutPostTx finishes a post: the shared batch is left for EndBatch to
// send, any other goes out now (PutTx).
func (d *Device) PutPostTx(tx *TxBatch) {
	if tx.shared {
		d.sb.mu.Unlock()
		return
	}
	d.PutTx(tx)
}

// Receive-batch hooks: running completion handlers where the packets were
// received.

type rxHook struct {
	id         uint64
	begin, end func()
}

type rxHooks struct {
	mu   sync.Mutex // serializes changes
	next uint64
	list atomic.Pointer[[]rxHook] // copy on write
}

// OnReceiveBatch registers begin and end to run on the receive goroutine
// around every batch of packets it handles: begin before the first packet
// is delivered, end after the last, with no device lock held, and with the
// ACKs the batch calls for held back until end returns (a send made in end,
// or EndBatch, takes them along). A CQ pool uses them to run the CQs the
// batch fired right there, as a kernel runs softirqs on the interrupted CPU
// at irq exit, instead of waking a poller goroutine (cq.PoolConfig.Devices).
// Every begin is followed by its end, even after remove; remove does not
// wait for a batch in progress.
func (d *Device) OnReceiveBatch(begin, end func()) (remove func()) {
	h := &d.hooks
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	id := h.next
	var list []rxHook
	if p := h.list.Load(); p != nil {
		list = append(list, *p...)
	}
	list = append(list, rxHook{id: id, begin: begin, end: end})
	h.list.Store(&list)
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		var kept []rxHook
		for _, o := range *h.list.Load() {
			if o.id != id {
				kept = append(kept, o)
			}
		}
		h.list.Store(&kept)
	}
}

// receiveBatch runs one batch of the receive goroutine between the hooks:
// with a Poller, what it has waiting; else the n datagrams in rxBatch.
func (d *Device) receiveBatch(p rocev2.Poller, n int) {
	var hooks []rxHook
	if p := d.hooks.list.Load(); p != nil {
		hooks = *p
	}
	for _, h := range hooks {
		h.begin()
	}
	d.rxMu.Lock()
	if p != nil {
		d.pollLocked(p)
	} else {
		d.deliverBatch(n)
	}
	if len(hooks) > 0 && d.rxTx.Len() > 0 {
		d.rxHeld.Store(true) // for the handlers' replies to take along
	} else {
		d.releaseLocked()
	}
	d.rxMu.Unlock()
	if len(hooks) == 0 {
		return
	}
	// While the hooks run, the CQ polls and arms of the handlers they run
	// must neither receive (this goroutine receives again right after)
	// nor send the held ACKs on their own: EndBatch sends them with the
	// replies, and the Release below whatever is left.
	d.inHooks.Store(true)
	for _, h := range hooks {
		h.end()
	}
	d.inHooks.Store(false)
	d.Release()
}
