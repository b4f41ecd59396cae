package pcap

import (
	"github.com/google/gopacket"

	"github.com/goroce/goroce/rdmacm/cmwire"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/smcr/smcwire"
)

// Layer type numbers: 1700-1719 RoCEv2, 1720-1739 SMC, 1740-1749 MADs and
// the CM. gopacket reserves
// 1000-1999 for fast application layer types.

// roceNextLayer chooses the decoder for the payload of a RoCEv2 packet with
// opcode op (ICRC already split off). SEND payloads on RC QPs may be SMC-R
// LLC or CDC messages: a complete message in one RC SEND_ONLY (with or
// without immediate or invalidate) that smcwire.Classify recognises
// decodes as LayerTypeSMCLLC or LayerTypeSMCCDC. The fragments of a SEND
// larger than the path MTU (FIRST/MIDDLE/LAST) cannot be classified on
// their own and stay gopacket.LayerTypePayload. A UD SEND_ONLY to QP 1
// carries a MAD (LayerTypeMAD) when it is one MAD long.
func roceNextLayer(op rocev2.Opcode, dqpn uint32, payload []byte) gopacket.LayerType {
	if op == rocev2.UDSendOnly && dqpn == cmwire.GSIQPN {
		if _, err := cmwire.ParseMAD(payload); err == nil {
			return LayerTypeMAD
		}
	}
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
