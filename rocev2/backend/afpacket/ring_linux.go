package afpacket

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/rocev2"
)

// The TPACKET_V3 receive ring (ReceiveRing). The kernel writes frames into
// blocks of a ring mapped into the process and hands a block over, by
// setting its status to TP_STATUS_USER, when it is full or its retire
// timer fires; the backend walks the block's records and gives it back
// with TP_STATUS_KERNEL. Frames are copied into the backend's receive
// buffers, the same ones recvmmsg fills, and every block is given back as
// soon as it is copied:
//
//   - the Bufs a Receive returns stay valid until the next call, and the
//     device may still be reading them when another goroutine closes the
//     backend; pointing them into the mapping would turn that Close into
//     a fault, where the heap buffers simply stay alive;
//   - a block the process holds is one the kernel cannot fill;
//   - the checks then read bytes the kernel can no longer change.
//
// The copy is one memmove per frame, which the ring's saved system calls
// pay for when blocks are full (doc.go has the figures).

// ringSlot is what the ring says of the frame it copied into one of the
// receive buffers.
type ringSlot struct {
	size    int               // bytes of the frame in the buffer
	drop    rocev2.ParseError // not zero: the frame was cut or too long
	pktType uint8
	status  uint32
	vnet    [vnetHdrLen]byte
}

// ring is a mapped TPACKET_V3 receive ring. Its mutex covers every access
// to the mapping, so that Close can unmap it while a Receive runs.
type ring struct {
	mu      sync.Mutex
	mem     []byte // the mapping; nil once closed
	unmap   bool   // mem is a mapping (tests use heap memory)
	size    int    // bytes per block
	blocks  int
	cur     int // the block being walked, or the next one to be
	walking bool
	walk    blockWalk
	bad     atomic.Uint64 // blocks skipped because a number in them lies
	readyFn func(fd uintptr) bool
}

func newRing(mem []byte, size, blocks int, unmap bool) *ring {
	r := &ring{mem: mem, unmap: unmap, size: size, blocks: blocks}
	r.readyFn = func(uintptr) bool { return r.ready() }
	return r
}

// ringRequest returns the tpacket_req3 for cfg. The frame size only has
// to divide the block size: TPACKET_V3 packs frames of any length.
func ringRequest(cfg RingConfig) (unix.TpacketReq3, error) {
	const frameSize = 1 << 11
	page := unix.Getpagesize()
	switch {
	case cfg.BlockSize < page || cfg.BlockSize%page != 0 || cfg.BlockSize > 1<<30:
		return unix.TpacketReq3{}, fmt.Errorf("afpacket: ring block size %d: must be a multiple of the page size (%d), at most 1 GiB", cfg.BlockSize, page)
	case cfg.Blocks < 1 || cfg.Blocks > 1<<16 || uint64(cfg.Blocks)*uint64(cfg.BlockSize) > 1<<32-1:
		return unix.TpacketReq3{}, fmt.Errorf("afpacket: ring of %d blocks of %d bytes: between 1 and 65536 blocks, under 4 GiB in all", cfg.Blocks, cfg.BlockSize)
	}
	ms := (cfg.Retire + time.Millisecond - 1) / time.Millisecond
	return unix.TpacketReq3{
		Block_size:     uint32(cfg.BlockSize),
		Block_nr:       uint32(cfg.Blocks),
		Frame_size:     frameSize,
		Frame_nr:       uint32(cfg.BlockSize / frameSize * cfg.Blocks),
		Retire_blk_tov: uint32(min(max(ms, 1), 1<<31)),
	}, nil
}

// setupRing makes fd's receive side a TPACKET_V3 ring and maps it. It runs
// before the socket is bound, so that no frame is ever queued outside the
// ring.
func setupRing(fd int, req unix.TpacketReq3) ([]byte, error) {
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
		return nil, fmt.Errorf("PACKET_VERSION TPACKET_V3: %w", err)
	}
	if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return nil, fmt.Errorf("PACKET_RX_RING of %d blocks of %d bytes: %w (a smaller Ring.BlockSize or fewer Ring.Blocks may fit)", req.Block_nr, req.Block_size, err)
	}
	mem, err := unix.Mmap(fd, 0, int(req.Block_size)*int(req.Block_nr), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap the receive ring: %w", err)
	}
	return mem, nil
}

// status returns the word of block i the kernel and the process hand it
// over with. Blocks start on page boundaries, so the word is aligned.
func (r *ring) status(i int) *uint32 {
	return (*uint32)(unsafe.Pointer(&r.mem[i*r.size+blockStatusOff]))
}

// ready reports whether a frame may be waiting: the block being walked,
// or the next one handed over. It is also true once the ring is closed, so
// that a waiting Receive returns.
func (r *ring) ready() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mem == nil || r.walking || atomic.LoadUint32(r.status(r.cur))&unix.TP_STATUS_USER != 0
}

// fill copies up to len(slots) frames into the receive buffers (bufSize
// bytes each, in bufs) and returns how many it copied, giving back every
// block it finishes.
func (r *ring) fill(slots []ringSlot, bufs []byte, bufSize int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for n < len(slots) && r.mem != nil {
		if !r.walking {
			if atomic.LoadUint32(r.status(r.cur))&unix.TP_STATUS_USER == 0 {
				break
			}
			if !r.walk.start(r.mem[r.cur*r.size : (r.cur+1)*r.size]) {
				r.bad.Add(1)
				r.giveBack()
				continue
			}
			r.walking = true
		}
		f, res := r.walk.next()
		switch res {
		case walkFrame:
			s := &slots[n]
			n++
			*s = ringSlot{pktType: f.pktType, status: f.status}
			if f.cut || len(f.data) > bufSize {
				s.drop = rocev2.ErrDatagram // longer than a block or a buffer: never cut to look right
			} else {
				copy(s.vnet[:], f.vnet)
				s.size = copy(bufs[(n-1)*bufSize:n*bufSize], f.data)
			}
			if r.walk.left == 0 {
				r.giveBack() // its last record: the kernel may have the block now
			}
		case walkBad:
			r.bad.Add(1)
			r.giveBack()
		case walkEnd:
			r.giveBack()
		}
	}
	return n
}

// giveBack returns the current block to the kernel and moves to the next.
func (r *ring) giveBack() {
	atomic.StoreUint32(r.status(r.cur), unix.TP_STATUS_KERNEL)
	r.walking = false
	r.walk = blockWalk{}
	r.cur = (r.cur + 1) % r.blocks
}

// close unmaps the ring once no Receive is in it.
func (r *ring) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mem != nil && r.unmap {
		_ = unix.Munmap(r.mem)
	}
	r.mem = nil
}
