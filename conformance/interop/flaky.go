package main

// Failures whose cause is known, named where the harness retries them
// (the retry's log line and the FLAKY note): a retry passes them, and the
// name says why that is no goroce bug to hunt.

import (
	"fmt"
	"strings"
)

// msgHistory is what a capture shows of one side's last message: when
// its last packet (SEND/WRITE LAST or ONLY) was first sent, how often, and
// the other side's ACKs that cover it.
type msgHistory struct {
	psn     uint32
	firstAt float64
	sends   int
	ackAt   float64 // the first covering ACK after firstAt; 0 if none
	acks    int
}

func (cc *captureCheck) sentLast(from string, psn uint32, t float64) {
	m := cc.lastMsg[from]
	if m == nil || m.psn != psn {
		m = &msgHistory{psn: psn, firstAt: t}
		cc.lastMsg[from] = m
	}
	m.sends++
}

func (cc *captureCheck) ackedLast(to string, t float64) {
	m := cc.lastMsg[to]
	if m == nil {
		return
	}
	if m.acks == 0 {
		m.ackAt = t
	}
	m.acks++
}

// rcRetryBudget is how long goroce's rc_pingpong retries a SEND: 1 + 7
// transmissions (retry_cnt 7) a local ACK timeout apart (timeout 14:
// 4.096 µs × 2^14 = 67 ms).
const rcRetryBudget = 7 * 0.067

// knownFlake names the cause of a failure when the capture shows one the
// harness knows (for the retry's log line), else "".
//
// goroce's retries ran out while the guest was silent: goroce's
// rc_pingpong gave up on its last SEND (IBV_WC_RETRY_EXC_ERR) after 1 + 7
// transmissions and no ACK for longer than its retry budget, the ACK
// arriving late or not before goroce's QP was gone. IBTA counts
// retry_cnt 7 as seven retries, and goroce does; rxe counts 7 as "retry
// forever" (rxe_comp.c: `if (qp->comp.retry_cnt != 7) qp->comp.retry_cnt--`),
// so two rxe peers never fail this way. Seen when the guest's receive path
// did not run for 0.5-0.6 s while its transmit path did (rxe kept
// retransmitting its own message unACKed): QEMU/TCG on a loaded host.
func knownFlake(c *testCase, r *result) string {
	if c.tool == nil || r.cap == nil {
		return ""
	}
	if m := r.cap.lastMsg[hostIP]; m != nil && r.goroceRC != 0 && strings.Contains(r.goroceOut, "RETRY_EXC") && m.sends >= 8 {
		silent := "no ACK of it on the wire"
		if m.acks > 0 {
			silent = fmt.Sprintf("its first ACK %.0f ms after it was first sent", (m.ackAt-m.firstAt)*1000)
		}
		if m.acks == 0 || m.ackAt-m.firstAt > rcRetryBudget {
			return fmt.Sprintf(" (known: goroce's SEND psn %d was sent %d times with %s; goroce's retry_cnt 7 ran out as IBTA counts it, where rxe retries forever; the guest's rxe did not receive for that long: QEMU/TCG on a loaded host)",
				m.psn, m.sends, silent)
		}
	}
	return ""
}
