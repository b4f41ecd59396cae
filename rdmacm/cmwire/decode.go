package cmwire

// Decode decodes the CM message or ClassPortInfo of m by its attribute:
// a REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDRReq, SIDRRep, LAP, APR or
// ClassPortInfo value, or nil for another attribute or class.
func Decode(m MAD) any {
	h := m.Header()
	if h.Class != ClassCM {
		return nil
	}
	switch h.AttrID {
	case AttrClassPortInfo:
		return DecodeClassPortInfo(m)
	case AttrREQ:
		return DecodeREQ(m)
	case AttrMRA:
		return DecodeMRA(m)
	case AttrREJ:
		return DecodeREJ(m)
	case AttrREP:
		return DecodeREP(m)
	case AttrRTU:
		return DecodeRTU(m)
	case AttrDREQ:
		return DecodeDREQ(m)
	case AttrDREP:
		return DecodeDREP(m)
	case AttrSIDRReq:
		return DecodeSIDRReq(m)
	case AttrSIDRRep:
		return DecodeSIDRRep(m)
	case AttrLAP:
		return DecodeLAP(m)
	case AttrAPR:
		return DecodeAPR(m)
	}
	return nil
}
