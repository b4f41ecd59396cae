package rdmacm

import (
	"net/netip"
	"time"

	"github.com/goroce/goroce/rdmacm/cmwire"
)

// The MAD layer's part of the CM: a message that expects an answer (REQ,
// REP, DREQ, SIDR_REQ) is sent again every timeout until the answer
// cancels it or the retries run out (ib_mad's retry_send and timeout
// handling; ib_cm sets the timeout and the count), and an MRA stretches
// the wait (ib_modify_mad). Running out is a send error, which ib_cm turns
// into the ID's error event (cm_process_send_error). Timewait ends after
// its own delay. One device timer serves the CM: it is armed for the
// earliest deadline and kicks the CM's goroutine, which does the rest.

// outMsg is a sent message waiting for its answer.
type outMsg struct {
	mad      [cmwire.MADLen]byte
	dst      netip.AddrPort
	timeout  time.Duration
	left     int     // resends left
	state    idState // the ID's state it belongs to (ib_cm's msg->context[1])
	deadline time.Time
}

// convertToMS is ib_cm's approximate conversion of an IBA time
// (4.096 µs × 2^t) to milliseconds.
func convertToMS(t uint8) int { return 1 << max(int(t)-8, 0) }

// ackTimeout is ib_cm's cm_ack_timeout: the local ACK timeout exponent for
// a CA ACK delay and a packet life time.
func ackTimeout(caAckDelay, packetLifeTime uint8) uint8 {
	t := int(packetLifeTime) + 1
	d := int(caAckDelay)
	if t >= d {
		if d >= t-1 {
			t++
		}
	} else {
		t = d
		if int(packetLifeTime)+1 >= d-1 {
			t++
		}
	}
	return uint8(min(31, t))
}

// post sends m to id.peer; with a timeout it becomes id's waiting message,
// resent up to id.maxRetries times (c.mu held).
func (c *CM) post(id *cmID, m cmwire.MAD, timeoutMS int) {
	c.sendMAD(m, id.peer)
	if timeoutMS <= 0 {
		return
	}
	c.cancel(id)
	msg := &outMsg{dst: id.peer, timeout: time.Duration(timeoutMS) * time.Millisecond,
		left: int(id.maxRetries), state: id.state}
	copy(msg.mad[:], m)
	msg.deadline = time.Now().Add(msg.timeout)
	id.msg = msg
	c.timed[id] = struct{}{}
	c.arm(msg.deadline)
}

// setMsgState records the state a waiting message now belongs to.
func (id *cmID) setMsgState(s idState) {
	if id.msg != nil {
		id.msg.state = s
	}
}

// cancel forgets id's waiting message (ib_cancel_mad).
func (c *CM) cancel(id *cmID) {
	id.msg = nil
	if id.state != stTimewait {
		delete(c.timed, id)
	}
}

// stretch gives id's waiting message a new timeout from now (ib_modify_mad
// on an MRA).
func (c *CM) stretch(id *cmID, timeoutMS int) bool {
	if id.msg == nil {
		return false
	}
	id.msg.timeout = time.Duration(timeoutMS) * time.Millisecond
	id.msg.deadline = time.Now().Add(id.msg.timeout)
	c.arm(id.msg.deadline)
	return true
}

// arm makes the device timer fire by at.
func (c *CM) arm(at time.Time) {
	if c.armed && !at.Before(c.armedAt) {
		return
	}
	c.armed, c.armedAt = true, at
	c.dev.Timers().Reset(&c.timer, time.Until(at))
}

// onTimer runs on the device's timer goroutine: the CM's goroutine does
// the work.
func (c *CM) onTimer() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// expire resends, fails and ends timewaits whose time has come, then arms
// the timer for the next deadline (c.mu held).
func (c *CM) expire() {
	now := time.Now()
	c.armed = false
	var next time.Time
	for id := range c.timed {
		var at time.Time
		switch {
		case id.state == stTimewait && id.msg == nil:
			if !now.Before(id.timewaitEnd) {
				delete(c.timed, id)
				c.timewaitExit(id)
				continue
			}
			at = id.timewaitEnd
		case id.msg != nil:
			m := id.msg
			if now.Before(m.deadline) {
				at = m.deadline
				break
			}
			if m.left > 0 {
				m.left--
				c.sendMAD(cmwire.MAD(m.mad[:]), m.dst)
				if a := cmwire.MAD(m.mad[:]).Attr(); a.IsCM() {
					c.Counters.TxRetries[attrIndex(a)].Add(1)
				}
				m.deadline = now.Add(m.timeout)
				at = m.deadline
				break
			}
			c.cancel(id)
			c.sendError(id, m)
			if id.state == stTimewait {
				at = id.timewaitEnd
			} else {
				continue
			}
		default:
			delete(c.timed, id)
			continue
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	if !next.IsZero() {
		c.arm(next)
	}
}

// sendError is cm_process_send_error: the answer never came.
func (c *CM) sendError(id *cmID, m *outMsg) {
	if m.state != id.state {
		return // sent for an earlier state: nothing waits for it any more
	}
	var ev ownerEvent
	switch id.state {
	case stReqSent, stMRAReqRcvd:
		c.resetToIdle(id)
		ev = evReqError
	case stRepSent, stMRARepRcvd:
		c.resetToIdle(id)
		ev = evRepError
	case stDREQSent:
		c.enterTimewait(id)
		ev = evDREQError
	case stSIDRReqSent:
		id.state = stIdle
		ev = evSIDRReqError
	default:
		return
	}
	c.notify(id, ev, &eventData{status: ErrTimeout})
	c.maybeFree(id)
}

// enterTimewait is cm_enter_timewait: the ID leaves the remote tables and
// waits out the peer's last packets (the QP's ACK timeout) before IDLE. A
// DREQ that arrives meanwhile gets the DREP again.
func (c *CM) enterTimewait(id *cmID) {
	c.removeRemote(id)
	id.msg = nil
	id.state = stTimewait
	id.timewaitEnd = time.Now().Add(time.Duration(convertToMS(id.avTimeout)) * time.Millisecond)
	c.timed[id] = struct{}{}
	c.arm(id.timewaitEnd)
}

func (c *CM) timewaitExit(id *cmID) {
	if id.state != stTimewait {
		return
	}
	id.state = stIdle
	c.notify(id, evTimewaitExit, nil)
	c.maybeFree(id)
}

// notify tells id's owner of an event (c.mu held).
func (c *CM) notify(id *cmID, ev ownerEvent, e *eventData) {
	if id.owner != nil {
		if e == nil {
			e = &eventData{}
		}
		id.owner.event(id, ev, e)
	}
}
