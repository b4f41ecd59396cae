package rdmacm

import (
	"errors"
	"fmt"

	"github.com/goroce/goroce/rdmacm/cmwire"
)

// Errors of connection setup and teardown. Each says what happened; match
// them with errors.Is (and a rejection with errors.As).
var (
	// ErrTimeout: the peer's CM did not answer a REQ, REP, DREQ or
	// SIDR_REQ through every retry (rdma_cm's UNREACHABLE, ETIMEDOUT).
	ErrTimeout = errors.New("rdmacm: the peer's CM did not answer (every retry timed out): is the peer up, listening, and reachable on UDP 4791?")
	// ErrUnreachable wraps a failed connection attempt that got no
	// answer, or a SIDR reply that refused the service.
	ErrUnreachable = errors.New("rdmacm: peer unreachable")
	// ErrPeerGone: the peer withdrew its request before it was accepted
	// (a REJ while it waited).
	ErrPeerGone = errors.New("rdmacm: the peer gave up the connection request")
	// ErrRequestGone: the request can no longer be accepted or rejected
	// (already answered, or it timed out).
	ErrRequestGone = errors.New("rdmacm: the connection request was already answered or has expired")
	// ErrListenerClosed is returned by Accept on a closed listener.
	ErrListenerClosed = errors.New("rdmacm: listener closed")
	// ErrDisconnected: the operation needs an established connection.
	ErrDisconnected = errors.New("rdmacm: not connected")
)

// RejectedError is a connection (or SIDR request) the peer refused: its
// REJ's reason and private data (the consumer's, with reason
// RejConsumerDefined).
type RejectedError struct {
	Reason      cmwire.RejReason
	PrivateData []byte
	// SIDRStatus is set for a refused SIDR request (Reason is 0 then).
	SIDRStatus cmwire.SIDRStatus
}

func (e *RejectedError) Error() string {
	if e.Reason == 0 {
		return fmt.Sprintf("rdmacm: the peer refused the service: SIDR status %d (%v)", uint8(e.SIDRStatus), e.SIDRStatus)
	}
	hint := ""
	switch e.Reason {
	case cmwire.RejInvalidServiceID:
		hint = ": nothing listens on that port (is the server started?)"
	case cmwire.RejConsumerDefined:
		hint = ": the peer's application refused it, or its rdma_cm found no listener for the address"
	case cmwire.RejStaleConn:
		hint = ": the peer still has a connection from this QP; retry after its timewait"
	}
	return fmt.Sprintf("rdmacm: connection rejected, reason %d (%v)%s", uint16(e.Reason), e.Reason, hint)
}

// Is makes errors.Is(err, ErrUnreachable) true for a refused SIDR request,
// as rdma_cm reports it (UNREACHABLE).
func (e *RejectedError) Is(target error) bool { return target == ErrUnreachable && e.Reason == 0 }
