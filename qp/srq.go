package qp

import (
	"errors"
	"fmt"
	"sync"

	"github.com/goroce/goroce/rocev2/device"
)

// SRQ is a shared receive queue (ibv_srq): receive WQEs that any number of
// RC, UC and UD QPs of its PD draw from, each inbound message taking the
// next one. A QP uses an SRQ when it is created with InitAttr.SRQ; its
// receive completions still go to its own receive CQ.
//
// The limit event (EventSRQLimitReached) fires once when the number of WQEs
// left drops below the armed limit; arming it again is Modify with
// MaskSRQLimit, as ibv_modify_srq.
//
// Locking: a QP takes a WQE under its own lock and then the SRQ's, never the
// other way round; the event handler runs after both are released.
type SRQ struct {
	pd     *device.PD
	onEvt  func(SRQEvent)
	maxSGE int

	mu        sync.Mutex
	rq        recvQueue
	limit     int // armed when > 0
	users     int // QPs created on the SRQ and not destroyed
	destroyed bool
}

// SRQAttr holds an SRQ's attributes (ibv_srq_attr).
type SRQAttr struct {
	MaxWR  int // WQEs the SRQ holds
	MaxSGE int // SGEs per WQE (at creation only)
	Limit  int // the limit event's threshold; 0: disarmed
}

// SRQAttrMask selects the fields of SRQAttr that Modify applies, numbered
// like ibv_srq_attr_mask.
type SRQAttrMask uint8

const (
	MaskSRQMaxWR SRQAttrMask = 1 << 0 // IBV_SRQ_MAX_WR: resize (not supported)
	MaskSRQLimit SRQAttrMask = 1 << 1 // IBV_SRQ_LIMIT: arm the limit event
)

// SRQEventType is an SRQ's asynchronous event (ibv_event_type).
type SRQEventType uint8

// EventSRQLimitReached is IBV_EVENT_SRQ_LIMIT_REACHED.
const EventSRQLimitReached SRQEventType = 15

// SRQEvent is an asynchronous event of an SRQ.
type SRQEvent struct {
	Type SRQEventType
	SRQ  *SRQ
}

// SRQInitAttr configures a new SRQ (ibv_srq_init_attr).
type SRQInitAttr struct {
	Attr SRQAttr
	// OnEvent, if set, receives the SRQ's events. It runs on the goroutine
	// of the QP that took the WQE, with no lock held: it may post to or
	// modify the SRQ.
	OnEvent func(SRQEvent)
}

// ErrSRQInUse is returned by Destroy while QPs still use the SRQ.
var ErrSRQInUse = errors.New("qp: SRQ still in use by QPs: destroy them first")

// CreateSRQ makes a shared receive queue in pd.
func CreateSRQ(pd *device.PD, ia SRQInitAttr) (*SRQ, error) {
	a := ia.Attr
	if a.MaxWR < 1 || a.MaxWR > device.MaxSRQWR {
		return nil, fmt.Errorf("qp: create SRQ: max_wr %d out of range 1..%d", a.MaxWR, device.MaxSRQWR)
	}
	if a.MaxSGE == 0 {
		a.MaxSGE = 1
	}
	if a.MaxSGE < 1 || a.MaxSGE > device.MaxSRQSGE {
		return nil, fmt.Errorf("qp: create SRQ: max_sge %d out of range 1..%d", a.MaxSGE, device.MaxSRQSGE)
	}
	if a.Limit < 0 || a.Limit > a.MaxWR {
		return nil, fmt.Errorf("qp: create SRQ: srq_limit %d out of range 0..max_wr %d", a.Limit, a.MaxWR)
	}
	s := &SRQ{pd: pd, onEvt: ia.OnEvent, maxSGE: a.MaxSGE, limit: a.Limit}
	s.rq.init(a.MaxWR, a.MaxSGE)
	return s, nil
}

// Query returns the SRQ's attributes: Limit is 0 once the event has fired.
func (s *SRQ) Query() SRQAttr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SRQAttr{MaxWR: len(s.rq.ring), MaxSGE: s.maxSGE, Limit: s.limit}
}

// Modify arms the limit event (MaskSRQLimit): it fires once when fewer than
// attr.Limit WQEs are left. Resizing (MaskSRQMaxWR) is not supported.
func (s *SRQ) Modify(attr *SRQAttr, mask SRQAttrMask) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.destroyed:
		return fmt.Errorf("qp: modify SRQ: %w", ErrDestroyed)
	case mask&MaskSRQMaxWR != 0:
		return errors.New("qp: modify SRQ: resizing (IBV_SRQ_MAX_WR) is not supported: create a new SRQ")
	case mask&^MaskSRQLimit != 0:
		return fmt.Errorf("qp: modify SRQ: unknown attribute mask %#x", uint8(mask))
	case mask&MaskSRQLimit != 0 && (attr.Limit < 0 || attr.Limit > len(s.rq.ring)):
		return fmt.Errorf("qp: modify SRQ: srq_limit %d out of range 0..max_wr %d", attr.Limit, len(s.rq.ring))
	}
	if mask&MaskSRQLimit != 0 {
		s.limit = attr.Limit
	}
	return nil
}

// PostRecv queues receive work requests (ibv_post_srq_recv). It returns how
// many were queued.
func (s *SRQ) PostRecv(wrs []RecvWR) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return 0, fmt.Errorf("qp: post SRQ recv: %w", ErrDestroyed)
	}
	dev := s.pd.Device()
	for i := range wrs {
		wr := &wrs[i]
		if s.rq.full() {
			return i, ErrQueueFull
		}
		if len(wr.SGL) > s.maxSGE {
			return i, fmt.Errorf("qp: post SRQ recv wr %d: %w: %d SGEs above max_sge %d", i, ErrBadWR, len(wr.SGL), s.maxSGE)
		}
		w := s.rq.at(s.rq.tail)
		w.wrid, w.entry = wr.WRID, wr.Entry
		w.sgl = append(w.sgl[:0], wr.SGL...)
		w.mrs = w.mrs[:len(w.sgl)]
		w.capacity, w.localErr = resolveSGL(dev, s.pd, w.sgl, w.mrs, device.AccessLocalWrite)
		s.rq.tail++
	}
	return len(wrs), nil
}

// Destroy releases the SRQ. It fails while a QP created on it exists; the
// WQEs still posted are discarded without completions.
func (s *SRQ) Destroy() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.destroyed:
		return fmt.Errorf("qp: destroy SRQ: %w", ErrDestroyed)
	case s.users > 0:
		return fmt.Errorf("qp: destroy SRQ: %w (%d)", ErrSRQInUse, s.users)
	}
	s.rq.clear()
	s.destroyed = true
	return nil
}

// attach and detach count the QPs using the SRQ.
func (s *SRQ) attach() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return fmt.Errorf("qp: create QP on an SRQ: %w", ErrDestroyed)
	}
	s.users++
	return nil
}

func (s *SRQ) detach() {
	s.mu.Lock()
	s.users--
	s.mu.Unlock()
}

// take moves the next WQE into dst (whose SGL slices hold maxSGE entries),
// as rxe copies it out of the shared ring. It reports whether there was
// one, and whether taking it crossed the armed limit (the limit is then
// disarmed: the event fires once).
func (s *SRQ) take(dst *recvWQE) (ok, limit bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rq.empty() {
		return false, false
	}
	w := s.rq.at(s.rq.head)
	dst.wrid, dst.entry, dst.capacity, dst.localErr = w.wrid, w.entry, w.capacity, w.localErr
	dst.sgl = append(dst.sgl[:0], w.sgl...)
	dst.mrs = append(dst.mrs[:0], w.mrs...)
	w.entry = nil
	clear(w.mrs)
	s.rq.head++
	if s.limit > 0 && int(s.rq.tail-s.rq.head) < s.limit {
		s.limit = 0
		return true, true
	}
	return true, false
}
