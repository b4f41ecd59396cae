package smcr

import (
	"fmt"

	"github.com/goroce/goroce/smcr/smcwire"
)

// client runs the client's side of the handshake (see handshake.go).
func (h *handshake) client() error {
	cfg := h.cfg
	wantV2 := len(cfg.UEIDs) > 0
	wantV1 := !cfg.NoV1 || !wantV2
	// Linux always sends header version 2. Its v2-only Proposals leave
	// the peer ID and MAC zero, yet a Linux server takes both from there
	// (the MAC as the next hop): this side fills them in.
	dev := h.st.primary()
	f := smcwire.ProposalFields{CLCHeader: smcwire.CLCHeader{Version: 2, TypeV1: smcwire.TypeN, TypeV2: smcwire.TypeN},
		PeerID: h.st.peerID, GID: gidOf(dev.gid), MAC: dev.mac}
	if wantV1 {
		f.TypeV1 = smcwire.TypeR
		f.IPArea = ipArea(dev.key.Addr())
	}
	if wantV2 {
		f.TypeV2 = smcwire.TypeR
		// Max links 2, as Linux proposes: the server then offers a
		// second link (ADD_LINK), on another device of this side's if it
		// has one, or on the same one if the server has another.
		v := &smcwire.ProposalV2Ext{Release: 1, RoCEGID: gidOf(dev.gid),
			MaxConns: uint8(cfg.MaxConnsPerLinkGroup), MaxLinks: addLinksMax, FeatureMask: featureMask}
		for _, u := range cfg.UEIDs {
			v.UserEIDs = append(v.UserEIDs, smcwire.EIDFrom(u))
		}
		f.V2Ext = v
	}
	if err := writeCLC(h.tcp, smcwire.AppendProposal(nil, &f), cfg.HandshakeTimeout); err != nil {
		return err
	}
	h.clcVersion = 2
	m, err := h.waitCLC("Accept", cfg.HandshakeTimeout)
	if err != nil {
		return err
	}
	h.clcVersion = min(m.Version(), 2)
	if m.Type() != smcwire.CLCAccept {
		return fmt.Errorf("smcr: expected a CLC Accept, got %v", m.Type())
	}
	a, err := smcwire.ParseAcceptConfirm(m)
	if err != nil {
		return fmt.Errorf("smcr: a malformed CLC Accept: %w", err)
	}
	switch {
	case a.Version() >= 2 && wantV2:
		h.v2 = true
		h.eid = a.EID() // Linux's client takes it unchecked
	case a.Version() == 1 && wantV1:
	default:
		return decline(smcwire.DiagModeUnsupp, "the server chose SMC version %d, which this side did not propose", a.Version())
	}
	if h.v2 && a.FirstContact() {
		if !a.HasFirstContactExt() {
			return decline(smcwire.DiagSyncErr, "a v2 first-contact Accept without its extension")
		}
		// The client adopts the server's limits (and echoes them).
		if a.Release() >= 1 {
			if a.MaxConns() < 16 {
				return decline(smcwire.DiagMaxConnErr, "the server's max connections %d is below 16", a.MaxConns())
			}
			if a.MaxLinks() < 1 || a.MaxLinks() > 2 {
				return decline(smcwire.DiagMaxLinkErr, "the server's max links %d is not 1 or 2", a.MaxLinks())
			}
		}
	}
	if err := h.clientLinkGroup(a); err != nil {
		return err
	}
	if err := h.newConn(); err != nil {
		return err
	}
	sc := h.sc
	if err := sc.attachPeer(a.AlertToken(), a.RMBRKey(), a.RMBVA(), a.RMBESize()); err != nil {
		return decline(smcwire.DiagErrRTok, "%v", err)
	}
	if h.first {
		err := h.lnk.connect(a.QPN(), a.PSN(), a.GID(), a.MAC(), peerMTU(h.ourMTU(), a.QPMTU()))
		if err != nil {
			return decline(smcwire.DiagErrRdyLnk, "%v", err)
		}
	}
	if err := writeCLC(h.tcp, h.acceptConfirm(true), cfg.HandshakeTimeout); err != nil {
		return err
	}
	if h.first {
		if err := h.clientConfirmLink(); err != nil {
			return err
		}
	}
	h.endFirstContact()
	return nil
}

// knownEID reports whether e is one of this side's UEIDs.
func (h *handshake) knownEID(e smcwire.EID) bool {
	for _, u := range h.cfg.UEIDs {
		if smcwire.EIDFrom(u) == e {
			return true
		}
	}
	return false
}

// clientLinkGroup creates the link group of a first contact, or finds the
// existing one the server chose (its GID and QP).
func (h *handshake) clientLinkGroup(a smcwire.AcceptConfirm) error {
	// A client's group is the server's (its peer ID): any of its links
	// may be the one an Accept names (by its QP and GID), as Linux's
	// smcr_lgr_match looks at every link.
	peerGID := a.GID()
	key := lgrKey{role: roleClient, v2: h.v2, peerID: a.PeerID()}
	if !a.FirstContact() {
		// As Linux, which serializes the two: a group whose first contact
		// is under way is waited for, so that it can be the one.
		known := false
		var lnk *link
		g, err := h.joinLinkGroup(key, func(g *linkGroup) bool {
			known = known || g.usable() // one that is ending or never got ready is not the server's
			lnk = g.peerLink(a.QPN(), peerGID)
			return lnk != nil
		}, false)
		switch {
		case err != nil:
			return err
		case g != nil:
			h.g, h.lnk = g, lnk
			return nil
		case known:
			return decline(smcwire.DiagNoSrvLink, "the server reuses a link group whose link (QP %#x) this side does not have", a.QPN())
		}
		// As Linux: out of sync, so that the server ends the group.
		return &declineErr{diag: smcwire.DiagSyncErr, outOfSync: true,
			err: fmt.Errorf("the server reuses a link group (peer GID %v) this side does not have", peerGID)}
	}
	// Another first contact to the same server under way is not waited
	// for (the server asks for a new group); the claim, if this one gets
	// it, makes the subsequent contacts that name the group wait for it.
	never := func(*linkGroup) bool { return false }
	if _, wait, release := h.st.joinOrClaim(key, never, true); wait == nil {
		h.release = release
	}
	g, err := newLinkGroup(h.st, key, h.cfg)
	if err != nil {
		return decline(smcwire.DiagMem, "%v", err)
	}
	// The group's worker runs already (and reads these under mu).
	g.mu.Lock()
	g.eid = h.eid
	g.maxLinks = 2
	if a.HasFirstContactExt() {
		g.peerHost = a.Hostname().String()
		g.release = a.Release()
		if a.Release() >= 1 {
			g.maxConns, g.maxLinks = int(a.MaxConns()), int(a.MaxLinks())
		}
	}
	g.reserved = 1
	g.mu.Unlock()
	h.g, h.lnk, h.first = g, g.first(), true
	return nil
}

// clientConfirmLink waits for the server's CONFIRM_LINK over the new link
// (4 s, as Linux's client), takes the link number it gives, answers it,
// and makes the group ready.
func (h *handshake) clientConfirmLink() error {
	g, l := h.g, h.lnk
	// As a flow: the server's ADD_LINK, which may follow its CONFIRM_LINK
	// at once, waits for it (Linux delays it the same way).
	g.flowMu.Lock()
	defer g.flowMu.Unlock()
	select {
	case m := <-g.cnfLnk:
		cl := smcwire.ConfirmLink(m)
		if cl.SenderQPN() != l.peerQPN {
			return decline(smcwire.DiagSyncErr, "CONFIRM_LINK from QP %#x, the link's peer is %#x", cl.SenderQPN(), l.peerQPN)
		}
		g.mu.Lock()
		l.setID(cl.LinkNum()) // the server numbers the links
		g.mu.Unlock()
		l.confirm(cl)
	case <-l.dead:
		return decline(smcwire.DiagTimeoutCL, "the link failed before CONFIRM_LINK: %v", l.downErr)
	case <-timeAfter(clientConfirmLinkWait):
		return decline(smcwire.DiagTimeoutCL, "no CONFIRM_LINK within %v", clientConfirmLinkWait)
	}
	if err := l.sendLLC(g.confirmLinkMsg(l, true), g.stop, nil); err != nil {
		return decline(smcwire.DiagErrRdyLnk, "CONFIRM_LINK response: %v", err)
	}
	g.makeReady(l)
	return nil
}
