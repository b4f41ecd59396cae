package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/cqlegacy"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend/udp"
	"github.com/goroce/goroce/rocev2/device"
)

// Queue depths of every benchmark QP. One request is outstanding per
// connection; the slack absorbs ACKs that trail the responses.
const (
	sendDepth = 8
	recvDepth = 4
	recvsUp   = 2 // receives kept posted
)

// endpoint is one process's side of an RDMA measurement: a device on a
// loopback address, a completion design in the chosen mode and one QP per
// connection.
type endpoint struct {
	dev   *device.Device
	pd    *device.PD
	cqs   cq.Allocator
	buf   []byte
	mr    *device.MR
	links []*link
	errs  atomic.Uint64
	first atomic.Value // the first error, for the report
}

// link is one connection's QP with its CQ lease and reusable entries.
type link struct {
	ep   *endpoint
	id   int
	qp   *qp.QP
	res  cq.Reservation
	psn  rocev2.PSN
	req  []qp.SGE // the client's request / the server's response
	recv []qp.SGE

	// Client side.
	start time.Time
	busy  atomic.Bool // a request is outstanding
	done  atomic.Uint64

	sendE sendEntry
	recvE recvEntry
	onRx  func(k *link) // what a receive completion does
}

// sendEntry completes a SEND; only errors matter.
type sendEntry struct{ k *link }

func (e *sendEntry) Done(wc *cq.WC) {
	if !wc.Status.OK() {
		e.k.ep.fail(fmt.Errorf("link %d: send: %v", e.k.id, wc.Status))
	}
}

// recvEntry completes a receive: repost it, then let the protocol act.
type recvEntry struct{ k *link }

func (e *recvEntry) Done(wc *cq.WC) {
	k := e.k
	if !wc.Status.OK() {
		if wc.Status != cq.WRFlushErr {
			k.ep.fail(fmt.Errorf("link %d: recv: %v", k.id, wc.Status))
		}
		return
	}
	k.postRecv()
	k.onRx(k)
}

func (ep *endpoint) fail(err error) {
	ep.errs.Add(1)
	ep.first.CompareAndSwap(nil, err)
}

// err returns the first error of the run, if any.
func (ep *endpoint) err() error {
	if e, ok := ep.first.Load().(error); ok {
		return fmt.Errorf("%d errors, first: %w", ep.errs.Load(), e)
	}
	return nil
}

// newAllocator returns the completion design of a mode:
//
//	legacy      the pre-pool design as SMC-R had it: one tasklet-like poller
//	            goroutine woken per event, every post sent at once
//	legacy-rtc  the same design run to completion (cq.PoolConfig.Devices:
//	            the tasklet runs on the receive goroutine after its batch,
//	            the sends of one run leave in one system call), to show how
//	            much of the difference that makes
//	pooled      the CQ pool, run to completion, with DIM
//	nodim       the CQ pool, run to completion, without DIM
func newAllocator(mode string, dev *device.Device) (cq.Allocator, error) {
	rtc := []cq.Device{dev}
	switch mode {
	case "legacy":
		return cqlegacy.New(cqlegacy.Config{}), nil
	case "legacy-rtc":
		return cqlegacy.New(cqlegacy.Config{Devices: rtc}), nil
	case "pooled":
		return cq.NewPool(cq.PoolConfig{Devices: rtc}), nil
	case "nodim":
		return cq.NewPool(cq.PoolConfig{NoDIM: true, Devices: rtc}), nil
	}
	return nil, fmt.Errorf("unknown mode %q", mode)
}

// openEndpoint opens a device on addr (ephemeral UDP port) with n QPs.
func openEndpoint(addr netip.Addr, t test, sendBytes, recvBytes int) (*endpoint, error) {
	be, err := udp.Open(udp.Config{Addr: netip.AddrPortFrom(addr, 0)})
	if err != nil {
		return nil, err
	}
	dev, err := device.New(device.Config{Backend: be})
	if err != nil {
		be.Close()
		return nil, err
	}
	alloc, err := newAllocator(t.Mode, dev)
	if err != nil {
		dev.Close()
		return nil, err
	}
	per := sendBytes + recvBytes*recvsUp
	ep := &endpoint{dev: dev, pd: dev.AllocPD(), cqs: alloc, buf: make([]byte, t.Clients*per)}
	if ep.mr, err = ep.pd.RegisterMR(ep.buf, device.AccessLocalWrite); err != nil {
		ep.close()
		return nil, err
	}
	for i := 0; i < t.Clients; i++ {
		res, err := ep.cqs.Reserve(sendDepth + recvDepth)
		if err != nil {
			ep.close()
			return nil, err
		}
		q, err := qp.Create(ep.pd, qp.InitAttr{
			Type: qp.RC, SendCQ: res.SendCQ(), RecvCQ: res.RecvCQ(),
			Cap: qp.Cap{MaxSendWR: sendDepth, MaxRecvWR: recvDepth},
			// Loopback UDP drops under a 512-connection burst; a benchmark
			// point should slow down on loss, not fail.
			RetryCnt7Infinite: true,
		})
		if err != nil {
			res.Release()
			ep.close()
			return nil, err
		}
		res.Bind(q.QPN())
		base := ep.mr.VA() + uint64(i*per)
		k := &link{ep: ep, id: i, qp: q, res: res, psn: qp.RandomPSN(),
			req:  []qp.SGE{{Addr: base, Length: uint32(sendBytes), LKey: ep.mr.LKey()}},
			recv: []qp.SGE{{Addr: base + uint64(sendBytes), Length: uint32(recvBytes), LKey: ep.mr.LKey()}},
		}
		k.sendE.k, k.recvE.k = k, k
		ep.links = append(ep.links, k)
	}
	return ep, nil
}

// endpointMsg describes the endpoint to the peer.
func (ep *endpoint) endpointMsg() msg {
	gid, _ := ep.dev.GID(1)
	m := msg{Kind: "endpoint", Port: ep.dev.LocalAddr().Port(), GID: gid[:]}
	for _, k := range ep.links {
		m.QPNs = append(m.QPNs, k.qp.QPN())
		m.PSNs = append(m.PSNs, uint32(k.psn))
	}
	return m
}

// connect brings every QP to RTS towards the peer's, and posts receives.
func (ep *endpoint) connect(peer msg) error {
	if len(peer.QPNs) != len(ep.links) || len(peer.PSNs) != len(ep.links) || len(peer.GID) != 16 {
		return errors.New("connect: peer endpoint does not match")
	}
	var gid device.GID
	copy(gid[:], peer.GID)
	for i, k := range ep.links {
		if err := k.qp.Modify(&qp.Attr{State: qp.Init, Port: 1, AccessFlags: device.AccessLocalWrite},
			qp.MaskState|qp.MaskPKeyIndex|qp.MaskPort|qp.MaskAccessFlags); err != nil {
			return err
		}
		for j := 0; j < recvsUp; j++ {
			k.postRecv()
		}
		if err := k.qp.Modify(&qp.Attr{
			State: qp.RTR, PathMTU: rocev2.MTU1024, DestQPN: peer.QPNs[i], RQPSN: rocev2.PSN(peer.PSNs[i]),
			MaxDestRdAtomic: 1, MinRNRTimer: 1,
			AH: qp.AH{DGID: gid, SGIDIndex: 1, HopLimit: 64, DestPort: peer.Port},
		}, qp.MaskState|qp.MaskAV|qp.MaskPathMTU|qp.MaskDestQPN|qp.MaskRQPSN|qp.MaskMaxDestRdAtomic|qp.MaskMinRNRTimer); err != nil {
			return err
		}
		if err := k.qp.Modify(&qp.Attr{
			State: qp.RTS, SQPSN: k.psn, Timeout: 12, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1,
		}, qp.MaskState|qp.MaskSQPSN|qp.MaskTimeout|qp.MaskRetryCnt|qp.MaskRNRRetry|qp.MaskMaxQPRdAtomic); err != nil {
			return err
		}
	}
	return nil
}

// postRecv posts one receive. All receives of a link share one entry: a
// receive completion carries no per-request context here.
func (k *link) postRecv() {
	wrid, e := k.res.Tag(&k.recvE)
	if _, err := k.qp.PostRecv([]qp.RecvWR{{WRID: wrid, Entry: e, SGL: k.recv}}); err != nil {
		k.ep.fail(fmt.Errorf("link %d: post recv: %w", k.id, err))
	}
}

// postSend sends the link's message (request or response).
func (k *link) postSend() {
	wrid, e := k.res.Tag(&k.sendE)
	if _, err := k.qp.PostSend([]qp.SendWR{{WRID: wrid, Entry: e, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: k.req}}); err != nil {
		k.ep.fail(fmt.Errorf("link %d: post send: %w", k.id, err))
	}
}

// serve makes every link answer each request with a response.
func (ep *endpoint) serve() {
	for _, k := range ep.links {
		k.onRx = (*link).postSend
	}
}

// runClient drives request/response on every link until stop, recording
// latencies; it returns the completed transactions.
func (ep *endpoint) runClient(d time.Duration, h *hist) uint64 {
	var stop atomic.Bool
	for _, k := range ep.links {
		k.onRx = func(k *link) {
			h.add(time.Since(k.start))
			k.done.Add(1)
			if stop.Load() {
				k.busy.Store(false)
				return
			}
			k.start = time.Now()
			k.postSend()
		}
	}
	for _, k := range ep.links {
		k.busy.Store(true)
		k.start = time.Now()
		k.postSend()
	}
	time.Sleep(d)
	stop.Store(true)
	var total uint64
	for _, k := range ep.links {
		total += k.done.Load()
	}
	// Let the requests in flight finish (bounded), so teardown is clean.
	deadline := time.Now().Add(2 * time.Second)
	for _, k := range ep.links {
		for k.busy.Load() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	return total
}

// close destroys the QPs, drains and releases their reservations, and
// closes the completion design and the device.
func (ep *endpoint) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, k := range ep.links {
		k.qp.Destroy()
	}
	for _, k := range ep.links {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k.res.Drain(ctx)
			k.res.Release()
		}()
	}
	wg.Wait()
	ep.cqs.Close()
	ep.dev.Close()
}
