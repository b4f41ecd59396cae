package qp

import (
	"net/netip"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
)

type wqeState uint8

const (
	wqePosted  wqeState = iota // not fully sent
	wqePending                 // every packet sent, awaiting ACK or response
	wqeDone                    // finished; waits only for its turn to complete
)

// sendWQE is a send work request as the QP keeps it. Its slices are
// preallocated at QP creation so that posting does not allocate.
type sendWQE struct {
	wrid       uint64
	entry      cq.Entry
	op         WROpcode
	flags      SendFlags
	signaled   bool
	sgl        []SGE
	mrs        []*device.MR // resolved from sgl at post
	inline     []byte
	isInline   bool
	length     uint32
	imm        uint32
	raddr      uint64
	rkey       uint32
	compareAdd uint64
	swap       uint64
	localErr   cq.Status // a local error found at post, reported when reached
	udAddr     netip.AddrPort
	udQPN      uint32
	udQKey     uint32
	udHop      uint8 // the address handle's hop limit and traffic class,
	udTClass   uint8 // for a backend that builds the IP header (afpacket)

	state    wqeState
	status   cq.Status
	started  bool // PSNs assigned (and an ORD credit held, for READ/atomic)
	firstPSN rocev2.PSN
	lastPSN  rocev2.PSN
	npkts    uint32
	nextPkt  uint32 // index of the next packet to send
	// chunksSent counts the READ chunks (or the one atomic) whose request
	// went out and took an ORD credit; chunksDone those answered in full.
	chunksSent uint32
	chunksDone uint32
}

// sendQueue is a ring of send WQEs with three monotonically increasing
// positions: head (oldest not yet completed), req (next for the requester)
// and tail (next free slot). head <= req <= tail.
type sendQueue struct {
	ring            []sendWQE
	head, req, tail uint64
}

func (s *sendQueue) init(n, maxSGE, maxInline int) {
	s.ring = make([]sendWQE, n)
	sgl := make([]SGE, n*maxSGE)
	mrs := make([]*device.MR, n*maxSGE)
	var inl []byte
	if maxInline > 0 {
		inl = make([]byte, n*maxInline)
	}
	for i := range s.ring {
		s.ring[i].sgl = sgl[i*maxSGE : i*maxSGE : (i+1)*maxSGE]
		s.ring[i].mrs = mrs[i*maxSGE : i*maxSGE : (i+1)*maxSGE]
		if maxInline > 0 {
			s.ring[i].inline = inl[i*maxInline : i*maxInline : (i+1)*maxInline]
		}
	}
}

func (s *sendQueue) at(i uint64) *sendWQE { return &s.ring[i%uint64(len(s.ring))] }
func (s *sendQueue) full() bool           { return s.tail-s.head == uint64(len(s.ring)) }
func (s *sendQueue) clear() {
	for i := s.head; i != s.tail; i++ {
		s.at(i).entry = nil
	}
	s.head, s.req, s.tail = 0, 0, 0
}

// recvWQE is a posted receive buffer.
type recvWQE struct {
	wrid     uint64
	entry    cq.Entry
	sgl      []SGE
	mrs      []*device.MR
	capacity uint64
	localErr cq.Status
}

type recvQueue struct {
	ring       []recvWQE
	head, tail uint64
}

func (r *recvQueue) init(n, maxSGE int) {
	r.ring = make([]recvWQE, n)
	sgl := make([]SGE, n*maxSGE)
	mrs := make([]*device.MR, n*maxSGE)
	for i := range r.ring {
		r.ring[i].sgl = sgl[i*maxSGE : i*maxSGE : (i+1)*maxSGE]
		r.ring[i].mrs = mrs[i*maxSGE : i*maxSGE : (i+1)*maxSGE]
	}
}

func (r *recvQueue) at(i uint64) *recvWQE { return &r.ring[i%uint64(len(r.ring))] }
func (r *recvQueue) full() bool           { return r.tail-r.head == uint64(len(r.ring)) }
func (r *recvQueue) empty() bool          { return r.head == r.tail }
func (r *recvQueue) clear() {
	for i := r.head; i != r.tail; i++ {
		r.at(i).entry = nil
	}
	r.head, r.tail = 0, 0
}

// sglCursor walks an SGL with its resolved MRs.
type sglCursor struct {
	sgl []SGE
	mrs []*device.MR
	i   int    // current SGE
	off uint32 // offset within it
}

// seek positions the cursor at byte off of the SGL.
func (c *sglCursor) seek(off uint64) {
	c.i, c.off = 0, 0
	for c.i < len(c.sgl) && off >= uint64(c.sgl[c.i].Length) {
		off -= uint64(c.sgl[c.i].Length)
		c.i++
	}
	c.off = uint32(off)
}

// gather copies len(dst) bytes from the SGL at the cursor into dst.
func (c *sglCursor) gather(pd *device.PD, dst []byte) error {
	for len(dst) > 0 {
		if c.i >= len(c.sgl) {
			return device.ErrOutOfMR
		}
		s := &c.sgl[c.i]
		n := min(uint32(len(dst)), s.Length-c.off)
		if err := c.mrs[c.i].CopyFrom(pd, s.Addr+uint64(c.off), dst[:n], 0); err != nil {
			return err
		}
		dst = dst[n:]
		c.advance(n)
	}
	return nil
}

// scatter copies src into the SGL at the cursor.
func (c *sglCursor) scatter(pd *device.PD, src []byte) error {
	for len(src) > 0 {
		if c.i >= len(c.sgl) {
			return device.ErrOutOfMR
		}
		s := &c.sgl[c.i]
		n := min(uint32(len(src)), s.Length-c.off)
		if err := c.mrs[c.i].CopyTo(pd, s.Addr+uint64(c.off), src[:n], device.AccessLocalWrite); err != nil {
			return err
		}
		src = src[n:]
		c.advance(n)
	}
	return nil
}

func (c *sglCursor) advance(n uint32) {
	c.off += n
	for c.i < len(c.sgl) && c.off == c.sgl[c.i].Length {
		c.i++
		c.off = 0
	}
}

// resolveSGL looks up each SGE's lkey and checks it lies inside its region
// of pd with the needed rights; it returns the total length.
func resolveSGL(dev *device.Device, pd *device.PD, sgl []SGE, mrs []*device.MR, need device.Access) (uint64, cq.Status) {
	var total uint64
	for i, s := range sgl {
		mr, isRKey := dev.LookupKey(s.LKey)
		if mr == nil || isRKey || mr.PD() != pd || !mr.Valid() {
			return 0, cq.LocProtErr
		}
		if mr.Access()&need != need {
			return 0, cq.LocProtErr
		}
		if s.Addr < mr.VA() || s.Addr-mr.VA()+uint64(s.Length) > uint64(mr.Len()) {
			return 0, cq.LocProtErr
		}
		mrs[i] = mr
		total += uint64(s.Length)
	}
	return total, cq.Success
}
