package qp

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/rocev2/device"
)

// AddressHandle is an address handle (ibv_ah): where UD sends go, checked
// once when it is made. A UD SendWR names one, with the remote QP number
// and Q_Key.
type AddressHandle struct {
	pd   *device.PD
	attr AH
	addr netip.AddrPort
}

// CreateAH makes an address handle in pd (ibv_create_ah). RoCE needs a GRH:
// attr.DGID must be set, of the device's address family.
func CreateAH(pd *device.PD, attr AH) (*AddressHandle, error) {
	if err := validateAH(pd.Device(), &attr); err != nil {
		return nil, fmt.Errorf("qp: create AH: %w", err)
	}
	return &AddressHandle{pd: pd, attr: attr, addr: attr.Addr()}, nil
}

// Attr returns the attributes the handle was made with.
func (h *AddressHandle) Attr() AH { return h.attr }

// validateAH checks an address vector against dev.
func validateAH(dev *device.Device, ah *AH) error {
	if ah.DGID.IsZero() {
		return errors.New("AV without a GRH: RoCE needs a destination GID (the pingpong programs: pass -g 1)")
	}
	if _, err := dev.GID(int(ah.SGIDIndex)); err != nil {
		return err
	}
	if ah.DGID.Addr().Is4() != dev.LocalAddr().Addr().Is4() {
		return fmt.Errorf("destination GID %v is not of the device's address family (%v)", ah.DGID, dev.LocalAddr().Addr())
	}
	return nil
}
