package smcr

import (
	"net"
	"net/netip"

	"github.com/goroce/goroce/smcr/smcwire"
)

// Mode is what a connection ended up speaking.
type Mode uint8

const (
	// ModeFallback: plain TCP on the same connection (see Info.Fallback).
	ModeFallback Mode = iota
	// ModeSMCRv1 and ModeSMCRv2: SMC-R, CLC version 1 or 2.
	ModeSMCRv1
	ModeSMCRv2
)

func (m Mode) String() string {
	switch m {
	case ModeSMCRv1:
		return "SMC-R v1"
	case ModeSMCRv2:
		return "SMC-R v2"
	}
	return "TCP fallback"
}

// ConnInfo describes a connection (smcr.Info): what it speaks, why, and
// over what.
type ConnInfo struct {
	Mode Mode
	// Signalling is how SMC capability was established (or not).
	Signalling Signalling
	// Fallback is the reason a fallback connection did not use SMC, as
	// Linux's SMC_CLC_DECL_* code (Fallback.String() gives its text), and
	// FallbackBy who decided: "local", "peer" (it declined, with
	// PeerDiagnosis), or "" for an SMC connection.
	Fallback      smcwire.DiagCode
	FallbackBy    string
	PeerDiagnosis smcwire.DiagCode
	// Role is "client" or "server".
	Role string
	// LocalAddr and RemoteAddr are the TCP connection's addresses.
	LocalAddr, RemoteAddr net.Addr

	// The SMC-R details (zero in a fallback connection).
	LinkGroup    uint32 // link group id (local)
	FirstContact bool   // this connection created its link group
	// LinkGroupType is the group's redundancy, as Linux's smc_lgr_type:
	// SINGLE, SYMMETRIC (two links on distinct devices of both sides),
	// ASYMMETRIC_LOCAL (two on one device of this side), ASYMMETRIC_PEER
	// (of the peer), NONE.
	LinkGroupType string
	// Links are every link of the group, the connection's own first.
	Links        []LinkInfo
	Token        uint32 // the local alert token (RMBE id)
	PeerToken    uint32
	LocalRMBSize int // the buffer the peer writes into
	PeerRMBSize  int // the peer's buffer this side writes into
	SendBufSize  int
	EID          string // the negotiated EID (v2)
	PeerHost     string // the peer's hostname (v2 first contact)

	// Byte counters of the connection's lifetime.
	BytesSent, BytesReceived uint64
}

// LinkInfo is one link of a connection's link group, as Linux's `smcr
// linkgroup show links` lists it.
type LinkInfo struct {
	ID       uint8
	LocalGID netip.Addr
	PeerGID  netip.Addr
	LocalQPN uint32
	PeerQPN  uint32
	MTU      int
	// State is Linux's name of the link's state: ACTIVATING (being set
	// up), ACTIVE, INACTIVE (down: its connections are moving away).
	State string
	// Device is the goroce device the link is on.
	Device netip.AddrPort
	// InUse marks the link the connection sends on.
	InUse bool
	// Asymmetric marks the asymmetric link of an asymmetric group (on
	// the device the other link uses too): it takes connections only
	// when the other fails.
	Asymmetric bool
	// UserID and PeerUserID are the link user ids of CONFIRM_LINK.
	UserID, PeerUserID uint32
	// Conns is how many of the group's connections send on the link;
	// TxMsgs and RxMsgs count the CDC and LLC messages it sent and
	// received.
	Conns          int
	TxMsgs, RxMsgs uint64
	// Path is how the device reaches the peer's: "udp" (datagrams on a
	// socket), "shm" (the shared-memory link), or the backend's own word
	// where it says (rocev2/backend/shm's LinkTo); "" when it does not.
	Path string
}

// LinkEvent is a link coming or going (Config.OnLink).
type LinkEvent struct {
	LinkGroup     uint32
	Role          string // the group's: "client" or "server"
	LinkGroupType string // after the event (see ConnInfo)
	Up            bool   // the link became active; else it went
	Link          LinkInfo
	Err           error // why it went
}

// Info returns what is known of c, a connection from this package
// (Listener.Accept or Dialer.DialContext); for any other net.Conn it
// returns ok false.
func Info(c net.Conn) (info ConnInfo, ok bool) {
	sc, ok := c.(*Conn)
	if !ok {
		return ConnInfo{}, false
	}
	return sc.Info(), true
}
