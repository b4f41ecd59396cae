package rocev2

// UDP source ports and IPv6 flow labels, chosen as rxe and ib_core choose
// them. The source port is entropy for ECMP and RSS (receivers accept any),
// but it is covered by the ICRC, so the sender must know it before sealing.
//
// rxe gives a QP the port 0xC000 + hash_32(qpn, 14) when it is created, and
// when modify_qp sets an address vector with a GRH (always, on RoCE), the
// port rdma_get_udp_sport(flow_label, qpn, dest_qpn): the vector's flow
// label, or when it is 0 one derived from the two QP numbers
// (rdma_calc_flow_label), folded into 14 bits above 0xC000. UD QPs get no
// such vector (each work request has its own), so they keep the first.
// The bundled rxe captures show both (conformance/testdata/rxe/CATALOG.md).

// udpSourceBase is the bottom of the source port range rxe uses
// (RXE_ROCE_V2_SPORT, IB_ROCE_UDP_ENCAP_VALID_PORT_MIN).
const udpSourceBase = 0xC000

// CalcFlowLabel returns the flow label ib_core derives for a connection
// between QPs lqpn and rqpn (rdma_calc_flow_label). It is symmetric in the
// two, so both ends of a connection choose the same label and port.
func CalcFlowLabel(lqpn, rqpn uint32) uint32 {
	v := uint64(lqpn) * uint64(rqpn)
	v ^= v >> 20
	v ^= v >> 40
	return uint32(v & 0xFFFFF)
}

// FlowLabelSourcePort folds a 20-bit flow label into a UDP source port
// (rdma_flow_label_to_udp_sport).
func FlowLabelSourcePort(fl uint32) uint16 {
	fl &= 0xFFFFF
	folded := (fl & 0x3FFF) ^ (fl&0xFC000)>>14
	return uint16(udpSourceBase | folded)
}

// QPSourcePort is the port rxe gives QP qpn when it creates it, and which a
// UD QP keeps: 0xC000 + hash_32(qpn, 14).
func QPSourcePort(qpn uint32) uint16 {
	return udpSourceBase + uint16((qpn*0x61C88647)>>(32-14))
}

// SourcePort returns the UDP source port and the IPv6 flow label of pkt
// (BTH first) sent by QP qpn, whose address vector asks for flowLabel (0:
// none), as rxe would send it: a UD packet (or anything not
// sent by a connected QP) from the QP's own port with flow label 0 (rxe
// writes 0), an RC or UC packet from the port of the connection's flow label
// (the address vector's, else CalcFlowLabel of the QP and the BTH's
// destination QP), which the IPv6 header carries too.
func SourcePort(qpn, avFlowLabel uint32, pkt []byte) (port uint16, flowLabel uint32) {
	if len(pkt) < BTHLen {
		return QPSourcePort(qpn), 0
	}
	switch Opcode(pkt[0]).Transport() {
	case TransportRC, TransportUC:
	default:
		return QPSourcePort(qpn), 0
	}
	fl := avFlowLabel & 0xFFFFF
	if fl == 0 {
		fl = CalcFlowLabel(qpn, uint32(pkt[5])<<16|uint32(pkt[6])<<8|uint32(pkt[7]))
	}
	return FlowLabelSourcePort(fl), fl
}
