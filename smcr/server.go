package smcr

import (
	"fmt"
	"time"

	"github.com/goroce/goroce/smcr/smcwire"
)

// How long each side waits for CONFIRM_LINK (Linux: the server waits 2 s
// for the response, the client 4 s for the request).
const (
	serverConfirmLinkWait = 2 * time.Second
	clientConfirmLinkWait = 4 * time.Second
	// serverConfirmLinkResend is how often the server sends its
	// CONFIRM_LINK again while it waits. A Linux client sends its CLC
	// Confirm before it starts the LLC flow that takes the CONFIRM_LINK,
	// and drops one that comes in between; a Linux server registers its
	// buffers first and so is rarely that quick, goroce's is (seen with a
	// slow guest: the client acknowledged the CONFIRM_LINK on the wire and
	// never answered it). A client that got the first answers the second
	// as well, or drops it.
	serverConfirmLinkResend = 400 * time.Millisecond
)

var timeAfter = time.After

// server runs the server's side of the handshake (see handshake.go).
func (h *handshake) server() error {
	cfg := h.cfg
	m, err := h.waitCLC("Proposal", cfg.ProposalTimeout)
	if err != nil {
		return err
	}
	if m.Type() != smcwire.CLCProposal {
		return fmt.Errorf("smcr: expected a CLC Proposal, got %v", m.Type())
	}
	h.clcVersion = min(max(m.Version(), 1), 2)
	p, err := smcwire.ParseProposal(m)
	if err != nil {
		return fmt.Errorf("smcr: a malformed CLC Proposal: %w", err)
	}
	peerGID := p.GID()
	switch {
	case p.Version() >= 2 && p.TypeV2().HasR() && p.HasV2Ext() && len(cfg.UEIDs) > 0 && h.commonEID(p):
		h.v2 = true
		peerGID = p.RoCEGID()
	case p.TypeV1().HasR() && p.HasIPArea():
		if !subnetMatches(p, h.st.primary().key.Addr()) {
			return decline(smcwire.DiagDiffPrefix, "the client's IP area is not this device's subnet")
		}
	case p.TypeV2().HasR() && p.HasV2Ext() && p.NumUserEIDs() == 0:
		return decline(smcwire.DiagNoUEID, "the client offers SMC-R v2 without a UEID")
	case p.TypeV2().HasR() && p.HasV2Ext():
		// As Linux: no UEID in common means no device for v2.
		return decline(smcwire.DiagNoSMCDev, "no UEID in common with the client (add one both sides know, Config.UEIDs)")
	default:
		return decline(smcwire.DiagModeUnsupp, "the client offers no SMC-R variant this side speaks")
	}
	// v2 release 1 negotiates the group's limits: the lower of both
	// sides' max connections (at least 16) and max links (this side asks
	// for two, as Linux: after the first contact it adds a second link,
	// see addlink.go).
	maxConns, maxLinks, release := cfg.MaxConnsPerLinkGroup, addLinksMax, uint8(0)
	if h.v2 {
		release = min(p.Release(), 1)
		if release >= 1 {
			maxConns = min(maxConns, int(p.MaxConns()))
			if maxConns < 16 {
				return decline(smcwire.DiagMaxConnErr, "max connections per link group %d is below 16", maxConns)
			}
			if p.MaxLinks() < 1 {
				return decline(smcwire.DiagMaxLinkErr, "the client's max links is 0")
			}
			maxLinks = min(maxLinks, int(p.MaxLinks()))
		}
	}
	key := lgrKey{role: roleServer, v2: h.v2, peerID: p.PeerID(), peerGID: peerGID, peerTCP: addrPort(h.tcp.RemoteAddr()).Addr()}
	if h.g, err = h.joinLinkGroup(key, nil, true); err != nil {
		return err
	}
	if h.g == nil {
		c := *cfg
		c.MaxConnsPerLinkGroup = maxConns
		g, err := newLinkGroup(h.st, key, &c)
		if err != nil {
			return decline(smcwire.DiagMem, "%v", err)
		}
		// The group's worker runs already (and reads these under mu).
		g.mu.Lock()
		g.eid, g.release, g.maxLinks = h.eid, release, maxLinks
		g.reserved = 1
		g.mu.Unlock()
		h.g, h.lnk, h.first = g, g.first(), true
	}
	if err := h.newConn(); err != nil {
		return err
	}
	if err := writeCLC(h.tcp, h.acceptConfirm(false), cfg.HandshakeTimeout); err != nil {
		return err
	}
	m, err = h.waitCLC("Confirm", cfg.HandshakeTimeout)
	if err != nil {
		return err
	}
	if m.Type() != smcwire.CLCConfirm {
		return fmt.Errorf("smcr: expected a CLC Confirm, got %v", m.Type())
	}
	c, err := smcwire.ParseAcceptConfirm(m)
	if err != nil {
		return fmt.Errorf("smcr: a malformed CLC Confirm: %w", err)
	}
	if c.FirstContact() != h.first {
		return decline(smcwire.DiagSyncErr, "the client's Confirm disagrees on first contact")
	}
	if l := h.lnk; !h.first && (c.QPN() != l.peerQPN || c.GID() != l.peerGID) {
		// Its connection would be on a link it does not have.
		return decline(smcwire.DiagSyncErr, "the client's Confirm names QP %#x of %v, the link group's peer is QP %#x of %v",
			c.QPN(), c.GID().Addr(), l.peerQPN, l.peerGID.Addr())
	}
	if h.v2 && h.first {
		if !c.HasFirstContactExt() {
			return decline(smcwire.DiagSyncErr, "a v2 first-contact Confirm without its extension")
		}
		if c.Release() != h.g.release {
			return decline(smcwire.DiagReleaseErr, "the client's release %d is not the negotiated %d", c.Release(), h.g.release)
		}
		if h.g.release >= 1 && int(c.MaxConns()) != h.g.maxConns {
			return decline(smcwire.DiagMaxConnErr, "the client's max connections %d is not the negotiated %d", c.MaxConns(), h.g.maxConns)
		}
		if h.g.release >= 1 && int(c.MaxLinks()) != h.g.maxLinks {
			return decline(smcwire.DiagMaxLinkErr, "the client's max links %d is not the negotiated %d", c.MaxLinks(), h.g.maxLinks)
		}
	}
	if err := h.sc.attachPeer(c.AlertToken(), c.RMBRKey(), c.RMBVA(), c.RMBESize()); err != nil {
		return decline(smcwire.DiagErrRTok, "%v", err)
	}
	if h.first {
		h.g.mu.Lock()
		if c.HasFirstContactExt() {
			h.g.peerHost = c.Hostname().String()
		}
		for i := range c.NumGIDs() {
			h.g.peerGIDs = append(h.g.peerGIDs, c.ListGID(i))
		}
		h.g.mu.Unlock()
		if err := h.lnk.connect(c.QPN(), c.PSN(), c.GID(), c.MAC(), peerMTU(h.ourMTU(), c.QPMTU())); err != nil {
			return decline(smcwire.DiagErrRdyLnk, "%v", err)
		}
		if err := h.serverConfirmLink(); err != nil {
			return err
		}
		if h.g.maxLinks > 1 {
			// As Linux's server after a first contact: try a second link.
			h.g.spawnRemote(func() { h.g.serverAddLink(nil) })
		}
	}
	h.endFirstContact()
	return nil
}

// commonEID picks the first of the client's UEIDs this side has too.
func (h *handshake) commonEID(p smcwire.Proposal) bool {
	for i := range p.NumUserEIDs() {
		if e := p.UserEID(i); h.knownEID(e) {
			h.eid = e
			return true
		}
	}
	return false
}

// serverConfirmLink runs CONFIRM_LINK over the new link and makes the
// group ready.
func (h *handshake) serverConfirmLink() error {
	g, l := h.g, h.lnk
	send := func() error {
		g.flowMu.Lock()
		defer g.flowMu.Unlock()
		return l.sendLLC(g.confirmLinkMsg(l, false), g.stop, nil)
	}
	g.drainResp()
	if err := send(); err != nil {
		return decline(smcwire.DiagErrRdyLnk, "CONFIRM_LINK: %v", err)
	}
	deadline := timeAfter(serverConfirmLinkWait)
	resend := time.NewTicker(serverConfirmLinkResend)
	defer resend.Stop()
	for {
		select {
		case in := <-g.resp:
			if !isResponseOf(smcwire.LLCConfirmLink)(in) {
				continue
			}
			l.confirm(smcwire.ConfirmLink(in.msg))
		case <-resend.C:
			if err := send(); err != nil {
				return decline(smcwire.DiagErrRdyLnk, "CONFIRM_LINK: %v", err)
			}
			continue
		case <-l.dead:
			return decline(smcwire.DiagTimeoutCL, "the link failed during CONFIRM_LINK: %v", l.downErr)
		case <-deadline:
			return decline(smcwire.DiagTimeoutCL, "no CONFIRM_LINK response within %v", serverConfirmLinkWait)
		}
		break
	}
	g.makeReady(l)
	return nil
}
