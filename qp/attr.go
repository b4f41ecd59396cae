package qp

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
)

// Type is the QP transport type, numbered like ibv_qp_type.
type Type uint8

//go:generate stringer -type Type -linecomment

const (
	RC Type = 2 // RC
	UC Type = 3 // UC
	UD Type = 4 // UD
)

// State is a QP state, numbered like ibv_qp_state.
type State uint8

const (
	Reset State = 0
	Init  State = 1
	RTR   State = 2
	RTS   State = 3
	SQD   State = 4
	SQE   State = 5
	Err   State = 6
)

var stateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("STATE(%d)", uint8(s))
}

// AttrMask selects the fields of Attr that Modify applies, numbered like
// ibv_qp_attr_mask.
type AttrMask uint32

const (
	MaskState            AttrMask = 1 << 0
	MaskCurState         AttrMask = 1 << 1
	MaskEnSQDAsyncNotify AttrMask = 1 << 2
	MaskAccessFlags      AttrMask = 1 << 3
	MaskPKeyIndex        AttrMask = 1 << 4
	MaskPort             AttrMask = 1 << 5
	MaskQKey             AttrMask = 1 << 6
	MaskAV               AttrMask = 1 << 7
	MaskPathMTU          AttrMask = 1 << 8
	MaskTimeout          AttrMask = 1 << 9
	MaskRetryCnt         AttrMask = 1 << 10
	MaskRNRRetry         AttrMask = 1 << 11
	MaskRQPSN            AttrMask = 1 << 12
	MaskMaxQPRdAtomic    AttrMask = 1 << 13
	MaskAltPath          AttrMask = 1 << 14
	MaskMinRNRTimer      AttrMask = 1 << 15
	MaskSQPSN            AttrMask = 1 << 16
	MaskMaxDestRdAtomic  AttrMask = 1 << 17
	MaskPathMigState     AttrMask = 1 << 18
	MaskCap              AttrMask = 1 << 19
	MaskDestQPN          AttrMask = 1 << 20
	MaskRateLimit        AttrMask = 1 << 25
)

var maskNames = []struct {
	m    AttrMask
	name string
}{
	{MaskState, "STATE"}, {MaskCurState, "CUR_STATE"}, {MaskEnSQDAsyncNotify, "EN_SQD_ASYNC_NOTIFY"},
	{MaskAccessFlags, "ACCESS_FLAGS"}, {MaskPKeyIndex, "PKEY_INDEX"}, {MaskPort, "PORT"},
	{MaskQKey, "QKEY"}, {MaskAV, "AV"}, {MaskPathMTU, "PATH_MTU"}, {MaskTimeout, "TIMEOUT"},
	{MaskRetryCnt, "RETRY_CNT"}, {MaskRNRRetry, "RNR_RETRY"}, {MaskRQPSN, "RQ_PSN"},
	{MaskMaxQPRdAtomic, "MAX_QP_RD_ATOMIC"}, {MaskAltPath, "ALT_PATH"}, {MaskMinRNRTimer, "MIN_RNR_TIMER"},
	{MaskSQPSN, "SQ_PSN"}, {MaskMaxDestRdAtomic, "MAX_DEST_RD_ATOMIC"}, {MaskPathMigState, "PATH_MIG_STATE"},
	{MaskCap, "CAP"}, {MaskDestQPN, "DEST_QPN"}, {MaskRateLimit, "RATE_LIMIT"},
}

// String lists the mask's bits by their IBV_QP_* names.
func (m AttrMask) String() string {
	var s []string
	for _, n := range maskNames {
		if m&n.m != 0 {
			s = append(s, n.name)
			m &^= n.m
		}
	}
	if m != 0 {
		s = append(s, fmt.Sprintf("%#x", uint32(m)))
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "|")
}

// AH is an address vector (ibv_ah_attr with its GRH), for RoCEv2.
type AH struct {
	DGID      device.GID // the peer's GID: its IP address
	SGIDIndex uint8
	HopLimit  uint8
	TClass    uint8
	FlowLabel uint32
	// DestPort is the peer's UDP port; 0 means 4791. goroce-only: lets
	// tests run several devices on one address.
	DestPort uint16
}

// Addr returns the UDP address of the peer.
func (ah *AH) Addr() netip.AddrPort {
	p := ah.DestPort
	if p == 0 {
		p = rocev2.UDPPort
	}
	return netip.AddrPortFrom(ah.DGID.Addr(), p)
}

// Cap holds a QP's queue sizes (ibv_qp_cap).
type Cap struct {
	MaxSendWR     int
	MaxRecvWR     int
	MaxSendSGE    int
	MaxRecvSGE    int
	MaxInlineData int
}

// Attr holds a QP's attributes (ibv_qp_attr).
type Attr struct {
	State           State
	CurState        State
	PathMTU         rocev2.MTU
	QKey            uint32
	RQPSN           rocev2.PSN
	SQPSN           rocev2.PSN
	DestQPN         uint32
	AccessFlags     device.Access
	Cap             Cap
	AH              AH
	PKeyIndex       uint16
	SQDraining      bool
	MaxRdAtomic     uint8
	MaxDestRdAtomic uint8
	MinRNRTimer     uint8
	Port            uint8
	Timeout         uint8
	RetryCnt        uint8
	RNRRetry        uint8
}

type transition struct{ from, to State }

type maskRule struct{ required, optional AttrMask }

// transitions lists, per QP type, the attribute rules of every legal
// transition (IBTA table 93, as Linux's qp_state_table has them).
var transitions = map[Type]map[transition]maskRule{
	RC: {
		{Reset, Init}: {required: MaskPKeyIndex | MaskPort | MaskAccessFlags},
		{Init, Init}:  {optional: MaskPKeyIndex | MaskPort | MaskAccessFlags},
		{Init, RTR}: {
			required: MaskAV | MaskPathMTU | MaskDestQPN | MaskRQPSN | MaskMaxDestRdAtomic | MaskMinRNRTimer,
			optional: MaskAltPath | MaskAccessFlags | MaskPKeyIndex,
		},
		{RTR, RTS}: {
			required: MaskSQPSN | MaskTimeout | MaskRetryCnt | MaskRNRRetry | MaskMaxQPRdAtomic,
			optional: MaskCurState | MaskAltPath | MaskAccessFlags | MaskMinRNRTimer | MaskPathMigState,
		},
		{RTS, RTS}: {optional: MaskCurState | MaskAccessFlags | MaskAltPath | MaskPathMigState | MaskMinRNRTimer},
		{RTS, SQD}: {optional: MaskEnSQDAsyncNotify},
		{SQD, RTS}: {optional: MaskCurState | MaskAccessFlags | MaskAltPath | MaskPathMigState | MaskMinRNRTimer},
		{SQE, RTS}: {optional: MaskCurState | MaskAccessFlags | MaskMinRNRTimer},
		{SQD, SQD}: {optional: MaskPort | MaskAV | MaskTimeout | MaskRetryCnt | MaskRNRRetry | MaskMaxQPRdAtomic |
			MaskMaxDestRdAtomic | MaskAltPath | MaskAccessFlags | MaskPKeyIndex | MaskMinRNRTimer | MaskPathMigState},
	},
	UC: {
		{Reset, Init}: {required: MaskPKeyIndex | MaskPort | MaskAccessFlags},
		{Init, Init}:  {optional: MaskPKeyIndex | MaskPort | MaskAccessFlags},
		{Init, RTR}: {
			required: MaskAV | MaskPathMTU | MaskDestQPN | MaskRQPSN,
			optional: MaskAltPath | MaskAccessFlags | MaskPKeyIndex,
		},
		{RTR, RTS}: {required: MaskSQPSN, optional: MaskCurState | MaskAltPath | MaskAccessFlags | MaskPathMigState},
		{RTS, RTS}: {optional: MaskCurState | MaskAccessFlags | MaskAltPath | MaskPathMigState},
		{RTS, SQD}: {optional: MaskEnSQDAsyncNotify},
		{SQD, RTS}: {optional: MaskCurState | MaskAltPath | MaskAccessFlags | MaskPathMigState},
		{SQE, RTS}: {optional: MaskCurState | MaskAccessFlags},
		{SQD, SQD}: {optional: MaskAV | MaskAltPath | MaskAccessFlags | MaskPKeyIndex | MaskPathMigState},
	},
	UD: {
		{Reset, Init}: {required: MaskPKeyIndex | MaskPort | MaskQKey},
		{Init, Init}:  {optional: MaskPKeyIndex | MaskPort | MaskQKey},
		{Init, RTR}:   {optional: MaskPKeyIndex | MaskQKey},
		{RTR, RTS}:    {required: MaskSQPSN, optional: MaskCurState | MaskQKey},
		{RTS, RTS}:    {optional: MaskCurState | MaskQKey},
		{RTS, SQD}:    {optional: MaskEnSQDAsyncNotify},
		{SQD, RTS}:    {optional: MaskCurState | MaskQKey},
		{SQE, RTS}:    {optional: MaskCurState | MaskQKey},
		{SQD, SQD}:    {optional: MaskPKeyIndex | MaskQKey},
	},
}

// checkTransition validates a Modify of a QP of type typ from cur with mask
// against the rules.
func checkTransition(typ Type, qpn uint32, cur State, attr *Attr, mask AttrMask) (State, error) {
	to := cur
	if mask&MaskState != 0 {
		to = attr.State
	}
	if mask&MaskCurState != 0 && attr.CurState != cur {
		return cur, fmt.Errorf("qp %#x: modify: CUR_STATE says %v but the QP is in %v", qpn, attr.CurState, cur)
	}
	if to == Reset || to == Err {
		// Any state may go to RESET or ERR, with nothing else.
		if extra := mask &^ (MaskState | MaskCurState); extra != 0 {
			return cur, fmt.Errorf("qp %#x: modify %v→%v: attributes %v are not allowed", qpn, cur, to, extra)
		}
		return to, nil
	}
	rule, ok := transitions[typ][transition{cur, to}]
	if !ok {
		return cur, fmt.Errorf("qp %#x: modify %v→%v: not a legal transition", qpn, cur, to)
	}
	if missing := rule.required &^ mask; missing != 0 {
		return cur, fmt.Errorf("qp %#x: modify %v %v→%v: missing %v", qpn, typ, cur, to, missing)
	}
	if extra := mask &^ (rule.required | rule.optional | MaskState); extra != 0 {
		return cur, fmt.Errorf("qp %#x: modify %v %v→%v: attributes %v are not allowed in this transition", qpn, typ, cur, to, extra)
	}
	if mask&MaskCurState != 0 && cur != RTR && cur != RTS && cur != SQD && cur != SQE {
		return cur, fmt.Errorf("qp %#x: modify %v→%v: CUR_STATE is only allowed from RTR, RTS, SQD or SQE", qpn, cur, to)
	}
	return to, nil
}
