package main

import (
	"github.com/google/gopacket"

	"github.com/goroce/goroce/pcap"
	"github.com/goroce/goroce/rdmacm/cmwire"
)

// jsonMAD is the "mad" object of a RoCE packet that carries a MAD (a UD
// SEND to QP 1): the common header's fields, then "type" ("CM REQ", or
// the class and method of another MAD), the CM message's fields under
// "cm" with cmwire's JSON names (byte fields in hex), and the rdma_cm
// header of a REQ's or SIDR_REQ's private data under "rdma_cm".
type jsonMAD struct {
	cmwire.Header
	Type   string            `json:"type"`
	CM     any               `json:"cm,omitempty"`
	RDMACM *cmwire.CMAHeader `json:"rdma_cm,omitempty"`
}

// madJSON returns the MAD of a frame as a JSON-encodable value, or nil.
func madJSON(p gopacket.Packet) any {
	mad, cm, hdr := pcap.CMLayers(p)
	if mad == nil {
		return nil
	}
	j := &jsonMAD{Header: mad.Header, Type: "MAD " + mad.Class.String() + " " + mad.Method.String()}
	if cm != nil {
		j.CM = cm.Msg
		if cm.AttrID.IsCM() {
			j.Type = "CM " + cm.AttrID.String()
		}
	}
	if hdr != nil {
		h := hdr.CMAHeader
		j.RDMACM = &h
	}
	return j
}
