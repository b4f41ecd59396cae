package main

import (
	"strings"

	"github.com/google/gopacket"

	"github.com/goroce/goroce/pcap"
	"github.com/goroce/goroce/smcr/smcwire"
)

// smcJSON returns the SMC messages of a frame as a JSON-encodable value, or
// nil when it carries none: LLC and CDC messages in a RoCE payload, CLC
// messages in a TCP segment. One message is an object, several (CLC
// messages sharing a segment) an array. Every object has "type" ("CLC
// Proposal", "LLC CONFIRM_LINK_v2", "LLC ADD_LINK_v2 RESP", "CDC") and
// the message's fields with their smcwire JSON names; it is printed under
// the key "smc".
func smcJSON(p gopacket.Packet) any {
	ls := pcap.SMCLayers(p)
	if len(ls) == 0 {
		return nil
	}
	out := make([]any, 0, len(ls))
	for _, l := range ls {
		out = append(out, smcLayerJSON(l))
	}
	if len(out) == 1 {
		return out[0]
	}
	return out
}

// smcSummary returns a short description of the SMC messages of a frame
// for the text output, or "" when it carries none.
func smcSummary(p gopacket.Packet) string {
	var parts []string
	for _, l := range pcap.SMCLayers(p) {
		parts = append(parts, pcap.SMCSummary(l))
	}
	return strings.Join(parts, "; ")
}

// The JSON shapes: "type" and "length" first, then the smcwire fields
// inline. One wrapper per message kind, since the field sets share names
// (encoding/json drops ambiguous embedded fields).
type (
	jsonCLCProposal struct {
		Type   string `json:"type"`
		Length int    `json:"length"`
		*smcwire.ProposalFields
	}
	jsonCLCAcceptConfirm struct {
		Type   string `json:"type"`
		Length int    `json:"length"`
		*smcwire.AcceptConfirmFields
		RMBESize int `json:"rmbe_size"`
		MTU      int `json:"mtu"`
	}
	jsonCLCDecline struct {
		Type   string `json:"type"`
		Length int    `json:"length"`
		*smcwire.DeclineFields
		DiagName string `json:"diagnosis_name,omitempty"`
	}
	jsonCLCHeader struct { // a CLC message smcwire does not decode (SMC-D Accept/Confirm)
		Type   string `json:"type"`
		Length int    `json:"length"`
		smcwire.CLCHeader
	}
	jsonLLC struct {
		Type     string `json:"type"`
		Length   int    `json:"length"`
		Version  uint8  `json:"llc_version"`
		Response bool   `json:"response"`
		smcwire.LLCFields
	}
	jsonCDC struct {
		Type string `json:"type"`
		smcwire.CDCFields
		FlagNames []string `json:"flag_names,omitempty"`
	}
)

func smcLayerJSON(l gopacket.Layer) any {
	switch m := l.(type) {
	case *pcap.SMCCLC:
		typ := "CLC " + m.Type.String()
		switch {
		case m.Proposal != nil:
			return jsonCLCProposal{typ, m.Length, m.Proposal}
		case m.AcceptConfirm != nil:
			a := m.AcceptConfirm
			return jsonCLCAcceptConfirm{typ, m.Length, a, int(smcwire.RMBESize(a.RMBESizeCode)), a.QPMTU.Bytes()}
		case m.Decline != nil:
			return jsonCLCDecline{typ, m.Length, m.Decline, m.Decline.Diagnosis.Name()}
		}
		return jsonCLCHeader{typ, m.Length, m.Header}
	case *pcap.SMCLLC:
		return jsonLLC{"LLC " + m.Name(), m.Length, m.Type.Version(), m.Msg.IsResponse(), m.LLCFields}
	case *pcap.SMCCDC:
		return jsonCDC{"CDC", m.CDCFields, pcap.CDCFlagNames(m.ProdFlags, m.ConnFlags)}
	}
	return nil
}
