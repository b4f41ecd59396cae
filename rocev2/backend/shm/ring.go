package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"
)

// A ring is one direction of a pairing: a single-producer, single-consumer
// queue of variable-length records in memory both processes map. Its
// producer creates it (a sealed memfd) and is the only one to write records
// and the tail; the consumer writes only the head and its sleeping flag.
// Either side may be hostile: everything one reads of what the other writes
// is checked before use, and a ring found inconsistent is corrupt for good.
//
// Layout (all integers little-endian; the control words sit on cache lines
// of their own so that the two sides do not write the same line):
//
//	offset  size  written by  field
//	0       8     producer    magic "goroceRQ"
//	8       4     producer    version (1)
//	16      8     producer    data size (a power of two)
//	64      8     producer    tail: bytes published, ever
//	128     4     producer    waiting: 1 while the producer waits for room
//	192     8     consumer    head: bytes consumed, ever
//	256     4     consumer    sleeping: 1 while the consumer sleeps (and from format until it first looks)
//	4096    size  producer    data: records
//
// A record is an 8-byte header (payload length, TTL, TOS, two reserved
// bytes) and the payload, padded to 8 bytes. A record never wraps: where
// the next one does not fit before the end, the producer writes a pad
// header (length padLen) and the record starts at offset 0.
//
// Why variable records and not fixed slots: a ping-pong's ACKs are ~32
// bytes and a full packet ~4.1 KB. Fixed 4.2 KB slots would hold 250
// packets in a 1 MiB ring whatever their size, and an ACK would dirty a
// whole slot's header line plus its own; records use what a packet needs,
// so the same ring holds 32 times as many ACKs, and a burst of full packets
// costs one pad per lap at most.
//
// Wake-ups (Dekker on sequentially consistent atomics, both sides): the
// consumer stores sleeping=1 and then loads the tail before it sleeps; the
// producer stores the tail and then swaps sleeping from 1 to 0, ringing the
// doorbell only if it did. Either the consumer sees the new tail or the
// producer sees it sleeping; the swap makes one wake per sleep, whatever
// the number of batches published meanwhile. Room for a waiting producer
// works the same way, mirrored (head and waiting).
const (
	ringHeaderSize = 4096
	ringMagic      = "goroceRQ"
	ringVersion    = 1

	offMagic    = 0
	offVersion  = 8
	offSize     = 16
	offTail     = 64
	offWaiting  = 128
	offHead     = 192
	offSleeping = 256

	recHeader = 8
	padLen    = 0xFFFFFFFF
)

// errCorrupt is what a ring whose shared words or records break its rules
// is: the pairing that owns it is torn down.
var errCorrupt = errors.New("shm: ring corrupt (the peer wrote what no producer or consumer may)")

// recordLen is the ring space a record of an n-byte payload takes.
func recordLen(n int) uint64 { return recHeader + uint64(n+7)&^7 }

// ring is a view of one ring's mapping.
type ring struct {
	mem  []byte // header page and data
	data []byte
	size uint64
	mask uint64
	race unsafe.Pointer // the race detector's name for a mapped ring (race_on.go)
}

// newRing views mem (the header page and a power-of-two data area).
func newRing(mem []byte) (ring, error) {
	if len(mem) <= ringHeaderSize {
		return ring{}, fmt.Errorf("shm: ring of %d bytes: no room for data", len(mem))
	}
	size := uint64(len(mem) - ringHeaderSize)
	if size&(size-1) != 0 || size < minRingSize {
		return ring{}, fmt.Errorf("shm: ring data of %d bytes: a power of two of at least %d is needed", size, minRingSize)
	}
	return ring{mem: mem, data: mem[ringHeaderSize:], size: size, mask: size - 1}, nil
}

func (r *ring) word64(off int) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&r.mem[off])) }
func (r *ring) word32(off int) *atomic.Uint32 { return (*atomic.Uint32)(unsafe.Pointer(&r.mem[off])) }

// format writes a new ring's header: the producer does it once, before the
// ring is passed on.
func (r *ring) format() {
	clear(r.mem[:ringHeaderSize])
	copy(r.mem[offMagic:], ringMagic)
	binary.LittleEndian.PutUint32(r.mem[offVersion:], ringVersion)
	binary.LittleEndian.PutUint64(r.mem[offSize:], r.size)
	// Born with its consumer asleep: the answerer of a rendezvous installs
	// its side, and publishes what waited for the pairing, before the
	// dialer has mapped this ring. The dialer's receive goroutine may be
	// parked by then with no flag of this ring to set, so the first
	// publish must ring its doorbell.
	r.word32(offSleeping).Store(1)
}

// checkFormat reports whether the header says what the hello said: the
// consumer checks it once, when it maps the ring. (Geometry is never read
// from the header again: the peer could change it.)
func (r *ring) checkFormat() error {
	var h [24]byte
	copy(h[:], r.mem) // one copy, then look: the peer may write meanwhile
	if string(h[offMagic:offMagic+8]) != ringMagic || binary.LittleEndian.Uint32(h[offVersion:]) != ringVersion ||
		binary.LittleEndian.Uint64(h[offSize:]) != r.size {
		return fmt.Errorf("shm: ring header is not a version %d ring of %d bytes", ringVersion, r.size)
	}
	return nil
}

// producer is the writing side of a ring. Its tail is private until
// published; the head it reads from shared memory is checked against what
// a consumer can have consumed.
type producer struct {
	ring
	tail uint64 // written, published or not
	pub  uint64 // published
	head uint64 // the consumer's head, as last read and checked
}

// refresh reads the consumer's head.
func (p *producer) refresh() error {
	h := p.word64(offHead).Load()
	if h < p.head || h > p.pub || h&7 != 0 {
		return errCorrupt
	}
	p.head = h
	return nil
}

// fits reports whether a record of n payload bytes fits now, with the pad
// in front of it that its position may need.
func (p *producer) fits(n int) bool {
	need := recordLen(n)
	if contig := p.size - p.tail&p.mask; need > contig {
		need += contig
	}
	return p.size-(p.tail-p.head) >= need
}

// put appends a record of pkt; false means no room (even after reading the
// head again). The record is not visible until publish.
func (p *producer) put(pkt []byte, ttl, tos uint8) (bool, error) {
	if !p.fits(len(pkt)) {
		if err := p.refresh(); err != nil {
			return false, err
		}
		if !p.fits(len(pkt)) {
			return false, nil
		}
	}
	pos := p.tail & p.mask
	if contig := p.size - pos; recordLen(len(pkt)) > contig {
		binary.LittleEndian.PutUint32(p.data[pos:], padLen)
		p.tail += contig
		pos = 0
	}
	h := p.data[pos : pos+recHeader]
	binary.LittleEndian.PutUint32(h, uint32(len(pkt)))
	h[4], h[5], h[6], h[7] = ttl, tos, 0, 0
	copy(p.data[pos+recHeader:], pkt)
	p.tail += recordLen(len(pkt))
	return true, nil
}

// publish makes what put wrote visible and reports whether the consumer
// sleeps and must be woken; the swap clears its flag, so a consumer is
// woken once per sleep.
func (p *producer) publish() (wake bool) {
	if p.tail == p.pub {
		return false
	}
	raceRelease(p.race)
	p.word64(offTail).Store(p.tail)
	p.pub = p.tail
	return p.word32(offSleeping).CompareAndSwap(1, 0)
}

// wantRoom flags that the producer waits for room and reports whether a
// record of n bytes fits after all (the consumer may have consumed between
// the last look and the flag: Dekker, as for sleeping).
func (p *producer) wantRoom(n int) (bool, error) {
	p.word32(offWaiting).Store(1)
	if err := p.refresh(); err != nil {
		return false, err
	}
	return p.fits(n), nil
}

// consumer is the reading side of a ring. Its head is private until
// released; the tail it reads is checked against what a producer can have
// written, and every record header is copied, then checked, before use.
type consumer struct {
	ring
	head     uint64 // consumed, released or not
	released uint64
	tail     uint64 // the producer's tail, as last read and checked
	max      int    // largest payload accepted
}

// poll reads the producer's tail and reports whether records wait.
func (c *consumer) poll() (bool, error) {
	t := c.word64(offTail).Load()
	if t < c.tail || t-c.head > c.size || t&7 != 0 {
		return false, errCorrupt
	}
	if t != c.tail {
		raceAcquire(c.race)
	}
	c.tail = t
	return t != c.head, nil
}

// next returns the next record's payload, or nil when none waits of those
// the last poll saw. The payload is a view of shared memory the peer may
// change at any time: copy it at once and look only at the copy.
func (c *consumer) next() (pkt []byte, ttl, tos uint8, err error) {
	for c.head != c.tail {
		pos := c.head & c.mask
		avail := c.tail - c.head
		if avail < recHeader {
			return nil, 0, 0, errCorrupt
		}
		var h [recHeader]byte
		copy(h[:], c.data[pos:]) // read once: the peer may write meanwhile
		n := binary.LittleEndian.Uint32(h[:])
		if n == padLen {
			skip := c.size - pos
			if skip > avail || pos == 0 {
				return nil, 0, 0, errCorrupt
			}
			c.head += skip
			continue
		}
		if int64(n) > int64(c.max) {
			return nil, 0, 0, errCorrupt
		}
		need := recordLen(int(n))
		if need > c.size-pos || need > avail {
			return nil, 0, 0, errCorrupt
		}
		c.head += need
		return c.data[pos+recHeader : pos+recHeader+uint64(n)], h[4], h[5], nil
	}
	return nil, 0, 0, nil
}

// release hands what was consumed back to the producer and reports whether
// it waits for room and must be woken.
func (c *consumer) release() (wake bool) {
	if c.head == c.released {
		return false
	}
	c.word64(offHead).Store(c.head)
	c.released = c.head
	return c.word32(offWaiting).CompareAndSwap(1, 0)
}

// sleep flags that the consumer is about to sleep; it must poll once more
// before it does (see the Dekker note above), and wake when it is up.
func (c *consumer) sleep() { c.word32(offSleeping).Store(1) }
func (c *consumer) wake()  { c.word32(offSleeping).Store(0) }
