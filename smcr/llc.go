package smcr

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/goroce/goroce/smcr/smcwire"
)

// LLC flows. A flow (one at a time per link group, flowMu) sends a
// request and waits for what answers it, which the receive path (onLLC)
// hands it through resp. The peer's one-message requests are answered by
// the group's worker (answer); those that start a flow of their own
// (ADD_LINK, DELETE_LINK, REQUEST_ADD_LINK) get a goroutine that runs it.

// llcWait is how long a local flow waits for its response (Linux's
// SMC_LLC_WAIT_TIME), and llcWaitFirst how long a client waits for the
// CONFIRM_LINK of a link being added (SMC_LLC_WAIT_FIRST_TIME).
const (
	llcWait      = 2 * time.Second
	llcWaitFirst = 5 * time.Second
)

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

// spawnRemote runs a flow the peer asked for, unless as many as
// maxRemoteFlows wait or run already: a peer that asks faster than the
// flows run gets its requests dropped (and counted), as Linux drops a
// request that comes while a flow runs.
func (g *linkGroup) spawnRemote(f func()) {
	g.mu.Lock()
	ok := !g.ending && g.remote < maxRemoteFlows
	if ok {
		g.remote++
	}
	g.mu.Unlock()
	if !ok {
		g.st.count(&g.st.stats.llcDropped)
		return
	}
	g.spawn(func() {
		defer func() {
			g.mu.Lock()
			g.remote--
			g.mu.Unlock()
		}()
		f()
	})
}

// maxRemoteFlows bounds the flows the peer's requests start that wait for
// the one running.
const maxRemoteFlows = 2

// onLLC routes an LLC message that came on link l (on the receive
// goroutine): responses, and the requests a flow waits for (ADD_LINK_CONT,
// a CONFIRM_LINK of a link being added), to the flow; TEST_LINK's answer
// to the link that asked; a client's first CONFIRM_LINK to its handshake;
// every other request to the worker (answering may wait for a send slot,
// which a handler must never do).
func (g *linkGroup) onLLC(l *link, m smcwire.LLC) {
	t := m.Type().Base()
	if m.IsResponse() {
		switch t {
		case smcwire.LLCTestLink:
			if !l.barrierAnswered(smcwire.TestLink(m)) {
				wake(l.testResp)
			}
		case smcwire.LLCRequestAddLink:
			// The server took note; it adds a link (its ADD_LINK comes as
			// a request) or not.
		default:
			g.toFlow(l, m)
		}
		return
	}
	switch t {
	case smcwire.LLCAddLinkCont:
		g.toFlow(l, m)
		return
	case smcwire.LLCConfirmLink:
		if g.adding.Load() {
			g.toFlow(l, m) // the link being added
			return
		}
		if g.role == roleClient {
			if g.dropConfirmLinks.Load() > 0 && g.dropConfirmLinks.Add(-1) >= 0 {
				return // a test's Linux client that is not waiting yet
			}
			select {
			case g.cnfLnk <- append([]byte(nil), m...):
			default:
			}
			return
		}
	case smcwire.LLCDeleteLink:
		if g.adding.Load() && !smcwire.DeleteLink(m).All() {
			g.toFlow(l, m) // the add flow gives up, then hands it on
			return
		}
	}
	select {
	case g.events <- lgrEvent{l: l, llc: append([]byte(nil), m...)}:
	default:
		// The peer floods us with LLC requests it must wait for
		// answers to: not a peer we can serve.
		g.terminate(errors.New("smcr: the peer sent LLC requests faster than it waits for their answers"))
	}
}

// toFlow hands m to the flow that waits for it; with none waiting (the
// buffer full of what nobody took) it is dropped.
func (g *linkGroup) toFlow(l *link, m smcwire.LLC) {
	select {
	case g.resp <- llcIn{l: l, msg: append([]byte(nil), m...)}:
	default:
		g.st.count(&g.st.stats.llcDropped)
	}
}

// flow sends req on l and waits for a response of the same type.
func (g *linkGroup) flow(l *link, req []byte) ([]byte, error) {
	g.flowMu.Lock()
	defer g.flowMu.Unlock()
	return g.flowLocked(l, req)
}

// flowLocked is flow with flowMu held.
func (g *linkGroup) flowLocked(l *link, req []byte) ([]byte, error) {
	select {
	case <-g.closing:
		return nil, errGroupEnding
	default:
	}
	g.drainResp()
	ctx, cancel := context.WithTimeout(context.Background(), llcWait)
	defer cancel()
	if err := l.sendLLC(req, ctx.Done(), g.closing); err != nil {
		if errors.Is(err, errCanceled) && ctx.Err() != nil {
			return nil, fmt.Errorf("%w (%v: no send slot)", errLLCTimeout, smcwire.LLCType(req[0]))
		}
		return nil, err
	}
	want := smcwire.LLCType(req[0]).Base()
	in, err := g.await(ctx, func(in llcIn) bool {
		return smcwire.LLC(in.msg).IsResponse() && smcwire.LLCType(in.msg[0]).Base() == want
	}, l)
	if errors.Is(err, errLLCTimeout) {
		err = fmt.Errorf("%w (%v)", err, smcwire.LLCType(req[0]))
	}
	return in.msg, err
}

// drainResp drops what waits in resp: left from a flow that gave up, it
// answers nothing the next flow asks.
func (g *linkGroup) drainResp() {
	for {
		select {
		case <-g.resp:
		default:
			return
		}
	}
}

// await waits for a message that match accepts (others are dropped), until
// ctx ends, one of the links watched goes down, or the group ends.
func (g *linkGroup) await(ctx context.Context, match func(llcIn) bool, watch ...*link) (llcIn, error) {
	var dead [2]<-chan struct{}
	for i, l := range watch[:min(len(watch), len(dead))] {
		dead[i] = l.dead
	}
	for {
		select {
		case in := <-g.resp:
			if match(in) {
				return in, nil
			}
		case <-dead[0]:
			return llcIn{}, watch[0].downErr
		case <-dead[1]:
			return llcIn{}, watch[1].downErr
		case <-g.closing:
			return llcIn{}, errGroupEnding
		case <-ctx.Done():
			return llcIn{}, errLLCTimeout
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

// confirmLinkMsg builds link l's CONFIRM_LINK (request or response). Max
// links is Linux's SMC_LLC_ADD_LNK_MAX_LINKS, which it always sends.
func (g *linkGroup) confirmLinkMsg(l *link, resp bool) []byte {
	f := smcwire.ConfirmLinkFields{
		SenderMAC: l.dev.mac, SenderGID: gidOf(l.dev.gid), SenderQPN: l.qp.QPN(),
		LinkNum: l.id, LinkUserID: l.userID, MaxLinks: addLinksMax, MaxConns: uint8(g.maxConns),
	}
	return smcwire.AppendConfirmLink(nil, g.v2, smcwire.LLCFlagNoRMBEEyecatcher|respFlag(resp), &f)
}

// testLinkFlow checks link l with TEST_LINK, as Linux's testlink worker:
// on the link itself and beside the flows (a TEST_LINK answer is the
// link's, not the group's), giving up after testLinkWait. Any message
// that arrives on the link meanwhile proves it alive as well as the
// answer does (on a busy link the answer waits behind the data).
func (g *linkGroup) testLinkFlow(l *link) error {
	sent := mono()
	select {
	case <-l.testResp: // an answer to an earlier one that gave up
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.testLinkWait())
	defer cancel()
	var f smcwire.TestLinkFields
	if err := l.sendLLC(smcwire.AppendTestLink(nil, g.v2, 0, &f), ctx.Done(), g.closing); err != nil {
		if errors.Is(err, errCanceled) && ctx.Err() != nil {
			return fmt.Errorf("smcr: TEST_LINK on link %d: no send slot in %v (the path is dead)", l.id, g.testLinkWait())
		}
		return err
	}
	select {
	case <-l.testResp:
		return nil
	case <-l.dead:
		return l.downErr
	case <-g.closing:
		return errGroupEnding
	case <-ctx.Done():
		if l.lastRx.Load() > sent {
			return nil
		}
		return fmt.Errorf("smcr: TEST_LINK on link %d: %w", l.id, errLLCTimeout)
	}
}

// testLinkWait is how long TEST_LINK waits for its answer (llcWait; a
// test's hook shortens it).
func (g *linkGroup) testLinkWait() time.Duration {
	if g.hooks.testLinkWait > 0 {
		return g.hooks.testLinkWait
	}
	return llcWait
}

// sendAwait sends msg on l and waits (up to llcWait) for its SEND to
// complete: a message that must have left before what follows (the link
// or group is torn down next).
func (g *linkGroup) sendAwait(l *link, msg []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), llcWait)
	defer cancel()
	sl, err := l.llcSlot(ctx.Done(), nil)
	if err != nil {
		return err
	}
	sent := make(chan bool, 1)
	sl.sent = sent
	if err := l.send(sl, msg, nil); err != nil {
		return err
	}
	select {
	case <-sent:
		return nil
	case <-l.dead:
		return l.downErr
	case <-ctx.Done():
		return errLLCTimeout
	}
}

// deleteAllFlow tells the peer the link group ends (DELETE_LINK, all
// links) on l; the peer does not answer it. As Linux, it waits for the
// SEND to complete: the links are destroyed next, and a DELETE_LINK lost
// on the way and never retransmitted would leave the peer's group up
// until its own linger or TEST_LINK ends it.
func (g *linkGroup) deleteAllFlow(l *link, reason smcwire.DeleteLinkReason, orderly bool) error {
	flags := smcwire.LLCFlagDeleteAll
	if orderly {
		flags |= smcwire.LLCFlagDeleteOrderly
	}
	f := smcwire.DeleteLinkFields{Reason: reason}
	g.flowMu.Lock()
	defer g.flowMu.Unlock()
	return g.sendAwait(l, smcwire.AppendDeleteLink(nil, g.v2, flags, &f))
}

// confirmRKeyFlow announces a new RMB's rkeys to the peer on the
// connection's link l: its rkey there first, then those on the group's
// other active links with their link ids (Linux's
// smc_llc_send_confirm_rkey), and waits for the confirmation. flowMu is
// held.
func (g *linkGroup) confirmRKeyFlowLocked(l *link, rmb *buffer) error {
	g.mu.Lock()
	f := smcwire.ConfirmRKeyFields{RTokens: []smcwire.RToken{{RKey: rmb.rkeyOn(l.idx), VA: rmbVA(rmb)}}}
	for _, o := range g.links {
		if o != nil && o != l && o.active() && rmb.mrs[o.idx] != nil && len(f.RTokens) < 3 {
			f.RTokens = append(f.RTokens, smcwire.RToken{LinkID: o.id, RKey: rmb.rkeyOn(o.idx), VA: rmbVA(rmb)})
		}
	}
	g.mu.Unlock()
	r, err := g.flowLocked(l, smcwire.AppendConfirmRKey(nil, g.v2, 0, &f))
	if err != nil {
		return err
	}
	if smcwire.ConfirmRKey(r).Negative() {
		return errors.New("smcr: the peer refused the RMB's rkey (negative CONFIRM_RKEY)")
	}
	return nil
}

// rmbVA is the virtual address of an RMB (the same on every link: the
// address of its memory).
func rmbVA(b *buffer) uint64 {
	for _, mr := range b.mrs {
		if mr != nil {
			return mr.VA()
		}
	}
	return 0
}

// deleteRKeyMax is how many rkeys one DELETE_RKEY carries: what a v1
// message holds, and so what any Linux peer accepts in 44 bytes.
const deleteRKeyMax = 8

// deleteRKeyLater tells the peer an RMB is gone (DELETE_RKEY) and
// deregisters it once the peer confirmed. One deleter goroutine at a time
// sends the queued rkeys, up to deleteRKeyMax per message, so that many
// connections closing together cost a few round trips, not one each.
// Without a confirmation the RMB stays registered until the group's links
// are gone: the peer may still write into it.
func (g *linkGroup) deleteRKeyLater(rmb *buffer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.released:
		rmb.deregister() // the links are gone: no peer writes any more
		delete(g.bufs, rmb)
		return
	case g.ending:
		g.st.stats.rkeysUnconfirmed.Add(1) // deregistered once the links are gone
		return
	}
	g.toDelete = append(g.toDelete, rmb)
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
		batch := append([]*buffer(nil), g.toDelete[:n]...)
		g.toDelete = append(g.toDelete[:0], g.toDelete[n:]...)
		g.mu.Unlock()

		if err := g.deleteRKeys(batch); err != nil {
			// Kept until the links are gone (end waits for this goroutine
			// before it deregisters the buffers).
			g.st.stats.rkeysUnconfirmed.Add(uint64(n))
			continue
		}
		for _, b := range batch {
			g.freeBuffer(b)
		}
		g.st.stats.rkeysDeleted.Add(uint64(n))
	}
}

// deleteRKeys runs one DELETE_RKEY flow for batch, on a usable link with
// the rkeys the RMBs have there.
func (g *linkGroup) deleteRKeys(batch []*buffer) error {
	g.flowMu.Lock()
	defer g.flowMu.Unlock()
	l := g.usableLink()
	if l == nil {
		return errNoActiveLink
	}
	f := smcwire.DeleteRKeyFields{RKeys: make([]uint32, 0, len(batch))}
	g.mu.Lock()
	for _, b := range batch {
		f.RKeys = append(f.RKeys, b.rkeyOn(l.idx))
	}
	g.mu.Unlock()
	_, err := g.flowLocked(l, smcwire.AppendDeleteRKey(nil, g.v2, 0, &f))
	return err
}

// answer handles an LLC request from the peer that came on link l (on
// the worker).
func (g *linkGroup) answer(l *link, m []byte) {
	llc := smcwire.LLC(m)
	t := llc.Type()
	cancel := g.stop
	resp := append([]byte(nil), m...)
	resp[3] |= byte(smcwire.LLCFlagResponse)
	switch t.Base() {
	case smcwire.LLCTestLink:
		_ = l.sendLLC(resp, cancel, nil)
		if h := g.hooks.testLinkAnswered; h != nil {
			h()
		}
	case smcwire.LLCConfirmRKey:
		_ = l.sendLLC(g.confirmRKeyAnswer(l, resp), cancel, nil)
	case smcwire.LLCConfirmRKeyCont:
		// Linux never sends it (three rtokens cover three links); as
		// before, confirm it.
		_ = l.sendLLC(resp, cancel, nil)
	case smcwire.LLCDeleteRKey:
		_ = l.sendLLC(g.deleteRKeyAnswer(l, resp), cancel, nil)
	case smcwire.LLCAddLink:
		if g.role == roleServer {
			// A client's invitation (v1): the server runs ADD_LINK its
			// own way.
			g.spawnRemote(func() { g.serverAddLink(nil) })
			return
		}
		g.spawnRemote(func() { g.clientAddLink(l, m) })
	case smcwire.LLCRequestAddLink:
		if g.role == roleServer {
			g.spawnRemote(func() { g.serverAddLink(&llcIn{l: l, msg: m}) })
		}
	case smcwire.LLCDeleteLink:
		if smcwire.DeleteLink(m).All() {
			// The peer ends the link group; an ALL is never answered.
			g.terminate(fmt.Errorf("smcr: the peer ended the link group (%v)", smcwire.DeleteLink(m).Reason()))
			return
		}
		g.spawnRemote(func() { g.peerDeletesLink(l, m) })
	case smcwire.LLCConfirmLink:
		// A CONFIRM_LINK request again (a server resends it while it
		// waits): answer it like the first.
		_ = l.sendLLC(g.confirmLinkMsg(l, true), cancel, nil)
	default:
		g.st.count(&g.st.stats.badLLC)
	}
}

// confirmRKeyAnswer records the peer's new RMB from its CONFIRM_RKEY
// (Linux's smc_llc_rmt_conf_rkey): rtoken 0 on link l, the others on the
// links they name; resp is the request with the response flag, made
// negative (retry) when the group holds as many of the peer's RMBs as it
// takes.
func (g *linkGroup) confirmRKeyAnswer(l *link, resp []byte) []byte {
	m := smcwire.ConfirmRKey(resp)
	t0 := m.RToken(0)
	g.mu.Lock()
	i := g.rtokenAddLocked(l.idx, t0.RKey, t0.VA)
	for k := 1; i >= 0 && k < m.NumRTokens(); k++ {
		t := m.RToken(k)
		for _, o := range g.links {
			if o != nil && o.id == t.LinkID && o != l {
				g.rtoks[i].set[o.idx] = rtoken{t.RKey, t.VA}
			}
		}
	}
	g.mu.Unlock()
	if i < 0 {
		resp[3] |= byte(smcwire.LLCFlagRKeyNegative | smcwire.LLCFlagRKeyRetry)
	}
	return resp
}

// deleteRKeyAnswer forgets the peer's RMBs a DELETE_RKEY names (valid on
// link l, where it came) and builds Linux's answer: v2 a 44-byte response
// that keeps the count, zeroes the rkeys and counts those unknown in byte
// 5; v1 the rkeys echoed with an error mask (bit 7-i for rkey i unknown);
// negative when one was.
func (g *linkGroup) deleteRKeyAnswer(l *link, resp []byte) []byte {
	m := smcwire.DeleteRKey(resp)
	v2 := smcwire.LLCType(resp[0]).Version() == 2
	var status uint8
	g.mu.Lock()
	for i := range m.NumRKeys() {
		if !g.rtokenDeleteLocked(l.idx, m.RKey(i)) {
			if v2 {
				status++
			} else if i < deleteRKeyMax {
				status |= 1 << (deleteRKeyMax - 1 - i)
			}
		}
	}
	g.mu.Unlock()
	resp = resp[:smcwire.LLCLen]
	if v2 {
		resp[1], resp[2] = smcwire.LLCLen, 0
		clear(resp[8:])
	}
	resp[5] = status
	if status != 0 {
		resp[3] |= byte(smcwire.LLCFlagRKeyNegative)
	}
	return resp
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
