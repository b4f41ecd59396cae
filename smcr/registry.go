package smcr

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
)

// The process's open SMC sockets, listeners and connections (fallback ones
// too, as Linux's smc_diag lists them), for Publish. A socket enters when it
// is handed out (Listen, the end of a handshake) and leaves when its TCP
// connection closes: an SMC-R connection that the program closed stays
// listed while it waits for its peer's close, as a Linux socket does in
// PEERCLOSEWAIT1. Nothing on the data path touches the registry; a snapshot
// takes each connection's lock once.
var registry = struct {
	sync.Mutex
	conns map[*Conn]struct{}
	lns   map[*Listener]struct{}
}{conns: map[*Conn]struct{}{}, lns: map[*Listener]struct{}{}}

func track(c *Conn) {
	registry.Lock()
	registry.conns[c] = struct{}{}
	registry.Unlock()
}

func untrack(c *Conn) {
	registry.Lock()
	delete(registry.conns, c)
	registry.Unlock()
}

func trackListener(l *Listener) {
	registry.Lock()
	registry.lns[l] = struct{}{}
	registry.Unlock()
}

func untrackListener(l *Listener) {
	registry.Lock()
	delete(registry.lns, l)
	registry.Unlock()
}

// Socket is one SMC socket of a process as Publish shows it to other
// processes: what Linux's smc_diag reports of an AF_SMC socket, in
// goroce's terms.
type Socket struct {
	// State is Linux's name of the SMC socket state (enum smc_state):
	// LISTEN, ACTIVE, PEERCLOSEWAIT1, APPCLOSEWAIT1, PROCESSABORT, ...
	// A fallback connection is ACTIVE until it closes.
	State string `json:"state"`
	// Role is "client" or "server" ("" for a listener).
	Role string `json:"role,omitempty"`
	// Mode is the connection's Mode (a listener's says nothing).
	Mode Mode `json:"mode"`
	// Signalling is how the socket learns that a peer speaks SMC.
	Signalling string `json:"signalling"`
	// Local and Peer are the TCP addresses (Peer is invalid for a
	// listener).
	Local netip.AddrPort `json:"local"`
	Peer  netip.AddrPort `json:"peer,omitzero"`
	// Fallback, FallbackBy and PeerDiagnosis: see ConnInfo.
	Fallback      uint32 `json:"fallback,omitempty"`
	FallbackBy    string `json:"fallback_by,omitempty"`
	PeerDiagnosis uint32 `json:"peer_diagnosis,omitempty"`
	// Device is the goroce device the socket uses (a fallback connection
	// uses none).
	Device netip.AddrPort `json:"device,omitzero"`
	// Shutdown is Linux's sk_shutdown mask: 1 the peer is done writing
	// (reads end), 2 this side is.
	Shutdown uint8 `json:"shutdown,omitempty"`

	// The SMC-R details, as in ConnInfo.
	LinkGroup     uint32     `json:"lgr,omitempty"`
	FirstContact  bool       `json:"first_contact,omitempty"`
	Links         []LinkInfo `json:"links,omitempty"`
	Token         uint32     `json:"token,omitempty"`
	PeerToken     uint32     `json:"peer_token,omitempty"`
	RMBSize       int        `json:"rmb,omitempty"`
	PeerRMBSize   int        `json:"peer_rmb,omitempty"`
	SendBufSize   int        `json:"sndbuf,omitempty"`
	EID           string     `json:"eid,omitempty"`
	PeerHost      string     `json:"peer_host,omitempty"`
	BytesSent     uint64     `json:"tx_bytes,omitempty"`
	BytesReceived uint64     `json:"rx_bytes,omitempty"`
}

// Listening reports whether s is a listener.
func (s *Socket) Listening() bool { return s.State == stateListen }

// Linux's smc_state names (smc.h) that goroce's sockets take.
const (
	stateActive           = "ACTIVE"
	stateClosed           = "CLOSED"
	stateListen           = "LISTEN"
	statePeerCloseWait1   = "PEERCLOSEWAIT1"
	statePeerCloseWait2   = "PEERCLOSEWAIT2"
	stateAppCloseWait1    = "APPCLOSEWAIT1"
	stateAppFinCloseWait  = "APPFINCLOSEWAIT"
	statePeerFinCloseWait = "PEERFINCLOSEWAIT"
	stateProcessAbort     = "PROCESSABORT"
)

// Sockets returns the process's open SMC sockets, listeners first, at most
// limit of them (0: all), and how many more there are.
func Sockets(limit int) (socks []Socket, more int) {
	registry.Lock()
	lns := make([]*Listener, 0, len(registry.lns))
	for l := range registry.lns {
		lns = append(lns, l)
	}
	conns := make([]*Conn, 0, len(registry.conns))
	for c := range registry.conns {
		conns = append(conns, c)
	}
	registry.Unlock()
	total := len(lns) + len(conns)
	if limit <= 0 || limit > total {
		limit = total
	}
	socks = make([]Socket, 0, limit)
	for _, l := range lns {
		if len(socks) == limit {
			break
		}
		socks = append(socks, l.socket())
	}
	for _, c := range conns {
		if len(socks) == limit {
			break
		}
		socks = append(socks, c.socket())
	}
	return socks, total - len(socks)
}

// socket describes a listener.
func (l *Listener) socket() Socket {
	return Socket{State: stateListen, Signalling: l.mode.String(), Local: addrPort(l.tcp.Addr()), Device: l.st.primary().key}
}

// socket describes a connection (its locks, one at a time; none held
// while the registry's is).
func (c *Conn) socket() Socket {
	i := c.Info()
	s := Socket{State: stateActive, Role: i.Role, Mode: i.Mode, Signalling: i.Signalling.String(),
		Local: addrPort(i.LocalAddr), Peer: addrPort(i.RemoteAddr),
		Fallback: uint32(i.Fallback), FallbackBy: i.FallbackBy, PeerDiagnosis: uint32(i.PeerDiagnosis)}
	if c.smc == nil {
		return s
	}
	s.State, s.Shutdown = c.smc.state()
	s.Device = c.st.primary().key
	s.LinkGroup, s.FirstContact, s.Links = i.LinkGroup, i.FirstContact, i.Links
	s.Token, s.PeerToken = i.Token, i.PeerToken
	s.RMBSize, s.PeerRMBSize, s.SendBufSize = i.LocalRMBSize, i.PeerRMBSize, i.SendBufSize
	s.EID, s.PeerHost = i.EID, i.PeerHost
	s.BytesSent, s.BytesReceived = i.BytesSent, i.BytesReceived
	return s
}

// state maps the close flags onto Linux's socket states (smc_close.c) and
// its sk_shutdown mask. The flags do not keep the order of events, so
// "both sides done writing" is named PEERCLOSEWAIT2 whichever was first
// (Linux says APPCLOSEWAIT2 when the peer was).
func (s *smcConn) state() (string, uint8) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var shut uint8
	if s.peerDoneWriting || s.peerClosed || s.peerAborted {
		shut |= 1
	}
	if s.doneWriting || s.closed {
		shut |= 2
	}
	peerEnded := s.peerClosed || s.peerAborted
	switch {
	case s.freed, s.closed && peerEnded:
		return stateClosed, shut
	case s.peerAborted:
		return stateProcessAbort, shut
	case s.err != nil: // the link group ended, or a protocol violation
		return stateClosed, shut
	case s.closed && s.peerDoneWriting:
		return statePeerFinCloseWait, shut
	case s.closed:
		return statePeerCloseWait1, shut
	case s.doneWriting && s.peerClosed:
		return stateAppFinCloseWait, shut
	case s.doneWriting && s.peerDoneWriting:
		return statePeerCloseWait2, shut
	case s.doneWriting:
		return statePeerCloseWait1, shut
	case s.peerDoneWriting || s.peerClosed:
		return stateAppCloseWait1, shut
	}
	return stateActive, shut
}

func addrPort(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

// MarshalText writes a Mode as Publish does: "smcr-v1", "smcr-v2",
// "fallback".
func (m Mode) MarshalText() ([]byte, error) {
	switch m {
	case ModeSMCRv1:
		return []byte("smcr-v1"), nil
	case ModeSMCRv2:
		return []byte("smcr-v2"), nil
	case ModeFallback:
		return []byte("fallback"), nil
	}
	return nil, fmt.Errorf("smcr: unknown mode %d", uint8(m))
}

// UnmarshalText reads what MarshalText writes.
func (m *Mode) UnmarshalText(b []byte) error {
	switch string(b) {
	case "smcr-v1":
		*m = ModeSMCRv1
	case "smcr-v2":
		*m = ModeSMCRv2
	case "fallback", "":
		*m = ModeFallback
	default:
		return fmt.Errorf("smcr: unknown mode %q", b)
	}
	return nil
}
