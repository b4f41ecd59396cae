package smcr

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/goroce/goroce/rocev2/device"
	"github.com/goroce/goroce/smcr/smcwire"
)

// LLC flows. A local flow (one at a time per link group, flowMu) sends a
// request and waits for its response, delivered by the receive path
// (onLLC). The peer's requests are answered by the group's worker (answer).

// llcWait is how long a local flow waits for its response (Linux's
// SMC_LLC_WAIT_TIME).
const llcWait = 2 * time.Second

var (
	errLLCTimeout  = errors.New("smcr: no LLC response in time")
	errGroupEnding = errors.New("smcr: the link group is ending")
)

// spawn runs the local flow f in a goroutine owned by the link group (the
// group's end waits for it; flows give up when the group starts to end).
func (g *linkGroup) spawn(f func()) {
	g.flows.Add(1)
	go func() {
		defer g.flows.Done()
		f()
	}()
}

// sendLLC sends an LLC message (request or response) on the link, waiting
// for an LLC slot until cancel.
func (g *linkGroup) sendLLC(msg []byte, cancel <-chan struct{}) error {
	return g.sendLLCUntil(msg, cancel, nil)
}

// sendLLCUntil is sendLLC that also gives up when stop closes.
func (g *linkGroup) sendLLCUntil(msg []byte, cancel, stop <-chan struct{}) error {
	sl, err := g.lnk.llcSlot(cancel, stop)
	if err != nil {
		return err
	}
	return g.lnk.send(sl, msg, nil)
}

// flow sends req and waits for a response of the same type.
func (g *linkGroup) flow(req []byte) ([]byte, error) {
	g.flowMu.Lock()
	defer g.flowMu.Unlock()
	select {
	case <-g.closing:
		return nil, errGroupEnding
	default:
	}
	// A response left from an earlier flow that gave up is stale.
	select {
	case <-g.resp:
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), llcWait)
	defer cancel()
	if err := g.sendLLCUntil(req, ctx.Done(), g.closing); err != nil {
		return nil, err
	}
	want := smcwire.LLCType(req[0]).Base()
	for {
		select {
		case r := <-g.resp:
			if smcwire.LLCType(r[0]).Base() == want {
				return r, nil
			}
		case <-g.lnk.dead:
			return nil, g.lnk.downErr
		case <-g.closing:
			return nil, errGroupEnding
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (%v)", errLLCTimeout, smcwire.LLCType(req[0]))
		}
	}
}

// llcFlags returns f with the response bit when resp.
func respFlag(resp bool) smcwire.LLCFlags {
	if resp {
		return smcwire.LLCFlagResponse
	}
	return 0
}

// confirmLinkMsg builds this side's CONFIRM_LINK (request or response).
func (g *linkGroup) confirmLinkMsg(resp bool) []byte {
	f := smcwire.ConfirmLinkFields{
		SenderMAC: g.st.mac, SenderGID: gidOf(g.st.gid), SenderQPN: g.lnk.qp.QPN(),
		LinkNum: g.lnk.id, LinkUserID: g.lnk.userID, MaxLinks: 1, MaxConns: uint8(g.maxConns),
	}
	if g.v2 {
		f.MaxLinks = 2 // what Linux announces for SMC-Rv2; a second link is never added
	}
	return smcwire.AppendConfirmLink(nil, g.v2, smcwire.LLCFlagNoRMBEEyecatcher|respFlag(resp), &f)
}

// testLinkFlow checks an idle link with TEST_LINK.
func (g *linkGroup) testLinkFlow() error {
	var f smcwire.TestLinkFields
	_, err := g.flow(smcwire.AppendTestLink(nil, g.v2, 0, &f))
	return err
}

// deleteLinkFlow tells the peer the link group ends (DELETE_LINK, all
// links); the peer does not answer it. As Linux, it waits (up to llcWait)
// for the SEND to complete: the QP is destroyed next, and a DELETE_LINK
// lost on the way and never retransmitted would leave the peer's group up
// until its own linger or TEST_LINK ends it.
func (g *linkGroup) deleteLinkFlow(reason smcwire.DeleteLinkReason, orderly bool) error {
	flags := smcwire.LLCFlagDeleteAll
	if orderly {
		flags |= smcwire.LLCFlagDeleteOrderly
	}
	f := smcwire.DeleteLinkFields{LinkNum: g.lnk.id, Reason: reason}
	ctx, cancel := context.WithTimeout(context.Background(), llcWait)
	defer cancel()
	g.flowMu.Lock()
	defer g.flowMu.Unlock()
	sl, err := g.lnk.llcSlot(ctx.Done(), nil)
	if err != nil {
		return err
	}
	sent := make(chan bool, 1)
	sl.sent = sent
	if err := g.lnk.send(sl, smcwire.AppendDeleteLink(nil, g.v2, flags, &f), nil); err != nil {
		return err
	}
	select {
	case <-sent:
		return nil
	case <-g.lnk.dead:
		return g.lnk.downErr
	case <-ctx.Done():
		return errLLCTimeout
	}
}

// confirmRKeyFlow announces a new RMB's rkey (a subsequent contact's) to
// the peer and waits for its confirmation.
func (g *linkGroup) confirmRKeyFlow(mr *device.MR) error {
	f := smcwire.ConfirmRKeyFields{RTokens: []smcwire.RToken{{LinkID: 0, RKey: mr.RKey(), VA: mr.VA()}}}
	r, err := g.flow(smcwire.AppendConfirmRKey(nil, g.v2, 0, &f))
	if err != nil {
		return err
	}
	if smcwire.ConfirmRKey(r).Negative() {
		return errors.New("smcr: the peer refused the RMB's rkey (negative CONFIRM_RKEY)")
	}
	return nil
}

// deleteRKeyMax is how many rkeys one DELETE_RKEY carries: what a v1
// message holds, and so what any Linux peer accepts in 44 bytes.
const deleteRKeyMax = 8

// deleteRKeyLater tells the peer an RMB is gone (DELETE_RKEY) and
// deregisters it once the peer confirmed. One deleter goroutine at a time
// sends the queued rkeys, up to deleteRKeyMax per message, so that many
// connections closing together cost a few round trips, not one each.
// Without a confirmation the region stays registered until the group
// ends: the peer may still write into it.
func (g *linkGroup) deleteRKeyLater(mr *device.MR) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.released:
		_ = mr.Deregister() // the QP is gone: no peer writes any more
		return
	case g.ending:
		g.retired = append(g.retired, mr) // deregistered once the QP is gone
		g.st.stats.rkeysUnconfirmed.Add(1)
		return
	}
	g.toDelete = append(g.toDelete, mr)
	if !g.deleting {
		g.deleting = true
		g.spawn(g.deleter)
	}
}

// deleter runs DELETE_RKEY flows until the queue is empty.
func (g *linkGroup) deleter() {
	for {
		g.mu.Lock()
		n := min(len(g.toDelete), deleteRKeyMax)
		if n == 0 {
			g.deleting = false
			g.idleCheckLocked() // the linger starts when the last flow ended
			g.mu.Unlock()
			return
		}
		batch := append([]*device.MR(nil), g.toDelete[:n]...)
		g.toDelete = append(g.toDelete[:0], g.toDelete[n:]...)
		g.mu.Unlock()

		f := smcwire.DeleteRKeyFields{RKeys: make([]uint32, n)}
		for i, mr := range batch {
			f.RKeys[i] = mr.RKey()
		}
		if _, err := g.flow(smcwire.AppendDeleteRKey(nil, g.v2, 0, &f)); err != nil {
			// Kept until the group's QP is gone (end waits for this
			// goroutine before it releases the retired RMBs).
			g.mu.Lock()
			g.retired = append(g.retired, batch...)
			g.mu.Unlock()
			g.st.stats.rkeysUnconfirmed.Add(uint64(n))
			continue
		}
		for _, mr := range batch {
			_ = mr.Deregister()
		}
		g.st.stats.rkeysDeleted.Add(uint64(n))
	}
}

// answer handles an LLC request from the peer (on the worker).
func (g *linkGroup) answer(m []byte) {
	llc := smcwire.LLC(m)
	t := llc.Type()
	cancel := g.stop
	resp := append([]byte(nil), m...)
	resp[3] |= byte(smcwire.LLCFlagResponse)
	switch t.Base() {
	case smcwire.LLCTestLink:
		_ = g.sendLLC(resp, cancel)
	case smcwire.LLCConfirmRKey, smcwire.LLCConfirmRKeyCont:
		// The peer's new RMB: its rkey on our single link also comes in the
		// CLC message of its connection. Confirm it.
		_ = g.sendLLC(resp, cancel)
	case smcwire.LLCDeleteRKey:
		// Every rkey deleted. v2: the 44-byte response keeps the count
		// and zeroes the rkey list, byte 5 counting unknown rkeys (0);
		// v1: the rkeys are echoed with an error mask of 0.
		resp = resp[:smcwire.LLCLen]
		resp[5] = 0
		if t.Version() == 2 {
			resp[1], resp[2] = smcwire.LLCLen, 0
			clear(resp[8:])
		}
		_ = g.sendLLC(resp, cancel)
	case smcwire.LLCAddLink:
		// A single device has no alternate path: reject, as Linux does,
		// echoing the request in a 44-byte response.
		_ = g.sendLLC(rejectAddLink(m), cancel)
	case smcwire.LLCRequestAddLink:
		// A client asks for a second link: there is none to add. As a
		// Linux server that adds none: the type, the response flag, 44
		// bytes, zeros (a Linux client waits for this without a timeout).
		r := make([]byte, smcwire.LLCLen)
		r[0], r[1], r[3] = m[0], smcwire.LLCLen, byte(smcwire.LLCFlagResponse)
		_ = g.sendLLC(r, cancel)
	case smcwire.LLCDeleteLink:
		// The peer ends the link group (or its only link). An ALL is
		// never answered; for our single link, the group ends either way.
		g.lnk.fail(fmt.Errorf("smcr: the peer deleted the link (%v)", smcwire.DeleteLink(m).Reason()))
	case smcwire.LLCConfirmLink:
		// A second CONFIRM_LINK request: answer it like the first.
		_ = g.sendLLC(g.confirmLinkMsg(true), cancel)
	default:
		g.st.count(&g.st.stats.badLLC)
	}
}

// rejectAddLink turns an ADD_LINK request into Linux's reject: the request
// echoed in 44 bytes with the response and reject flags and reason 1 ("no
// alternate path"); in v2 the 16-bit length overwrites the reason nibble.
func rejectAddLink(req []byte) []byte {
	r := make([]byte, smcwire.LLCLen)
	copy(r, req)
	r[3] |= byte(smcwire.LLCFlagResponse | smcwire.LLCFlagAddLinkReject)
	r[2] = r[2]&0xF0 | 1
	if smcwire.LLCType(r[0]).Version() == 2 {
		r[1], r[2] = smcwire.LLCLen, 0 // little-endian u16, as Linux on x86 writes it
	} else {
		r[1] = smcwire.LLCLen
	}
	return r
}
