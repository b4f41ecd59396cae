package device

import (
	"errors"
	"sync/atomic"
)

// GSIQPN is the number of the general services QP, which carries
// management datagrams (the CM's MADs) on every port.
const GSIQPN = 1

// gsiHook is the handler of QP 1, if one is registered (SetGSI).
type gsiHook struct{ h atomic.Pointer[gsiSlot] }

type gsiSlot struct{ h QPHandler }

// SetGSI routes the packets addressed to QP 1, the GSI QP, to h, as a
// kernel's MAD layer takes its port's QP 1: the device has no QP of its
// own there, and without a handler such packets count as rcvd_unknown_qp.
// h's HandlePacket runs on the receive path like a QP's (see QPHandler)
// and sends what it answers through the outbox (OutboxFor with
// backend.Sender{QPN: GSIQPN}). One handler per device; remove takes it
// away again (a packet being handled finishes first).
func (d *Device) SetGSI(h QPHandler) (remove func(), err error) {
	s := &gsiSlot{h}
	if !d.gsi.h.CompareAndSwap(nil, s) {
		return nil, errors.New("device: set GSI: QP 1 already has a handler (one connection manager per device)")
	}
	return func() { d.gsi.h.CompareAndSwap(s, nil) }, nil
}

// gsiFor returns the GSI handler if qpn is QP 1 and one is registered.
func (d *Device) gsiFor(qpn uint32) QPHandler {
	if qpn != GSIQPN {
		return nil
	}
	if s := d.gsi.h.Load(); s != nil {
		return s.h
	}
	return nil
}
