package shm

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// FuzzRing plays a malicious producer against the consumer: the script
// publishes real records, stores lying tails, writes lying record headers
// and pad markers anywhere, and (when its first byte is odd) lets a second
// goroutine scribble over the ring while the consumer reads. Whatever the
// ring holds, the consumer never reads outside it, never hands out more
// than the largest packet, and once it reports the ring corrupt, that is
// its verdict for good.
func FuzzRing(f *testing.F) {
	f.Add([]byte{0, 1, 40, 0, 1, 200, 3, 3})
	f.Add([]byte{1, 1, 40, 1, 80, 3, 2, 0, 0, 0xff, 0xff, 0xff, 0xff, 3})
	f.Add([]byte{0, 4, 0x10, 0, 0, 0, 0, 0, 0, 0, 3})
	f.Add([]byte{1, 2, 0x40, 0x00, 0x10, 0x00, 0x00, 0x00, 3, 1, 255, 3, 3})
	f.Fuzz(func(t *testing.T, script []byte) {
		if len(script) == 0 {
			return
		}
		mem, err := unix.Mmap(-1, 0, ringHeaderSize+minRingSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANON)
		require.NoError(t, err)
		defer unix.Munmap(mem)
		p, c := newTestRing(t, mem)
		data := mem[ringHeaderSize:]

		var wg sync.WaitGroup
		stop := make(chan struct{})
		if script[0]&1 == 1 {
			wg.Add(1)
			go func() { // the peer's other thread, scribbling as we read
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(len(script)), uint64(script[0])))
				for i := 0; i < 1<<16; i++ {
					select {
					case <-stop:
						return
					default:
					}
					off := r.IntN(len(data) - 8)
					binary.LittleEndian.PutUint64(data[off:], r.Uint64()>>(r.IntN(4)*16))
					if i%64 == 0 {
						binary.LittleEndian.PutUint64(mem[offTail:], r.Uint64N(4*minRingSize)&^7)
					}
				}
			}()
		}
		defer func() { close(stop); wg.Wait() }()

		broken := false
		consume := func() {
			if broken {
				return
			}
			for range 1 << 12 {
				more, err := c.poll()
				if err == nil && !more {
					return
				}
				var pkt []byte
				if err == nil {
					pkt, _, _, err = c.next()
				}
				if err != nil {
					broken = true
					return
				}
				if pkt == nil {
					return
				}
				if len(pkt) > maxPacket || c.head > c.tail || c.tail-c.head > c.size {
					t.Fatalf("consumer handed out %d bytes, head %d tail %d", len(pkt), c.head, c.tail)
				}
				c.release()
			}
		}
		for s := script[1:]; len(s) > 0; {
			op := s[0]
			s = s[1:]
			arg := func(n int) []byte {
				b := make([]byte, n)
				n = copy(b, s)
				s = s[n:]
				return b
			}
			switch op % 5 {
			case 0: // nothing, the consumer's turn
				consume()
			case 1: // a real record of the next byte's size (times 17)
				n := int(arg(1)[0]) * 17
				p.put(make([]byte, n), 64, 0)
				p.publish()
			case 2: // a lying record header at an offset
				a := arg(6)
				off := int(binary.LittleEndian.Uint16(a)) % (len(data) - 8)
				copy(data[off:], a[2:])
			case 3: // the consumer's turn
				consume()
			case 4: // a lying tail
				binary.LittleEndian.PutUint64(mem[offTail:], binary.LittleEndian.Uint64(arg(8)))
			}
		}
		consume()
	})
}
