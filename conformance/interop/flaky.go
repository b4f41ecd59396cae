//go:build linux

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
	psn            uint32
	firstAt        float64
	lastSendAt     float64
	sends          int
	ackAt          float64 // the first covering ACK after firstAt; 0 if none
	acks           int
	resentAfterAck bool // a packet of it (or before it) went out after an ACK covering it
}

func (cc *captureCheck) sentLast(from string, psn uint32, t float64) {
	m := cc.lastMsg[from]
	if m == nil || m.psn != psn {
		m = &msgHistory{psn: psn, firstAt: t}
		cc.lastMsg[from] = m
	}
	m.sends++
	m.lastSendAt = t
}

// sentReq notes a request packet: one at or before the last message's
// PSN, sent once that message was ACKed, is a retransmission after the ACK.
func (cc *captureCheck) sentReq(from string, psn uint32) {
	if m := cc.lastMsg[from]; m != nil && m.acks > 0 && psnAtOrAfter(m.psn, psn) {
		m.resentAfterAck = true
	}
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
	if k := rxeCompleterStall(c, r); k != "" {
		return k
	}
	if m := r.cap.lastMsg[hostIP]; m != nil && r.goroceRC != 0 && retryExceeded(r.goroceOut) && m.sends >= 8 {
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

// rxeCompleterStall recognises rxe's completer stall (see the README,
// FLAKY): rxe retransmitted its last SEND (or part of it) after goroce's
// ACK of it (a retransmit-timer retry: rxe had not taken the ACK yet),
// and then never sent anything more of its own while its program waited.
//
// The rule (drivers/infiniband/sw/rxe/rxe_comp.c): rxe's completer acts
// on an ACK of a SEND that its requester is in the middle of
// retransmitting, and the two fall out of step. 6.1: an ACK of the SEND's
// last PSN taken while the WQE is "processing", not "pending", goes
// check_ack → COMPST_WRITE_SEND → COMPST_UPDATE_COMP, which moves comp.psn
// past the SEND without completing it; once the retransmission is out,
// req.psn == comp.psn, so COMPST_ERROR_RETRY sees nothing to retry ("no
// point in retrying if we have already seen the last ack") and COMPST_EXIT
// re-arms no timer: the SEND stays uncompleted unless yet another ACK of
// that PSN comes (check_psn: psn < comp.psn && psn == last_psn →
// COMPST_COMP_ACK), and at the end of rc_pingpong goroce has exited after
// its last receive. 6.12 has the same rules; seen there after two retries:
// goroce's two ACKs (of the original and of the first retransmission)
// arrived 42 packets into the third transmission, the first went
// UPDATE_COMP, the second COMP_ACK completed the WQE mid-retransmission,
// and the requester never sent another packet. A retry while an ACK is on
// its way is frequent: rxe's retransmit timer keeps its old expiry across
// messages (completer_retry_err, about one message in fifteen here).
func rxeCompleterStall(c *testCase, r *result) string {
	m := r.cap.lastMsg[guestIP]
	// rxe never finished: the harness stopped it (after 10 s or more),
	// and in that time it sent nothing of its own after the retransmission
	// (had it thought the SEND outstanding it would have sent it again
	// within a timeout, 67 ms: retry_cnt 7 is infinite for rxe).
	if r.guestRC != 143 || c.lossy() || m == nil || m.acks == 0 || !m.resentAfterAck {
		return ""
	}
	return fmt.Sprintf(" (known: rxe's completer stall: goroce ACKed rxe's last SEND psn %d at %.6f; rxe retransmitted it after that (a retransmit-timer retry), "+
		"took the ACK mid-retransmission and fell out of step (rxe_comp.c: COMPST_WRITE_SEND → COMPST_UPDATE_COMP for a WQE not yet pending), then sent nothing more)",
		m.psn, m.ackAt)
}

// retryExceeded reports whether goroce's output tells of a completion in
// IBV_WC_RETRY_EXC_ERR: rc_pingpong prints ibv_wc_status_str's words, as
// rdma-core's does, the other tools the IBV_WC_ name.
func retryExceeded(out string) bool {
	return strings.Contains(out, "transport retry counter exceeded (12)") || strings.Contains(out, "RETRY_EXC")
}
