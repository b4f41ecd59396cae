package smcr

import (
	"context"
	"fmt"

	"github.com/goroce/goroce/smcr/smcwire"
)

// Losing a link (Linux's smcr_link_down and the DELETE_LINK flows). A link
// goes down when a work request on it fails, its device loses its
// address, TEST_LINK gets no answer, or the peer deletes it. Then:
//
//  1. its queue pair stops (the error state): nothing it still had to send
//     reaches the peer after the connections moved and wrote anew;
//  2. its connections move to a surviving link (failover.go); with none
//     left the group ends, and its connections with it;
//  3. the peer is told, as Linux's roles do: a server sends DELETE_LINK
//     (orderly, lost path) on the surviving link and waits for the
//     client's answer; a client sends it and goes on. The side that gets
//     a DELETE_LINK moves its connections too; a server sends the
//     client's back and waits for the answer, a client answers;
//  4. the link is cleared: its queue pair destroyed, the buffers'
//     regions on it deregistered, the peer's rkeys on it forgotten.
//
// Afterwards the group adds a link again (relink), first after
// relinkInterval.

// linksFailed hands each active link that went down to a flow that does
// the above (the worker, woken by linkFailed). A link that failed before
// it was confirmed belongs to the handshake or ADD_LINK flow setting it
// up, which clears it.
func (g *linkGroup) linksFailed() {
	for _, l := range g.linkList() {
		if l.down.Load() && l.confirmed.Load() && l.cleared.CompareAndSwap(false, true) {
			if !l.retired.Load() {
				g.st.count(&g.st.stats.linksFailed)
			}
			g.spawn(func() { g.linkDown(l) })
		}
	}
}

// linkDown handles l's failure on this side's initiative.
func (g *linkGroup) linkDown(l *link) {
	to := g.switchAway(l)
	if to == nil {
		return
	}
	g.flowMu.Lock()
	defer g.flowMu.Unlock()
	if !g.hasLink(l) {
		return // a DELETE_LINK of the peer's cleared it meanwhile
	}
	f := smcwire.DeleteLinkFields{LinkNum: l.id, Reason: smcwire.DelLostPath}
	if l.retired.Load() {
		f.Reason = smcwire.DelNoAsymNeeded
	}
	msg := smcwire.AppendDeleteLink(nil, g.v2, smcwire.LLCFlagDeleteOrderly, &f)
	if g.role == roleServer {
		g.drainResp()
		if to.sendLLC(msg, g.closing, nil) == nil {
			ctx, cancel := context.WithTimeout(context.Background(), llcWait)
			_, _ = g.await(ctx, isResponseOf(smcwire.LLCDeleteLink), to)
			cancel()
		}
	} else {
		_ = to.sendLLC(msg, g.closing, nil)
	}
	g.clearLink(l)
	g.linkLost()
}

// peerDeletesLink handles the peer's DELETE_LINK of one link, which came
// on l (Linux's smc_llc_process_cli_delete_link and
// smc_llc_process_srv_delete_link).
func (g *linkGroup) peerDeletesLink(l *link, m []byte) {
	d := smcwire.DeleteLink(m)
	del := g.linkByID(d.LinkNum())
	if del != nil && del.cleared.CompareAndSwap(false, true) {
		if d.Reason() == smcwire.DelNoAsymNeeded {
			del.retired.Store(true) // replaced, not failed
		} else {
			g.st.count(&g.st.stats.linksFailed)
		}
		del.fail(fmt.Errorf("smcr: the peer deleted link %d (%v)", del.id, d.Reason()))
		if g.switchAway(del) == nil {
			return
		}
	}
	g.flowMu.Lock()
	defer g.flowMu.Unlock()
	if !g.hasLink(del) {
		del = nil
	}
	via := l
	if via.down.Load() {
		if via = g.usableLink(); via == nil {
			return
		}
	}
	if g.role == roleClient {
		resp := append([]byte(nil), m...)
		resp[3] |= byte(smcwire.LLCFlagResponse)
		reason := uint32(0)
		if del == nil {
			reason = uint32(smcwire.DelNoLink)
		}
		resp[5], resp[6], resp[7], resp[8] = byte(reason>>24), byte(reason>>16), byte(reason>>8), byte(reason)
		_ = via.sendLLC(resp, g.closing, nil)
	} else if del != nil {
		// The client's request goes back to it as the server's own, and
		// the server waits for the answer.
		g.drainResp()
		if via.sendLLC(m, g.closing, nil) == nil {
			ctx, cancel := context.WithTimeout(context.Background(), llcWait)
			_, _ = g.await(ctx, isResponseOf(smcwire.LLCDeleteLink), via)
			cancel()
		}
	}
	if del != nil {
		g.clearLink(del)
		g.linkLost()
	}
}

// isResponseOf matches a response of type t.
func isResponseOf(t smcwire.LLCType) func(llcIn) bool {
	return func(in llcIn) bool {
		m := smcwire.LLC(in.msg)
		return m.IsResponse() && m.Type().Base() == t
	}
}

// switchAway stops l and moves its connections to a surviving link,
// which it returns; with none the group ends (nil).
func (g *linkGroup) switchAway(l *link) *link {
	l.quiesce()
	to := g.switchConns(l)
	if to == nil {
		g.terminate(fmt.Errorf("smcr: the link group's last link failed: %w", l.downErr))
	}
	return to
}

// linkLost updates the group after a link was cleared: of the type its
// remaining links make, or ended without any; a lost link is added again
// after relinkWait.
func (g *linkGroup) linkLost() {
	g.mu.Lock()
	n := g.activeLinksLocked()
	switch {
	case n == 0:
		g.setTypeLocked(lgrNone, nil)
	case n == 1:
		g.setTypeLocked(lgrSingle, nil)
	}
	g.relinkAt = mono() + int64(g.relinkWait)
	g.mu.Unlock()
	if n == 0 {
		g.terminate(errNoActiveLink)
	}
}

// linkByID returns the group's link of id, or nil.
func (g *linkGroup) linkByID(id uint8) *link {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, l := range g.links {
		if l != nil && l.id == id {
			return l
		}
	}
	return nil
}

// hasLink reports whether l is (still) one of the group's links.
func (g *linkGroup) hasLink(l *link) bool {
	if l == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.links[l.idx] == l
}

// clearLink takes l out of the group and releases it: its queue pair, and
// the regions of the group's buffers on it. Flows call it, holding flowMu
// (so that no link takes l's slot meanwhile).
func (g *linkGroup) clearLink(l *link) {
	g.mu.Lock()
	if g.links[l.idx] == l {
		g.links[l.idx] = nil
	}
	g.mu.Unlock()
	l.destroy()
	g.mu.Lock()
	g.clearLinkLocked(l)
	g.mu.Unlock()
	g.reportLink(l, false, l.downErr)
}
