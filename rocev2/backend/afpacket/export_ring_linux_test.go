package afpacket

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FakeRing is a receive ring in the process's own memory, which tests
// fill as the kernel would, or as a hostile one might.
type FakeRing struct{ r *ring }

// UseFakeRing makes b receive from a ring of blocks blocks of blockSize
// bytes, all the kernel's.
func UseFakeRing(b *Backend, blockSize, blocks int) *FakeRing {
	words := make([]uint64, blockSize*blocks/8) // blocks aligned as a mapping's are
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), blockSize*blocks)
	b.ring = newRing(mem, blockSize, blocks, false)
	return &FakeRing{b.ring}
}

// Block returns block i, to be written before HandOver.
func (f *FakeRing) Block(i int) []byte { return f.r.mem[i*f.r.size : (i+1)*f.r.size] }

// Put writes frames into block i as the kernel does (to this host, no
// virtio_net_hdr flags) and hands it over.
func (f *FakeRing) Put(i int, frames [][]byte) {
	f.Load(i, RingBlock(f.r.size, frames))
}

// Load copies blk (RingBlock's) into block i and hands it over.
func (f *FakeRing) Load(i int, blk []byte) {
	copy(f.Block(i), blk)
	f.HandOver(i)
}

// RingBlock returns a block of size bytes holding frames as the kernel
// writes them.
func RingBlock(size int, frames [][]byte) []byte {
	recs := make([]ringRec, len(frames))
	for k, fr := range frames {
		recs[k] = ringRec{frame: fr}
	}
	return putBlock(make([]byte, size), recs)
}

// HandOver gives block i to the process (TP_STATUS_USER), as the kernel
// does when it retires the block.
func (f *FakeRing) HandOver(i int) {
	atomic.StoreUint32(f.r.status(i), unix.TP_STATUS_USER)
}

// Returned reports whether block i is the kernel's (TP_STATUS_KERNEL).
func (f *FakeRing) Returned(i int) bool {
	return atomic.LoadUint32(f.r.status(i)) == unix.TP_STATUS_KERNEL
}
