package cmwire

// Verdict is what a Linux port does with a MAD that arrives on QP 1, given
// that ib_cm is its only agent there (rdma_rxe has no process_mad hook, so
// no other class is answered): drivers/infiniband/core/mad.c's
// validate_mad, find_mad_agent and generate_unmatched_resp, and the
// attribute switch of ib_cm's cm_recv_handler.
type Verdict uint8

const (
	// Deliver: a CM Send the CM handles (by its attribute).
	Deliver Verdict = iota + 1
	// Respond: a Get or Set no agent takes is answered with the MAD
	// itself as a GetResp of status StatusUnsupportedMethodAttr. A Get of
	// the CM class's ClassPortInfo is one: ib_cm registers only Send.
	Respond
	// DropBaseVersion: a base version other than 1 (validate_mad).
	DropBaseVersion
	// DropSMI: subnet management belongs to QP 0 (validate_mad).
	DropSMI
	// DropCMMethod: a CM attribute other than ClassPortInfo with a method
	// other than Send (validate_mad).
	DropCMMethod
	// DropNoAgent: no agent for the class, version and method, and not a
	// Get or Set to answer; responses among them (no request of ours
	// waits for one).
	DropNoAgent
	// DropAttr: a CM Send of an attribute ib_cm does not know.
	DropAttr
)

var verdictNames = [...]string{
	Deliver: "deliver", Respond: "respond", DropBaseVersion: "bad base version", DropSMI: "SMI on QP1",
	DropCMMethod: "CM method not Send", DropNoAgent: "no agent", DropAttr: "unknown CM attribute",
}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) && verdictNames[v] != "" {
		return verdictNames[v]
	}
	return "verdict?"
}

// Check returns what Linux does with a MAD of header h received on QP 1.
func Check(h *Header) Verdict {
	if h.BaseVersion != BaseVersion {
		return DropBaseVersion
	}
	if h.Class == ClassSubnLID || h.Class == ClassSubnDirect {
		return DropSMI
	}
	if h.Class == ClassCM && h.AttrID != AttrClassPortInfo && h.Method != MethodSend {
		return DropCMMethod
	}
	if h.Class == ClassCM && h.ClassVersion == CMClassVersion && h.Method == MethodSend {
		if !h.AttrID.IsCM() {
			return DropAttr
		}
		return Deliver
	}
	if h.Method == MethodGet || h.Method == MethodSet {
		return Respond
	}
	return DropNoAgent
}

// Unmatched turns a copy of the received MAD into Linux's answer to a Get
// or Set no agent takes: the same MAD as a GetResp with status
// StatusUnsupportedMethodAttr.
func Unmatched(m MAD) {
	m[3] = byte(MethodGetResp)
	m[4], m[5] = byte(StatusUnsupportedMethodAttr>>8), byte(StatusUnsupportedMethodAttr)
}
