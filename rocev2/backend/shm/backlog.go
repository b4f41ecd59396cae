package shm

// backlog is a peer's private queue of packet copies: the packets that wait
// for a pairing being set up, and those a full ring has no room for, in the
// order they were sent. It is a ring of the same records in our own memory,
// grown by doubling (a few times in a pairing's life, never per packet) up
// to a bound; what does not fit then is dropped and counted, and RC sends
// it again.
type backlog struct {
	p     producer
	c     consumer
	limit int // data bytes at most
	n     int // packets waiting
}

// initialBacklog is a new backlog's data size: a few ACKs and packets while
// a pairing is set up.
const initialBacklog = 64 << 10

// push copies pkt to the end; false when the bound leaves no room.
func (q *backlog) push(pkt []byte, ttl, tos uint8) bool {
	for {
		if q.p.mem != nil {
			if ok, _ := q.p.put(pkt, ttl, tos); ok { // our own memory: never corrupt
				q.p.publish()
				q.n++
				return true
			}
		}
		if !q.grow() {
			return false
		}
	}
}

// grow doubles the queue (or makes the first one), keeping what waits.
func (q *backlog) grow() bool {
	size := initialBacklog
	if q.p.mem != nil {
		size = int(q.p.size) * 2
	}
	if size > q.limit {
		return false
	}
	old := q.c
	r, _ := newRing(make([]byte, ringHeaderSize+size))
	r.format()
	q.p = producer{ring: r}
	q.c = consumer{ring: r, max: maxPacket}
	if old.mem != nil {
		old.poll()
		for {
			pkt, ttl, tos, _ := old.next()
			if pkt == nil {
				break
			}
			q.p.put(pkt, ttl, tos)
		}
		q.p.publish()
	}
	return true
}

// peek returns the first packet without taking it (nil when empty); the
// view is valid until the next push or take.
func (q *backlog) peek() (pkt []byte, ttl, tos uint8) {
	if q.n == 0 {
		return nil, 0, 0
	}
	q.c.poll()
	save := q.c.head
	pkt, ttl, tos, _ = q.c.next()
	q.c.head = save
	return pkt, ttl, tos
}

// take drops the first packet (the one peek returned).
func (q *backlog) take() {
	q.c.poll()
	q.c.next()
	q.c.release()
	q.n--
}

// each calls f with every packet waiting, in order, without taking them;
// the views stay valid until the next push or reset.
func (q *backlog) each(f func(pkt []byte)) {
	if q.n == 0 {
		return
	}
	q.c.poll()
	save := q.c.head
	for {
		pkt, _, _, _ := q.c.next()
		if pkt == nil {
			break
		}
		f(pkt)
	}
	q.c.head = save
}

// reset empties the queue and frees its memory.
func (q *backlog) reset() { *q = backlog{limit: q.limit} }
