package smcr

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/smcr/smcwire"
)

// The CLC handshake over the TCP connection, as Linux runs it:
//
//	client                                  server
//	Proposal (v2 ext: UEIDs, RoCEv2 GID) ─▶
//	                                         first contact: new link group, QP in INIT
//	                                         subsequent: CONFIRM_RKEY of the new RMB (LLC)
//	                                    ◀─ Accept (QPN, PSN, MTU, RMB rkey/VA, token)
//	first contact: QP to RTR/RTS
//	subsequent: CONFIRM_RKEY (LLC)
//	Confirm (the same of the client) ───▶
//	                                         first contact: QP to RTR/RTS,
//	                                    ◀─── CONFIRM_LINK (LLC, over the new link)
//	CONFIRM_LINK response ──────────────▶
//
// A Decline at any point before the connection is used, or any failure
// there (then this side sends the Decline), leaves both ends on the TCP
// connection as it is: a fallback. First contacts to one peer are
// serialized (see joinOrClaim), so that a burst of connections to a new
// peer builds one link group and fills it, rather than one group each.

// handshake is one connection's CLC exchange.
type handshake struct {
	cfg    *Config
	st     *stack
	tcp    *net.TCPConn
	rd     *clcReader
	role   role
	info   ConnInfo
	cancel <-chan struct{} // closed when the listener closes, or the dial's context ends

	g     *linkGroup
	lnk   *link // the connection's link: the first contact's, or the one the server chose
	first bool
	sc    *smcConn
	v2    bool
	eid   smcwire.EID
	// clcVersion is the CLC version of this side's Declines: the
	// Proposal's (server), the Accept's once it came (client).
	clcVersion uint8
	release    func() // ends the first contact this handshake claimed, if any
}

// declineErr is a failure that ends the handshake with a Decline (to send
// or received) and a fallback.
type declineErr struct {
	diag smcwire.DiagCode
	peer bool // the peer declined
	// outOfSync: the peer's link group disagrees with this side's (the
	// Decline carries the out-of-sync bit, and the peer ends that group).
	outOfSync bool
	err       error
}

func (e *declineErr) Error() string {
	if e.peer {
		return fmt.Sprintf("smcr: the peer declined SMC-R (%v)", e.diag)
	}
	return fmt.Sprintf("smcr: SMC-R declined (%v): %v", e.diag, e.err)
}

func decline(diag smcwire.DiagCode, format string, args ...any) error {
	return &declineErr{diag: diag, err: fmt.Errorf(format, args...)}
}

// endFirstContact ends the first contact this handshake claimed, if any:
// those with the same key that wait look for its group again.
func (h *handshake) endFirstContact() {
	if h.release != nil {
		h.release()
		h.release = nil
	}
}

// joinLinkGroup looks for the link group of key k (and match) that this
// connection can join, waiting while a first contact with the same key is
// under way, but no longer than the handshake timeout: then it goes on as
// if there were none. Without a group, it claims the first contact when
// claim is set (h.release), and returns nil.
func (h *handshake) joinLinkGroup(k lgrKey, match func(*linkGroup) bool, claim bool) (*linkGroup, error) {
	var limit <-chan time.Time
	for {
		g, wait, release := h.st.joinOrClaim(k, match, claim)
		if wait == nil {
			h.release = release
			return g, nil
		}
		if limit == nil {
			t := time.NewTimer(h.cfg.HandshakeTimeout)
			defer t.Stop()
			limit = t.C
		}
		select {
		case <-wait:
		case <-limit:
			return nil, nil // a first contact that slow is stuck: not this one's business
		case <-h.cancel:
			return nil, errCanceled
		}
	}
}

// abandon undoes a failed handshake's link group work.
func (h *handshake) abandon() {
	if h.g == nil {
		h.endFirstContact()
		return
	}
	if h.first {
		// The group never became ready: end it now.
		h.g.terminate(errors.New("smcr: handshake of the link group's first connection failed"))
	}
	if h.sc != nil {
		h.g.freeBuffer(h.sc.sndBuf)
		if h.sc.token != 0 {
			h.g.removeConn(h.sc)
			h.sc.link().conns.Add(-1)
		} else {
			h.g.unreserve()
		}
		// The peer may know the RMB's rkey already (CONFIRM_RKEY, or
		// CLC): it goes the way of a closed connection's.
		h.g.deleteRKeyLater(h.sc.rmbBuf)
	} else {
		h.g.unreserve()
	}
	h.endFirstContact()
}

// featureMask is the v2 feature mask Linux announces (bit 0: emulated
// ISM); an SMC-R peer echoes it, no more.
const featureMask = 0x0001

// sendDecline tells the peer why this side falls back (best effort), in
// Linux's layout: version 2 (44 bytes) unless the exchange is version 1
// (28).
func (h *handshake) sendDecline(de *declineErr) {
	// The out-of-sync bit only from a client, as Linux: a Linux client
	// that gets one before it has a link group may dereference none.
	f := smcwire.DeclineFields{CLCHeader: smcwire.CLCHeader{Version: h.clcVersion, FirstContact: de.outOfSync && h.role == roleClient},
		PeerID: h.st.peerID, Diagnosis: de.diag}
	if f.Version >= 2 {
		f.OSType = smcwire.OSLinux
	}
	_ = writeCLC(h.tcp, smcwire.AppendDecline(nil, &f), h.cfg.HandshakeTimeout)
}

// ourMTU is the QP MTU this side offers: the primary device port's active
// MTU.
func (h *handshake) ourMTU() smcwire.QPMTU { return ourMTU(h.st.primary()) }

// newConn creates the connection's buffers on h.g and registers it there,
// on h.lnk (a server's: the link it chooses for it).
func (h *handshake) newConn() error {
	g := h.g
	if !h.first {
		// No link comes or goes while the buffers are registered and the
		// peer learns their rkeys.
		g.flowMu.Lock()
		defer g.flowMu.Unlock()
	}
	sc, err := newSMCConn(g, h.cfg)
	if err != nil {
		return decline(smcwire.DiagErrRegBuf, "%v", err)
	}
	h.sc = sc
	if err := g.addConn(sc, h.lnk); err != nil {
		return decline(smcwire.DiagNoActLink, "%v", err)
	}
	h.lnk = sc.lnk
	if !h.first {
		// A later connection's RMB is announced on the link before the
		// peer learns of it in CLC.
		if err := g.confirmRKeyFlowLocked(h.lnk, sc.rmbBuf); err != nil {
			return decline(smcwire.DiagErrRegBuf, "CONFIRM_RKEY: %v", err)
		}
	}
	return nil
}

// acceptConfirm builds this side's Accept (server) or Confirm (client).
func (h *handshake) acceptConfirm(confirm bool) []byte {
	l, sc := h.lnk, h.sc
	h.g.mu.Lock()
	rkey, va := sc.rmbBuf.rkeyOn(l.idx), rmbVA(sc.rmbBuf)
	h.g.mu.Unlock()
	f := smcwire.AcceptConfirmFields{
		CLCHeader: smcwire.CLCHeader{Version: 1, FirstContact: h.first, TypeV1: smcwire.TypeR},
		Confirm:   confirm, PeerID: h.st.peerID, GID: gidOf(l.dev.gid), MAC: l.dev.mac,
		QPN: l.qp.QPN(), RMBRKey: rkey, RMBEIndex: 1, AlertToken: sc.token,
		RMBESizeCode: smcwire.RMBESizeCode(len(sc.rmb)), QPMTU: ourMTU(l.dev), RMBVA: va,
		PSN: uint32(l.psn),
	}
	if confirm {
		f.QPMTU = smcwire.QPMTU(l.mtu) // the path MTU both chose
	}
	if h.v2 {
		f.Version, f.EID = 2, h.eid
		if h.first {
			f.FirstContactExt = &smcwire.FirstContactExt{
				V2Direct: true, OSType: smcwire.OSLinux, Release: h.g.release,
				Hostname: smcwire.HostnameFrom(h.cfg.Hostname),
				MaxConns: uint8(h.g.maxConns), MaxLinks: uint8(h.g.maxLinks), FeatureMask: featureMask,
			}
			if confirm {
				// The GID list (Linux's smc_fill_gid_list): the link's
				// device, then the alternate ones.
				f.GIDs = h.st.gids()
			}
		}
	}
	return smcwire.AppendAcceptConfirm(nil, &f)
}

// peerMTU is the path MTU of a link: the lower of the two sides' offers.
func peerMTU(ours, theirs smcwire.QPMTU) rocev2.MTU {
	m := min(ours, theirs)
	if m < 1 {
		m = 1
	}
	return rocev2.MTU(m)
}

// finishConn turns the handshake into an SMC-R Conn.
func (h *handshake) finishConn(c *Conn) {
	c.smc = h.sc
	h.sc.c = c
	c.st = h.st
	c.info.Mode = ModeSMCRv1
	if h.v2 {
		c.info.Mode = ModeSMCRv2
		c.info.EID = h.eid.String()
	}
	c.info.FirstContact = h.first
	c.info.PeerHost = h.g.peerHost
	stats.countConnected(h.role == roleServer, h.v2)
	track(c)
	c.watchTCP()
	h.sc.follow()
}

// waitCLC reads the next CLC message. As in Linux, a message that cannot
// be read (a timeout, a malformed message, the peer closing) is a hard
// error: no Decline, no fallback, the connection closes (a CLC message
// arriving after a fallback would corrupt the stream). A Decline in place
// of the message is the peer's fallback; with the out-of-sync bit it also
// ends the link group the peer no longer agrees on. (Only the group's own
// peer can send that Decline: a server gives a group only to connections
// from its first contact's TCP address, see lgrKey.)
func (h *handshake) waitCLC(what string, wait time.Duration) (smcwire.CLC, error) {
	m, err := h.rd.next(wait)
	switch {
	case errors.Is(err, errCLCTimeout):
		return nil, fmt.Errorf("smcr: no CLC %s within %v: %w", what, wait, err)
	case errors.Is(err, errNotCLC) && h.role == roleClient:
		why := "Config.PeerSpeaksSMC said it does: dial a plain TCP server without it"
		if h.info.Signalling == SignalOption {
			why = "yet its TCP handshake carried the SMC option: a broken SMC server, or a middlebox that rewrites TCP options"
		}
		return nil, fmt.Errorf("%w: it answered the CLC Proposal with %q, which is no CLC message; %s", ErrPeerNotSMC, h.rd.read, why)
	case err != nil:
		return nil, err
	}
	if m.Type() == smcwire.CLCDecline {
		d, err := smcwire.ParseDecline(m)
		if err != nil {
			return nil, fmt.Errorf("smcr: a malformed CLC Decline: %w", err)
		}
		if d.OutOfSync() && h.g != nil && !h.first {
			h.g.terminate(fmt.Errorf("smcr: the peer declined out of sync (%v)", d.Diagnosis()))
		}
		return nil, &declineErr{diag: d.Diagnosis(), peer: true, err: fmt.Errorf("the peer declined (%v)", d.Diagnosis())}
	}
	return m, nil
}

// ipArea returns the v1 IP area of a device address: the subnet and
// prefix length of the host's interface address that covers it, as
// Linux's smc_clc_prfx_set takes the interface address whose prefix
// matches (inet_ifa_match), not only the one equal to it: 127.0.0.2,
// on no interface itself, is on lo's 127.0.0.0/8. An address no
// interface covers is its own subnet (/32, or /128).
func ipArea(a netip.Addr) *smcwire.IPArea {
	return ipAreaOf(a, interfacePrefixes())
}

// interfacePrefixes lists the host's interface addresses with their
// prefixes.
func interfacePrefixes() []netip.Prefix {
	var ps []netip.Prefix
	if ifs, err := net.InterfaceAddrs(); err == nil {
		for _, ia := range ifs {
			if n, ok := ia.(*net.IPNet); ok {
				ones, _ := n.Mask.Size()
				if p, ok := netip.AddrFromSlice(n.IP); ok {
					ps = append(ps, netip.PrefixFrom(p.Unmap(), ones))
				}
			}
		}
	}
	return ps
}

// ipAreaOf is ipArea among the interface prefixes ps: an exact address
// first, else the longest prefix that contains a.
func ipAreaOf(a netip.Addr, ps []netip.Prefix) *smcwire.IPArea {
	bits, best := a.BitLen(), -1
	for _, p := range ps {
		switch {
		case p.Addr() == a:
			bits, best = p.Bits(), a.BitLen()+1 // an exact match beats any cover
		case p.Bits() > best && p.Contains(a):
			bits, best = p.Bits(), p.Bits()
		}
	}
	pfx, _ := a.Prefix(bits)
	if a.Is4() {
		return &smcwire.IPArea{Subnet: pfx.Addr(), PrefixLen: uint8(bits)}
	}
	return &smcwire.IPArea{Subnet: netip.IPv4Unspecified(),
		IPv6Prefixes: []smcwire.IPv6Prefix{{Addr: pfx.Addr(), Len: uint8(bits)}}}
}

// subnetMatches reports whether a client's v1 IP area puts it on the
// server's subnet (Linux declines with "IP prefix/subnet mismatch"
// otherwise).
func subnetMatches(p smcwire.Proposal, ours netip.Addr) bool {
	if ours.Is4() {
		pfx, err := p.Subnet().Prefix(int(p.PrefixLen()))
		return err == nil && pfx.Contains(ours)
	}
	for i := range p.NumIPv6Prefixes() {
		e := p.IPv6Prefix(i)
		if pfx, err := e.Addr.Prefix(int(e.Len)); err == nil && pfx.Contains(ours) {
			return true
		}
	}
	return false
}
