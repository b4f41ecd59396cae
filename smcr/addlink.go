package smcr

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/goroce/goroce/smcr/smcwire"
)

// Adding a link (Linux's smc_llc_srv_add_link and smc_llc_cli_add_link).
// The server runs it after a first contact, when the client asks
// (REQUEST_ADD_LINK, or a v1 client's ADD_LINK invitation), and again
// after a link was lost; the client answers:
//
//	server                                       client
//	new link on another device (none: the same,
//	  asymmetric local), buffers registered
//	ADD_LINK (its QP, PSN, MTU; v2: every RMB's
//	  rkey on the old and the new link) ───────▶
//	                                             new link on another device
//	                                               (none: the same; the
//	                                               server's same device and
//	                                               none here: reject)
//	                                         ◀── ADD_LINK response (the same)
//	v1: ADD_LINK_CONT, two rkeys each, in turn ◀─▶
//	CONFIRM_LINK over the new link ──────────────▶
//	                                         ◀── CONFIRM_LINK response
//
// Both sides run it as a flow (flowMu): no CONFIRM_RKEY of a new
// connection runs meanwhile, and a new connection's buffers are
// registered on the new link (it is in the group's links from the start).

// relinkInterval is the first wait before a group that lost a link tries
// to add one again, doubling after each failed attempt up to relinkMax (a
// path that stays dead costs an attempt's wait that often).
const (
	relinkInterval = 5 * time.Second
	relinkMax      = 60 * time.Second
)

// relinkBase is relinkInterval, or a test's hook.
func (g *linkGroup) relinkBase() time.Duration {
	if g.hooks.relinkInterval > 0 {
		return g.hooks.relinkInterval
	}
	return relinkInterval
}

// relink starts an attempt to add a link again (the worker's tick): the
// server adds one, a client asks for one.
func (g *linkGroup) relink() {
	g.mu.Lock()
	if g.role == roleClient {
		if l, _ := g.askWithLocked(); l == nil {
			// Nothing to ask with (the lost device is still down): no
			// attempt, so no back-off; look again after the base wait,
			// and the path that returns is used soon after.
			g.relinkAt = mono() + int64(g.relinkBase())
			g.mu.Unlock()
			return
		}
	}
	g.relinkAt = mono() + int64(g.relinkWait)
	g.relinkWait = min(2*g.relinkWait, relinkMax)
	g.mu.Unlock()
	if g.role == roleServer {
		g.spawnRemote(func() { g.serverAddLink(nil) })
		return
	}
	g.spawnRemote(g.requestAddLink)
}

// linkAdded makes l, confirmed, one of the group's active links, and the
// group of type t.
func (g *linkGroup) linkAdded(l *link, t lgrType) {
	g.mu.Lock()
	l.confirmed.Store(true)
	if !l.down.Load() {
		g.redundant.Store(true)
		l.state.Store(int32(linkActive))
		g.setTypeLocked(t, l)
		// Not the three of a replacement: its asymmetric link goes.
		g.wantLinks = min(max(g.wantLinks, g.activeLinksLocked()), addLinksMax)
		g.relinkWait = g.relinkBase()
	}
	g.mu.Unlock()
	g.st.count(&g.st.stats.linksAdded)
	if l.down.Load() {
		wake(g.linkEvent) // it failed while it was set up: the group handles it now
		return
	}
	g.reportLink(l, true, nil)
}

// setTypeLocked sets the group's type; in an asymmetric one, link asym is
// the asymmetric link, which new connections do not use (Linux's
// smcr_lgr_set_type_asym). mu is held.
func (g *linkGroup) setTypeLocked(t lgrType, asym *link) {
	for _, l := range g.links {
		if l != nil {
			l.asym = false
		}
	}
	g.typ = t
	if asym != nil && (t == lgrAsymLocal || t == lgrAsymPeer) {
		asym.asym = true
	}
}

// freeSlotLocked returns a slot for a link of type t (Linux's
// smc_llc_alloc_alt_link): none in a symmetric group, nor for another
// asymmetric link in a group of two; an asymmetric link takes the last
// free slot, a symmetric one the first. A symmetric link may join an
// asymmetric group of two (the third slot): it replaces the asymmetric
// link, which is deleted once it is up (retireAsym). mu is held.
func (g *linkGroup) freeSlotLocked(t lgrType) int {
	asym := t == lgrAsymLocal || t == lgrAsymPeer
	if g.typ == lgrSymmetric || (g.typ != lgrSingle && asym) || g.symLinksLocked() >= addLinksMax {
		return -1
	}
	for k := range maxLinks {
		i := k
		if asym {
			i = maxLinks - 1 - k
		}
		if g.links[i] == nil {
			return i
		}
	}
	return -1
}

// altDeviceLocked returns a device of the stack for a link beside from:
// one that is not down and that no link of the group uses but an
// asymmetric one (which the new link replaces); nil: none. mu is held.
func (g *linkGroup) altDeviceLocked(from *link) *smcDevice {
	for _, d := range g.st.devs {
		if d == from.dev || !d.up() {
			continue
		}
		used := false
		for _, l := range g.links {
			used = used || (l != nil && !l.down.Load() && !l.asym && l.dev == d)
		}
		if !used {
			return d
		}
	}
	return nil
}

// hasAltDeviceLocked reports whether the stack has a device besides
// from's, up or down.
func (g *linkGroup) hasAltDeviceLocked(from *link) bool {
	for _, d := range g.st.devs {
		if d != from.dev {
			return true
		}
	}
	return false
}

// newAltLink creates a link on d in slot idx and puts it in the group,
// registered with every buffer; nil when it cannot be made.
func (g *linkGroup) newAltLink(d *smcDevice, idx int, id uint8) (*link, error) {
	nl, err := newLink(g, d, idx, id)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	if g.ending || g.links[idx] != nil {
		g.mu.Unlock()
		nl.destroy()
		return nil, errGroupEnding
	}
	g.links[idx] = nl
	err = g.registerLinkLocked(nl)
	g.mu.Unlock()
	if err != nil {
		g.clearLink(nl)
		return nil, err
	}
	return nl, nil
}

// addLinkMsg builds an ADD_LINK (request or response) for new link nl,
// sent on l: nl's device, QP, PSN and MTU, and in v2 the rkey of every
// RMB of the group on l and on nl (Linux's smc_llc_fill_ext_v2).
func (g *linkGroup) addLinkMsg(l, nl *link, mtu smcwire.QPMTU, resp bool) []byte {
	f := smcwire.AddLinkFields{SenderMAC: nl.dev.mac, SenderGID: gidOf(nl.dev.gid), SenderQPN: nl.qp.QPN(),
		LinkNum: nl.id, QPMTU: mtu, InitialPSN: uint32(nl.psn)}
	if g.v2 {
		f.V2Ext = &smcwire.AddLinkV2Ext{V2Direct: true, ClientTargetGID: gidOf(nl.dev.gid), RKeys: g.rkeyPairs(l, nl, maxRTokens)}
	}
	return smcwire.AppendAddLink(nil, g.v2, respFlag(resp), &f)
}

// rkeyPairs lists (up to n of) the group's RMBs with their rkeys on l and
// on nl.
func (g *linkGroup) rkeyPairs(l, nl *link, n int) []smcwire.RKeyPair {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ps []smcwire.RKeyPair
	for b := range g.bufs {
		if b.remote && b.mrs[l.idx] != nil && b.mrs[nl.idx] != nil && len(ps) < n {
			ps = append(ps, smcwire.RKeyPair{RKey: b.rkeyOn(l.idx), RKeyNew: b.rkeyOn(nl.idx), VANew: rmbVA(b)})
		}
	}
	return ps
}

// saveRKeys records the peer's RMBs on new link nl from pairs of its rkey
// on l and on nl.
func (g *linkGroup) saveRKeys(l, nl *link, pairs []smcwire.RKeyPair) {
	g.mu.Lock()
	for _, p := range pairs {
		g.rtokenSetLocked(l.idx, nl.idx, p.RKey, p.RKeyNew, p.VANew)
	}
	g.mu.Unlock()
}

// ourMTU is the QP MTU device d offers: its port's active MTU.
func ourMTU(d *smcDevice) smcwire.QPMTU { return smcwire.QPMTU(d.dev.Port().ActiveMTU) }

// errAddLinkAborted: the peer deleted a link during an ADD_LINK flow.
var errAddLinkAborted = errors.New("smcr: the peer deleted a link during ADD_LINK")

// addLinkAwait waits (up to d) during an ADD_LINK flow for what match
// takes; a DELETE_LINK request from the peer instead ends the flow, and is
// handed on to be answered once it has.
func (g *linkGroup) addLinkAwait(d time.Duration, match func(llcIn) bool, watch ...*link) (llcIn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	in, err := g.await(ctx, func(in llcIn) bool {
		m := smcwire.LLC(in.msg)
		return match(in) || (m.Type().Base() == smcwire.LLCDeleteLink && !m.IsResponse())
	}, watch...)
	if err == nil && smcwire.LLC(in.msg).Type().Base() == smcwire.LLCDeleteLink && !match(in) {
		g.handOn(in)
		return in, errAddLinkAborted
	}
	return in, err
}

// handOn gives the worker a DELETE_LINK an ADD_LINK flow took, to be
// answered once the flow has ended.
func (g *linkGroup) handOn(in llcIn) {
	select {
	case g.events <- lgrEvent{l: in.l, llc: in.msg}:
	default:
		g.st.count(&g.st.stats.llcDropped)
	}
}

// serverAddLink adds a link as Linux's server does (see the top of this
// file); req is the client's REQUEST_ADD_LINK that asked for it, if any,
// answered empty when no ADD_LINK went out.
func (g *linkGroup) serverAddLink(req *llcIn) {
	g.flowMu.Lock()
	defer g.flowMu.Unlock()
	asked := false
	defer func() {
		if req != nil && !asked {
			// As a Linux server that adds none: the type, the response
			// flag, 44 bytes, zeros (a Linux client waits for it).
			r := make([]byte, smcwire.LLCLen)
			r[0], r[1], r[3] = req.msg[0], smcwire.LLCLen, byte(smcwire.LLCFlagResponse)
			_ = req.l.sendLLC(r, g.closing, nil)
		}
	}()
	g.mu.Lock()
	l := g.usableLinkLocked()
	if l == nil || !g.ready || g.ending || g.maxLinks < 2 {
		g.mu.Unlock()
		return
	}
	t, d := lgrSymmetric, g.altDeviceLocked(l)
	if d == nil {
		if g.hasAltDeviceLocked(l) {
			// Its other device is down: wait for it rather than pile two
			// links on one device.
			g.mu.Unlock()
			return
		}
		t, d = lgrAsymLocal, l.dev
	}
	idx := g.freeSlotLocked(t)
	id := g.nextLinkIDLocked()
	g.mu.Unlock()
	if idx < 0 {
		return
	}
	g.adding.Store(true)
	defer g.adding.Store(false)
	g.drainResp()
	nl, err := g.newAltLink(d, idx, id)
	if err != nil {
		return
	}
	ok := false
	defer func() {
		if !ok {
			g.clearLink(nl)
		}
	}()
	if err := l.sendLLC(g.addLinkMsg(l, nl, ourMTU(d), false), g.closing, nil); err != nil {
		return
	}
	asked = true
	in, err := g.addLinkAwait(llcWait, func(in llcIn) bool {
		m := smcwire.LLC(in.msg)
		return m.IsResponse() && m.Type().Base() == smcwire.LLCAddLink
	}, l, nl)
	if err != nil {
		return
	}
	a := smcwire.AddLink(in.msg)
	if a.Rejected() {
		return
	}
	g.mu.Lock()
	if g.typ == lgrSingle && a.SenderGID() == l.peerGID && (g.v2 || a.SenderMAC() == l.peerMAC) {
		t = lgrAsymPeer // the client had no other device: the new link shares its first
	}
	g.mu.Unlock()
	if err := nl.connect(a.SenderQPN(), a.InitialPSN(), a.SenderGID(), a.SenderMAC(), peerMTU(ourMTU(d), a.QPMTU())); err != nil {
		return
	}
	if g.v2 {
		g.saveRKeys(l, nl, addLinkPairs(a))
	} else if err := g.serverRKeyExchange(l, nl); err != nil {
		return
	}
	if err := g.serverConfirmNewLink(l, nl); err != nil {
		return
	}
	ok = true
	g.mu.Lock()
	asym := g.asymLinkLocked()
	g.mu.Unlock()
	g.linkAdded(nl, t)
	if t == lgrSymmetric && asym != nil && !nl.down.Load() {
		g.retireAsym(asym)
	}
}

// retireAsym deletes the asymmetric link a symmetric one replaced
// (Linux's smc_llc_delete_asym_link, the server's part): as a failed
// link is, by the same flow (its connections move, the client is told,
// it is cleared), so that whatever it still carried is written again on
// the link its connections move to; only the DELETE_LINK's reason,
// NO_ASYM_NEEDED, and the counters tell the two apart.
func (g *linkGroup) retireAsym(asym *link) {
	asym.retired.Store(true)
	asym.fail(errAsymReplaced)
}

var errAsymReplaced = errors.New("smcr: a symmetric link replaced the asymmetric one")

// asymLinkLocked returns the group's asymmetric link, or nil. mu is held.
func (g *linkGroup) asymLinkLocked() *link {
	for _, l := range g.links {
		if l != nil && l.asym && !l.down.Load() {
			return l
		}
	}
	return nil
}

// symLinksLocked counts the links, up or being set up, that are not
// asymmetric. mu is held.
func (g *linkGroup) symLinksLocked() int {
	n := 0
	for _, l := range g.links {
		if l != nil && !l.down.Load() && !l.asym {
			n++
		}
	}
	return n
}

// canReplaceAsymLocked reports whether a group whose two links share a
// device of this side (asymmetric local) could now have a symmetric one:
// another device of this side is up again, and no link but the
// asymmetric one uses it (Linux's smcr_port_add, which starts an
// ADD_LINK flow for such groups when a port comes up). The peer of an
// asymmetric-peer group asks for it itself. mu is held.
func (g *linkGroup) canReplaceAsymLocked() bool {
	if g.typ != lgrAsymLocal {
		return false
	}
	l, _ := g.askWithLocked()
	return l != nil
}

// addLinkPairs returns the rkey pairs of an ADD_LINK's v2 extension.
func addLinkPairs(a smcwire.AddLink) []smcwire.RKeyPair {
	ps := make([]smcwire.RKeyPair, a.NumRKeys())
	for i := range ps {
		ps[i] = a.RKey(i)
	}
	return ps
}

// serverConfirmNewLink runs CONFIRM_LINK over the new link nl (Linux's
// smc_llc_srv_conf_link); without its answer it deletes nl at the peer
// (DELETE_LINK on l).
func (g *linkGroup) serverConfirmNewLink(l, nl *link) error {
	if err := nl.sendLLC(g.confirmLinkMsg(nl, false), g.closing, nil); err != nil {
		return err
	}
	in, err := g.addLinkAwait(llcWait, func(in llcIn) bool {
		m := smcwire.LLC(in.msg)
		return in.l == nl && m.IsResponse() && m.Type().Base() == smcwire.LLCConfirmLink
	}, l, nl)
	if err != nil {
		if !errors.Is(err, errAddLinkAborted) && !errors.Is(err, errGroupEnding) && !l.down.Load() {
			f := smcwire.DeleteLinkFields{LinkNum: nl.id, Reason: smcwire.DelLostPath}
			_ = l.sendLLC(smcwire.AppendDeleteLink(nil, g.v2, 0, &f), g.closing, nil)
		}
		return err
	}
	nl.confirm(smcwire.ConfirmLink(in.msg))
	return nil
}

// rkeyExchange runs the v1 ADD_LINK_CONT exchange on l for new link nl
// (Linux's smc_llc_srv_rkey_exchange and smc_llc_cli_rkey_exchange): each
// side sends its RMBs' rkey pairs, two a message, saying how many it has
// left, and takes the other's, in turn, the server first; until neither
// has any left.
func (g *linkGroup) rkeyExchange(l, nl *link, server bool) error {
	ours := g.rkeyPairs(l, nl, maxRTokens)
	theirs := 1 // until the peer says
	for round := 0; len(ours) > 0 || theirs > 0; round++ {
		if round > maxRTokens/2+2 {
			return errors.New("smcr: ADD_LINK_CONT: the peer keeps announcing more rkeys")
		}
		if server {
			if err := g.sendAddLinkCont(l, nl, &ours, false); err != nil {
				return err
			}
		}
		in, err := g.addLinkAwait(llcWait, func(in llcIn) bool {
			return smcwire.LLC(in.msg).Type().Base() == smcwire.LLCAddLinkCont
		}, l, nl)
		if err != nil {
			return err
		}
		c := smcwire.AddLinkCont(in.msg)
		k := c.NumEntries()
		pairs := make([]smcwire.RKeyPair, k)
		for i := range pairs {
			pairs[i] = c.RKey(i)
		}
		g.saveRKeys(l, nl, pairs)
		theirs = c.NumRKeys() - k
		if !server {
			if err := g.sendAddLinkCont(l, nl, &ours, true); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *linkGroup) serverRKeyExchange(l, nl *link) error { return g.rkeyExchange(l, nl, true) }

// sendAddLinkCont sends one ADD_LINK_CONT on l with up to two of pairs
// (taken off it); its count is how many were left before it, as Linux
// counts. A client's carries the response flag.
func (g *linkGroup) sendAddLinkCont(l, nl *link, pairs *[]smcwire.RKeyPair, resp bool) error {
	k := min(len(*pairs), 2)
	f := smcwire.AddLinkContFields{LinkNum: nl.id, NumRKeys: uint8(min(len(*pairs), 255)), RKeys: (*pairs)[:k]}
	*pairs = (*pairs)[k:]
	return l.sendLLC(smcwire.AppendAddLinkCont(nil, respFlag(resp), &f), g.closing, nil)
}

// clientAddLink answers the server's ADD_LINK request req that came on l
// (Linux's smc_llc_cli_add_link; see the top of this file).
func (g *linkGroup) clientAddLink(l *link, req []byte) {
	g.flowMu.Lock()
	defer g.flowMu.Unlock()
	a := smcwire.AddLink(req)
	answered := false
	nl, err := g.clientNewLink(l, a, &answered)
	if err != nil {
		if nl != nil {
			g.clearLink(nl)
		}
		// As Linux: the request echoed with the reject flag, whatever the
		// failure.
		_ = l.sendLLC(rejectAddLink(req), g.closing, nil)
	}
}

// clientNewLink sets up the link a server's ADD_LINK asks for and
// confirms it; *answered tells whether the ADD_LINK response went out.
func (g *linkGroup) clientNewLink(l *link, a smcwire.AddLink, answered *bool) (*link, error) {
	if a.QPMTU() == 0 {
		return nil, errors.New("smcr: ADD_LINK without a QP MTU")
	}
	g.mu.Lock()
	if !g.ready || g.ending || g.maxLinks < 2 || l.down.Load() {
		g.mu.Unlock()
		return nil, errNoActiveLink
	}
	t, d := lgrSymmetric, g.altDeviceLocked(l)
	if a.SenderGID() == l.peerGID && (g.v2 || a.SenderMAC() == l.peerMAC) {
		if d == nil {
			g.mu.Unlock()
			return nil, errors.New("smcr: no alternate path: the server's device and ours are those of the first link")
		}
		t = lgrAsymPeer
	}
	if d == nil {
		t, d = lgrAsymLocal, l.dev
	}
	idx := g.freeSlotLocked(t)
	g.mu.Unlock()
	if idx < 0 {
		return nil, errors.New("smcr: the link group has as many links as it takes")
	}
	g.adding.Store(true)
	defer g.adding.Store(false)
	nl, err := g.newAltLink(d, idx, a.LinkNum())
	if err != nil {
		return nil, err
	}
	mtu := min(ourMTU(d), a.QPMTU())
	if err := nl.connect(a.SenderQPN(), a.InitialPSN(), a.SenderGID(), a.SenderMAC(), peerMTU(ourMTU(d), a.QPMTU())); err != nil {
		return nl, err
	}
	if err := l.sendLLC(g.addLinkMsg(l, nl, mtu, true), g.closing, nil); err != nil {
		return nl, err
	}
	*answered = true
	if g.v2 {
		g.saveRKeys(l, nl, addLinkPairs(a))
	} else if err := g.rkeyExchange(l, nl, false); err != nil {
		return nl, err
	}
	in, err := g.addLinkAwait(llcWaitFirst, func(in llcIn) bool {
		m := smcwire.LLC(in.msg)
		return !m.IsResponse() && m.Type().Base() == smcwire.LLCConfirmLink
	}, l, nl)
	if err != nil {
		return nl, fmt.Errorf("smcr: CONFIRM_LINK of the new link: %w", err)
	}
	cl := smcwire.ConfirmLink(in.msg)
	if cl.SenderQPN() != nl.peerQPN {
		return nl, fmt.Errorf("smcr: CONFIRM_LINK from QP %#x, the new link's peer is %#x", cl.SenderQPN(), nl.peerQPN)
	}
	nl.confirm(cl)
	if err := nl.sendLLC(g.confirmLinkMsg(nl, true), g.closing, nil); err != nil {
		return nl, err
	}
	g.linkAdded(nl, t)
	return nl, nil
}

// requestAddLink asks the server for a link (the worker's relink, on a
// client): v2 REQUEST_ADD_LINK with the stack's GIDs (Linux's
// smc_llc_send_request_add_link), v1 an ADD_LINK invitation naming the
// alternate device (smc_llc_cli_add_link_invite). The server's ADD_LINK,
// if it adds one, comes as a request of its own.
func (g *linkGroup) requestAddLink() {
	g.flowMu.Lock()
	defer g.flowMu.Unlock()
	g.mu.Lock()
	l, d := g.askWithLocked()
	g.mu.Unlock()
	if l == nil {
		return // no device of ours to add a link on now
	}
	var m []byte
	if g.v2 {
		m = smcwire.AppendRequestAddLink(nil, true, 0, &smcwire.RequestAddLinkFields{GIDs: g.st.gids()})
	} else {
		m = smcwire.AppendAddLink(nil, false, 0, &smcwire.AddLinkFields{SenderMAC: d.mac, SenderGID: gidOf(d.gid)})
	}
	_ = l.sendLLC(m, g.closing, nil)
}

// askWithLocked returns what a client asks the server for a link with:
// an active link to send on and a device of ours that no link uses; nil
// for both when either is missing. mu is held.
func (g *linkGroup) askWithLocked() (*link, *smcDevice) {
	l := g.usableLinkLocked()
	if l == nil {
		return nil, nil
	}
	d := g.altDeviceLocked(l)
	if d == nil {
		return nil, nil
	}
	return l, d
}

// usableLinkLocked is usableLink with mu held.
func (g *linkGroup) usableLinkLocked() *link {
	var asym *link
	for _, l := range g.links {
		if l != nil && l.active() {
			if !l.asym {
				return l
			}
			asym = l
		}
	}
	return asym
}
