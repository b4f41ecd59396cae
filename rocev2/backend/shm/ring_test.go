package shm

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newTestRing returns a producer and a consumer on one fresh ring in mem
// (the Go heap will do where nothing writes concurrently).
func newTestRing(t testing.TB, mem []byte) (*producer, *consumer) {
	t.Helper()
	r, err := newRing(mem)
	require.NoError(t, err)
	r.format()
	require.NoError(t, r.checkFormat())
	return &producer{ring: r}, &consumer{ring: r, max: maxPacket}
}

func TestRingCarriesRecordsInOrderAcrossWraps(t *testing.T) {
	p, c := newTestRing(t, make([]byte, ringHeaderSize+minRingSize))
	var sent [][]byte
	seq := 0
	next := func() []byte {
		seq++
		n := (seq * 977) % (maxPacket + 1) // every size class, pads at the end of a lap
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(seq + i)
		}
		return b
	}
	for lap := 0; lap < 50; lap++ {
		for {
			b := next()
			ok, err := p.put(b, 64, byte(seq))
			require.NoError(t, err)
			if !ok {
				seq--
				break
			}
			sent = append(sent, b)
		}
		p.publish()
		more, err := c.poll()
		require.NoError(t, err)
		require.True(t, more)
		for {
			pkt, ttl, _, err := c.next()
			require.NoError(t, err)
			if pkt == nil {
				break
			}
			require.NotEmpty(t, sent)
			require.True(t, bytes.Equal(sent[0], pkt), "lap %d", lap)
			assert.Equal(t, uint8(64), ttl)
			sent = sent[1:]
		}
		c.release()
		require.Empty(t, sent)
	}
	assert.Greater(t, p.tail, uint64(20*minRingSize), "many laps")
}

func TestRingWakeFlags(t *testing.T) {
	p, c := newTestRing(t, make([]byte, ringHeaderSize+minRingSize))
	put := func() {
		ok, err := p.put(make([]byte, 40), 64, 0)
		require.NoError(t, err)
		require.True(t, ok)
	}
	put()
	assert.True(t, p.publish(), "a new ring's consumer has not looked yet: ring it")
	put()
	assert.False(t, p.publish(), "rung once per sleep")
	c.wake()
	put()
	assert.False(t, p.publish(), "the consumer is awake: no doorbell")
	c.sleep()
	put()
	assert.True(t, p.publish(), "the consumer sleeps: ring it")
	put()
	assert.False(t, p.publish(), "rung once per sleep")
	assert.False(t, p.publish(), "nothing new to publish")

	more, err := c.poll()
	require.NoError(t, err)
	require.True(t, more)
	for pkt, _, _, _ := c.next(); pkt != nil; pkt, _, _, _ = c.next() {
	}
	assert.False(t, c.release(), "the producer does not wait")
	room, err := p.wantRoom(40)
	require.NoError(t, err)
	assert.True(t, room, "released space is room")
	put()
	p.publish()
	c.poll()
	c.next()
	assert.True(t, c.release(), "the producer flagged that it waits: ring it")
	assert.False(t, c.release(), "nothing new to release")
}

// Every way a producer can lie, and the consumer's verdict.
func TestRingConsumerRefusesLies(t *testing.T) {
	const size = minRingSize
	rec := func(mem []byte, off int, n uint32) { binary.LittleEndian.PutUint32(mem[ringHeaderSize+off:], n) }
	tail := func(mem []byte, v uint64) { binary.LittleEndian.PutUint64(mem[offTail:], v) }
	for _, tc := range []struct {
		name  string
		write func(mem []byte)
		valid int // real records in front of the lie
	}{
		{"tail beyond a whole ring", func(m []byte) { tail(m, size+8) }, 0},
		{"tail not a record boundary", func(m []byte) { tail(m, 12) }, 0},
		{"tail shorter than a header", func(m []byte) { tail(m, 4) }, 0},
		{"length beyond the largest packet", func(m []byte) { rec(m, 0, maxPacket+1); tail(m, 8+maxPacket+8) }, 0},
		{"length beyond the tail", func(m []byte) { rec(m, 0, 100); tail(m, 64) }, 0},
		{"length that wraps", func(m []byte) { rec(m, 0, 0xFFFFFFF0); tail(m, 64) }, 0},
		{"pad at the start", func(m []byte) { rec(m, 0, padLen); tail(m, size) }, 0},
		{"pad beyond the tail", func(m []byte) { rec(m, 0, 8); rec(m, 16, padLen); tail(m, 24) }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := make([]byte, ringHeaderSize+size)
			_, c := newTestRing(t, mem)
			tc.write(mem)
			// The lie is found before any of it is handed out: only the
			// real records in front of it are.
			handed := 0
			more, err := c.poll()
			for err == nil && more && handed < 16 {
				var pkt []byte
				if pkt, _, _, err = c.next(); pkt == nil {
					break
				}
				handed++
			}
			assert.ErrorIs(t, err, errCorrupt)
			assert.Equal(t, tc.valid, handed, "records handed out")
		})
	}
	t.Run("tail going backwards", func(t *testing.T) {
		mem := make([]byte, ringHeaderSize+size)
		p, c := newTestRing(t, mem)
		p.put(make([]byte, 40), 64, 0)
		p.publish()
		_, err := c.poll()
		require.NoError(t, err)
		tail(mem, 0)
		_, err = c.poll()
		assert.ErrorIs(t, err, errCorrupt)
	})
}

// Every way a consumer can lie about its head, and the producer's verdict.
func TestRingProducerRefusesLies(t *testing.T) {
	for _, tc := range []struct {
		name string
		head uint64
	}{
		{"head beyond what was published", 1 << 20},
		{"head not a record boundary", 100},
		{"head going backwards", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := make([]byte, ringHeaderSize+minRingSize)
			p, c := newTestRing(t, mem)
			for range 3 {
				p.put(make([]byte, 40), 64, 0)
			}
			p.publish()
			c.poll()
			c.next()
			c.next()
			c.release()
			require.NoError(t, p.refresh())
			binary.LittleEndian.PutUint64(mem[offHead:], tc.head)
			assert.ErrorIs(t, p.refresh(), errCorrupt)
			for {
				ok, err := p.put(make([]byte, 4000), 64, 0) // runs out of room, then reads the head
				if err != nil || !ok {
					assert.ErrorIs(t, err, errCorrupt)
					break
				}
			}
		})
	}
}

func TestBacklogGrowsKeepsOrderAndBounds(t *testing.T) {
	q := backlog{limit: 4 * initialBacklog}
	var want [][]byte
	for i := 0; ; i++ {
		b := bytes.Repeat([]byte{byte(i)}, 1000+i%300)
		if !q.push(b, 64, 0) {
			break
		}
		want = append(want, b)
	}
	assert.Equal(t, 4*initialBacklog, int(q.p.size), "grew to its bound")
	require.Equal(t, len(want), q.n)
	for i, w := range want {
		pkt, _, _ := q.peek()
		require.Equal(t, w, pkt, "packet %d", i)
		q.take()
	}
	pkt, _, _ := q.peek()
	assert.Nil(t, pkt)
}
