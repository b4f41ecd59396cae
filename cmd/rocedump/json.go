package main

import (
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/goroce/goroce/pcap"
)

// jsonPacket is the -json line of a RoCE packet. Field order is key order;
// headers the opcode does not carry are nil and left out.
type jsonPacket struct {
	Frame        int               `json:"frame"`
	Opcode       uint8             `json:"opcode"`
	OpName       string            `json:"opname"`
	SE           bool              `json:"se"`
	MigReq       bool              `json:"migreq"`
	PadCnt       uint8             `json:"padcnt"`
	TVer         uint8             `json:"tver"`
	PKey         uint16            `json:"pkey"`
	FECN         bool              `json:"fecn"`
	BECN         bool              `json:"becn"`
	DQPN         uint32            `json:"dqpn"`
	AckReq       bool              `json:"ackreq"`
	PSN          uint32            `json:"psn"`
	RETH         *jsonRETH         `json:"reth,omitempty"`
	AETH         *jsonAETH         `json:"aeth,omitempty"`
	AtomicETH    *jsonAtomicETH    `json:"atomiceth,omitempty"`
	AtomicAckETH *jsonAtomicAckETH `json:"atomicacketh,omitempty"`
	ImmDt        *uint32           `json:"immdt,omitempty"`
	IETH         *uint32           `json:"ieth,omitempty"`
	DETH         *jsonDETH         `json:"deth,omitempty"`
	FETH         *jsonFETH         `json:"feth,omitempty"`
	PayloadLen   int               `json:"payload_len"`
	ICRC         uint32            `json:"icrc"`
	ICRCOK       *bool             `json:"icrc_ok,omitempty"` // absent when unverifiable
	// What the sender chose outside the RoCE headers: the UDP source port
	// (rxe and goroce's AF_PACKET backend derive it from the QPs), the
	// IPv4 ID and DF bit, the IPv6 flow label, the TTL (IPv6: hop limit).
	Src       string  `json:"src"`
	Dst       string  `json:"dst"`
	SPort     uint16  `json:"sport"`
	TTL       uint8   `json:"ttl"`
	IPv4ID    *uint16 `json:"ipid,omitempty"`
	DF        *bool   `json:"df,omitempty"`
	FlowLabel *uint32 `json:"flowlabel,omitempty"`
	SMC       any     `json:"smc,omitempty"`
	MAD       any     `json:"mad,omitempty"`
}

type jsonRETH struct {
	VA   uint64 `json:"va"`
	RKey uint32 `json:"rkey"`
	Len  uint32 `json:"len"`
}

type jsonAETH struct {
	Syndrome uint8  `json:"syndrome"`
	MSN      uint32 `json:"msn"`
	Kind     string `json:"kind"` // "ack", "rnr", "nak" (or "reserved")
	Code     uint8  `json:"code"`
}

type jsonAtomicETH struct {
	VA   uint64 `json:"va"`
	RKey uint32 `json:"rkey"`
	Swap uint64 `json:"swap"` // swap data of CmpSwap, add data of FetchAdd
	Cmp  uint64 `json:"cmp"`
}

type jsonAtomicAckETH struct {
	Orig uint64 `json:"orig"`
}

type jsonDETH struct {
	QKey uint32 `json:"qkey"`
	SQPN uint32 `json:"sqpn"`
}

type jsonFETH struct {
	Placement   uint8 `json:"placement"`
	Selectivity uint8 `json:"selectivity"`
}

// jsonSMCOnly is the -json line of a non-RoCE frame (SMC CLC over TCP).
type jsonSMCOnly struct {
	Frame int `json:"frame"`
	SMC   any `json:"smc"`
}

// newJSONPacket fills the JSON line of a RoCE packet from its layers.
func newJSONPacket(frame int, p gopacket.Packet, r *roce) *jsonPacket {
	b := r.bth
	j := &jsonPacket{
		Frame: frame, Opcode: uint8(b.Opcode), OpName: b.Opcode.String(),
		SE: b.SE, MigReq: b.MigReq, PadCnt: b.PadCount, TVer: b.TVer, PKey: b.PKey,
		FECN: b.FECN, BECN: b.BECN, DQPN: b.DestQP, AckReq: b.AckReq, PSN: uint32(b.PSN),
		PayloadLen: len(b.Packet().Payload()), ICRC: b.ICRC,
	}
	if r.verifiable {
		ok := r.icrcOK
		j.ICRCOK = &ok
	}
	for _, l := range r.exts {
		switch h := l.(type) {
		case *pcap.RETH:
			j.RETH = &jsonRETH{VA: h.VA, RKey: h.RKey, Len: h.DMALength}
		case *pcap.AETH:
			j.AETH = &jsonAETH{Syndrome: uint8(h.Syndrome), MSN: h.MSN, Kind: h.Kind().String(), Code: h.Code()}
		case *pcap.AtomicETH:
			j.AtomicETH = &jsonAtomicETH{VA: h.VA, RKey: h.RKey, Swap: h.SwapAdd, Cmp: h.Compare}
		case *pcap.AtomicAckETH:
			j.AtomicAckETH = &jsonAtomicAckETH{Orig: h.Orig}
		case *pcap.ImmDt:
			v := h.Imm
			j.ImmDt = &v
		case *pcap.IETH:
			v := h.RKey
			j.IETH = &v
		case *pcap.DETH:
			j.DETH = &jsonDETH{QKey: h.QKey, SQPN: h.SrcQP}
		case *pcap.FETH:
			j.FETH = &jsonFETH{Placement: h.PlacementType, Selectivity: h.SelectivityLevel}
		}
	}
	j.Src, j.Dst, j.SPort = r.src.String(), r.dst.String(), r.sport
	switch ip := r.ip.(type) {
	case *layers.IPv4:
		id, df := ip.Id, ip.Flags&layers.IPv4DontFragment != 0
		j.IPv4ID, j.DF, j.TTL = &id, &df, ip.TTL
	case *layers.IPv6:
		fl := ip.FlowLabel
		j.FlowLabel, j.TTL = &fl, ip.HopLimit
	}
	j.SMC = smcJSONFunc(p)
	j.MAD = madJSON(p)
	return j
}
