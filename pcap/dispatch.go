package pcap

import (
	"github.com/google/gopacket"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/smcr/smcwire"
)

// Layer type numbers: 1700-1719 RoCEv2, 1720-1739 SMC. gopacket reserves
// 1000-1999 for fast application layer types.

// roceNextLayer chooses the decoder for the payload of a RoCEv2 packet with
// opcode op (ICRC already split off). SEND payloads on RC QPs may be SMC-R
// LLC or CDC messages: a complete message in one RC SEND_ONLY (with or
// without immediate or invalidate) that smcwire.Classify recognises
// decodes as LayerTypeSMCLLC or LayerTypeSMCCDC. The fragments of a SEND
// larger than the path MTU (FIRST/MIDDLE/LAST) cannot be classified on
// their own and stay gopacket.LayerTypePayload.
func roceNextLayer(op rocev2.Opcode, payload []byte) gopacket.LayerType {
	if op.Transport() == rocev2.TransportRC && op.Is(rocev2.OpSend|rocev2.OpFirst|rocev2.OpLast) {
		switch smcwire.Classify(payload) {
		case smcwire.KindCDC:
			return LayerTypeSMCCDC
		case smcwire.KindLLCv1, smcwire.KindLLCv2:
			return LayerTypeSMCLLC
		}
	}
	return gopacket.LayerTypePayload
}
