package cq_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/cqlegacy"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/faulty"
	"github.com/goroce/goroce/rocev2/backend/memlink"
	"github.com/goroce/goroce/rocev2/device"
)

// side is one device with its pool and buffer.
type side struct {
	dev      *device.Device
	injector *faulty.Backend // nil without faults
	pd       *device.PD
	cqs      cq.Allocator
	reserve  func(cq.Allocator, int) (cq.Reservation, error)
	buf      []byte
	mr       *device.MR
}

// link is one QP of a connection, with its pooled CQ lease.
type link struct {
	s         *side
	id        int
	qp        *qp.QP
	lease     cq.Reservation
	psn       rocev2.PSN
	destroyed atomic.Bool

	// Sends wait here while the send queue is full: a send completes only
	// when its ACK arrives, and under loss, reordering and duplication a
	// link may have more unacknowledged sends than its depth (a lost ACK
	// is covered by a later one). Posting past the depth is flow control,
	// not an error: a send completion retries them, as SMC-R waits for a
	// free send slot.
	mu      sync.Mutex
	waiting []qp.SendWR
	errs    *errList
}

// postSend posts wr, or queues it behind the sends already waiting when
// the send queue is full.
func (k *link) postSend(wr qp.SendWR) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.waiting = append(k.waiting, wr)
	k.flushLocked()
}

// flushLocked posts the waiting sends while the send queue has room.
func (k *link) flushLocked() {
	for len(k.waiting) > 0 {
		_, err := k.qp.PostSend(k.waiting[:1])
		if errors.Is(err, qp.ErrQueueFull) {
			return
		}
		if err != nil {
			k.errs.add("link %d: post send: %v", k.id, err)
		}
		k.waiting = k.waiting[1:]
	}
}

const slot = 256 // bytes of buffer per connection

// design is a completion design under test: how to make it on the given
// devices (to run to completion) and how to reserve from it.
type design struct {
	new     func([]cq.Device) cq.Allocator
	reserve func(cq.Allocator, int) (cq.Reservation, error)
}

func pooled(cfg cq.PoolConfig, pc cq.PollContext) design {
	return design{
		new: func(d []cq.Device) cq.Allocator { cfg.Devices = d; return cq.NewPool(cfg) },
		reserve: func(a cq.Allocator, n int) (cq.Reservation, error) {
			return a.(*cq.Pool).Get(n, -1, pc)
		},
	}
}

var legacy = design{
	new:     func(d []cq.Device) cq.Allocator { return cqlegacy.New(cqlegacy.Config{Devices: d}) },
	reserve: cq.Allocator.Reserve,
}

// newSide opens a device and a completion design; with rtc the design runs
// to completion on the device (PoolConfig.Devices); with faults its packets
// go through a fault injector.
func newSide(t *testing.T, network *memlink.Network, addr string, des design, conns int, rtc bool, faults *faulty.Config) *side {
	var be backend.Backend
	be, err := network.Attach(netip.MustParseAddrPort(addr))
	require.NoError(t, err)
	var injector *faulty.Backend
	if faults != nil {
		c := *faults
		c.Seed = uint64(len(addr)) + uint64(addr[len(addr)-6]) // one seed per side
		injector = faulty.Wrap(be, c)
		be = injector.Backend()
	}
	dev, err := device.New(device.Config{Backend: be})
	require.NoError(t, err)
	var devs []cq.Device
	if rtc {
		devs = []cq.Device{dev}
	}
	s := &side{dev: dev, injector: injector, pd: dev.AllocPD(), cqs: des.new(devs), reserve: des.reserve, buf: make([]byte, conns*slot)}
	t.Cleanup(func() { s.cqs.Close(); dev.Close() })
	s.mr, err = s.pd.RegisterMR(s.buf, device.AccessLocalWrite)
	require.NoError(t, err)
	return s
}

func (s *side) newLink(t *testing.T, id int) *link {
	// Two sends at most: one awaiting its ACK while the next goes, so
	// waiting for send slots (link.postSend) happens all the time.
	const depth = 2
	l, err := s.reserve(s.cqs, 2*depth) // send + receive depth on one CQ
	require.NoError(t, err)
	q, err := qp.Create(s.pd, qp.InitAttr{
		Type: qp.RC, SendCQ: l.SendCQ(), RecvCQ: l.RecvCQ(),
		Cap: qp.Cap{MaxSendWR: depth, MaxRecvWR: depth},
	})
	require.NoError(t, err)
	l.Bind(q.QPN())
	return &link{s: s, id: id, qp: q, lease: l, psn: qp.RandomPSN()}
}

func (k *link) connect(t *testing.T, peer *link) {
	gid, err := peer.s.dev.GID(1)
	require.NoError(t, err)
	require.NoError(t, k.qp.Modify(&qp.Attr{State: qp.Init, Port: 1, AccessFlags: device.AccessLocalWrite},
		qp.MaskState|qp.MaskPKeyIndex|qp.MaskPort|qp.MaskAccessFlags))
	require.NoError(t, k.qp.Modify(&qp.Attr{
		State: qp.RTR, PathMTU: rocev2.MTU1024, DestQPN: peer.qp.QPN(), RQPSN: peer.psn, MaxDestRdAtomic: 1,
		AH: qp.AH{DGID: gid, SGIDIndex: 1, HopLimit: 64, DestPort: peer.s.dev.LocalAddr().Port()},
	}, qp.MaskState|qp.MaskAV|qp.MaskPathMTU|qp.MaskDestQPN|qp.MaskRQPSN|qp.MaskMaxDestRdAtomic|qp.MaskMinRNRTimer))
	require.NoError(t, k.qp.Modify(&qp.Attr{
		State: qp.RTS, SQPSN: k.psn, Timeout: 12, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1,
	}, qp.MaskState|qp.MaskSQPSN|qp.MaskTimeout|qp.MaskRetryCnt|qp.MaskRNRRetry|qp.MaskMaxQPRdAtomic))
}

func (k *link) sge() []qp.SGE {
	return []qp.SGE{{Addr: k.s.mr.VA() + uint64(k.id*slot), Length: 64, LKey: k.s.mr.LKey()}}
}

// wrEntry is one work request's completion entry: it must run exactly once,
// on its own link's QP, and never after the link was destroyed.
type wrEntry struct {
	k     *link
	recv  bool
	fired atomic.Int32
	next  func(*cq.WC) // what the protocol does next, from inside Done
	errs  *errList
}

func (e *wrEntry) Done(wc *cq.WC) {
	if e.fired.Add(1) != 1 {
		e.errs.add("link %d: entry completed twice", e.k.id)
	}
	if e.k.destroyed.Load() {
		e.errs.add("link %d: completion after destroy", e.k.id)
	}
	if wc.QPNum != e.k.qp.QPN() {
		e.errs.add("link %d: completion of QP %#x delivered to QP %#x's entry", e.k.id, wc.QPNum, e.k.qp.QPN())
	}
	if !wc.Status.OK() {
		e.errs.add("link %d: %v", e.k.id, wc.Status)
		return
	}
	if e.recv != wc.Opcode.IsRecv() {
		e.errs.add("link %d: %v delivered to a recv=%v entry", e.k.id, wc.Opcode, e.recv)
	}
	if !e.recv { // a send slot is free again
		e.k.mu.Lock()
		e.k.flushLocked()
		e.k.mu.Unlock()
	}
	if e.next != nil {
		e.next(wc)
	}
}

type errList struct {
	mu   sync.Mutex
	list []string
}

func (l *errList) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.list) < 20 {
		l.list = append(l.list, fmt.Sprintf(format, args...))
	}
}

func (l *errList) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.list...)
}

// Many QPs share a few pooled CQs under concurrent request/response traffic
// posted from inside completion handlers: every completion reaches the
// right entry exactly once, none arrives after its QP is destroyed and
// drained, and Put returns all capacity.
func TestManyQPsSharePooledCQs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		des     design
		vectors int // of a pool (0: the legacy design)
		rtc     bool
		faults  *faulty.Config
	}{
		{"softirq", pooled(cq.PoolConfig{Vectors: 3, MinCQE: 32}, cq.PollSoftIRQ), 3, false, nil},
		{"workqueue", pooled(cq.PoolConfig{Vectors: 2, Workers: 3, MinCQE: 32}, cq.PollWorkqueue), 2, false, nil},
		{"legacy", legacy, 0, false, nil},
		{"softirq run to completion", pooled(cq.PoolConfig{Vectors: 3, MinCQE: 32}, cq.PollSoftIRQ), 3, true, nil},
		{"workqueue run to completion", pooled(cq.PoolConfig{Vectors: 2, Workers: 3, MinCQE: 32}, cq.PollWorkqueue), 2, true, nil},
		{"legacy run to completion", legacy, 0, true, nil},
		{"softirq run to completion under faults", pooled(cq.PoolConfig{Vectors: 3, MinCQE: 32}, cq.PollSoftIRQ), 3, true,
			&faulty.Config{Loss: 0.03, Duplicate: 0.03, Reorder: 0.03, Corrupt: 0.03}},
		{"legacy run to completion under faults", legacy, 0, true,
			&faulty.Config{Loss: 0.03, Duplicate: 0.03, Reorder: 0.03, Corrupt: 0.03}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const conns, rounds = 40, 25
			network := memlink.NewNetwork()
			client := newSide(t, network, "127.0.0.1:4791", tc.des, conns, tc.rtc, tc.faults)
			server := newSide(t, network, "127.0.0.2:4791", tc.des, conns, tc.rtc, tc.faults)
			errs := &errList{}
			var wg sync.WaitGroup // one Done per expected completion
			wg.Add(conns * rounds * 4)
			type pair struct{ c, s *link }
			pairs := make([]pair, conns)
			post := func(k *link, recv bool, next func(*cq.WC)) {
				e := &wrEntry{k: k, recv: recv, next: next, errs: errs}
				wrid, entry := k.lease.Tag(e)
				if !recv {
					k.postSend(qp.SendWR{WRID: wrid, Entry: entry, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: k.sge()})
					return
				}
				if _, err := k.qp.PostRecv([]qp.RecvWR{{WRID: wrid, Entry: entry, SGL: k.sge()}}); err != nil {
					errs.add("link %d: post recv: %v", k.id, err)
				}
			}
			for i := range pairs {
				c, s := client.newLink(t, i), server.newLink(t, i)
				c.errs, s.errs = errs, errs
				c.connect(t, s)
				s.connect(t, c)
				pairs[i] = pair{c, s}
			}
			counted := func(*cq.WC) { wg.Done() }
			for i := range pairs {
				c, s := pairs[i].c, pairs[i].s
				// Server: each request's receive reposts itself and answers.
				var onRequest func(*cq.WC)
				onRequest = func(*cq.WC) {
					wg.Done()
					post(s, true, onRequest)
					post(s, false, counted)
				}
				post(s, true, onRequest)
				// Client: each response starts the next round.
				sent := 0
				var request func()
				onResponse := func(*cq.WC) {
					wg.Done()
					if sent < rounds {
						request()
					}
				}
				request = func() {
					sent++
					post(c, true, onResponse)
					post(c, false, counted)
				}
				request()
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(60 * time.Second): // hang guard only
				buf := make([]byte, 1<<20)
				t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
				for _, sd := range []*side{client, server} {
					t.Logf("%v: %+v", sd.dev.LocalAddr(), sd.dev.Counters.Snapshot())
				}
				require.FailNow(t, "hang", "errors: %v", errs.get())
			}
			require.Empty(t, errs.get())

			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for _, p := range pairs {
				for _, k := range []*link{p.c, p.s} {
					require.NoError(t, k.qp.Destroy())
					require.NoError(t, k.lease.Drain(ctx))
					k.destroyed.Store(true)
					k.lease.Release()
				}
			}
			require.Empty(t, errs.get())
			for _, s := range []*side{client, server} {
				st := s.cqs.Stats()
				assert.Zero(t, st.Reserved, "Put returned every reservation")
				assert.Zero(t, st.Orphans)
				assert.GreaterOrEqual(t, st.Completions, uint64(conns*rounds*2))
				if s.injector != nil {
					fs := s.injector.Stats()
					assert.Positive(t, fs.Lost+fs.Duplicated+fs.Reordered+fs.Corrupted, "faults were injected")
				}
				if tc.rtc {
					assert.Greater(t, st.InlineRuns, st.Wakeups/2, "most runs were on the receive goroutine")
				} else {
					assert.Zero(t, st.InlineRuns)
				}
				if tc.vectors > 0 {
					assert.Greater(t, st.CQs, tc.vectors, "40 links do not fit one batch of 32-entry CQs")
					assert.Less(t, st.CQs, conns, "links share CQs")
				}
			}
		})
	}
}
