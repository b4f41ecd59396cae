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

// LinkInfo is one link of a connection's link group.
type LinkInfo struct {
	ID       uint8
	LocalGID netip.Addr
	PeerGID  netip.Addr
	LocalQPN uint32
	PeerQPN  uint32
	MTU      int
	// Path is how the device reaches the peer's: "udp" (datagrams on a
	// socket), "shm" (the shared-memory link), or the backend's own word
	// where it says (rocev2/backend/shm's LinkTo); "" when it does not.
	Path string
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
