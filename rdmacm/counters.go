package rdmacm

import (
	"sync/atomic"

	"github.com/goroce/goroce/rdmacm/cmwire"
)

// numAttrs is how many CM attributes Linux counts (REQ through APR).
const numAttrs = int(cmwire.AttrAPR-cmwire.AttrREQ) + 1

// Counters are a CM's counters: per CM attribute the four groups Linux's
// ib_cm keeps in sysfs (cm_tx_msgs, cm_tx_retries, cm_rx_msgs,
// cm_rx_duplicates, indexed by attribute − 0x10), then what the GSI and the
// CM dropped, each under its reason. Every field is updated atomically.
type Counters struct {
	TxMsgs       [numAttrs]atomic.Uint64 // every send of a message, retries included
	TxRetries    [numAttrs]atomic.Uint64 // resends of a message that got no answer in time
	RxMsgs       [numAttrs]atomic.Uint64 // CM messages received (after the MAD checks)
	RxDuplicates [numAttrs]atomic.Uint64 // of which duplicates (answered again or ignored)

	// The GSI's drops (what reaches QP 1 but is not one MAD of the CM).
	RcvdWrongOpcode atomic.Uint64 // not a UD SEND_ONLY
	RcvdShort       atomic.Uint64 // payload shorter than a MAD
	RcvdLong        atomic.Uint64 // payload longer than a MAD (no receive buffer holds it)
	RcvdQueueFull   atomic.Uint64 // the CM had not taken the last 512 MADs yet (a flood)
	DropBaseVersion atomic.Uint64 // cmwire.DropBaseVersion
	DropSMI         atomic.Uint64 // cmwire.DropSMI
	DropCMMethod    atomic.Uint64 // cmwire.DropCMMethod
	DropNoAgent     atomic.Uint64 // cmwire.DropNoAgent
	DropAttr        atomic.Uint64 // cmwire.DropAttr
	Answered        atomic.Uint64 // Gets and Sets answered "unsupported method/attribute"

	// The CM's drops and refusals.
	NoID            atomic.Uint64 // a message for no connection of ours (REP for no REQ, stale CM ID, ...)
	WrongState      atomic.Uint64 // a message the connection's state does not take
	WrongQPN        atomic.Uint64 // a DREQ naming another QP than the connection's
	NoRoCEPaths     atomic.Uint64 // LAP and APR, which Linux ignores on RoCE
	ListenOverflow  atomic.Uint64 // a REQ or SIDR_REQ dropped: its listener's backlog was full
	TooManyIDs      atomic.Uint64 // a REQ or SIDR_REQ dropped: the CM holds Config.MaxIDs connections
	RejectsSent     atomic.Uint64 // REJs sent (every reason)
	StaleConns      atomic.Uint64 // REQs or REPs refused as stale connections
	BadRDMACMHeader atomic.Uint64 // REQs or SIDR_REQs with an rdma_cm header Linux refuses
}

func attrIndex(a cmwire.AttrID) int { return int(a - cmwire.AttrREQ) }

// Counter is one named counter value.
type Counter struct {
	Name  string
	Value uint64
}

var attrCounterNames = [numAttrs]string{"req", "mra", "rej", "rep", "rtu", "dreq", "drep", "sidr_req", "sidr_rep", "lap", "apr"}

// Snapshot returns every counter with its name: Linux's sysfs names for
// the per-attribute groups ("cm_rx_msgs/req"), then the drops.
func (c *Counters) Snapshot() []Counter {
	var out []Counter
	for _, g := range []struct {
		name string
		v    *[numAttrs]atomic.Uint64
	}{{"cm_tx_msgs", &c.TxMsgs}, {"cm_tx_retries", &c.TxRetries}, {"cm_rx_msgs", &c.RxMsgs}, {"cm_rx_duplicates", &c.RxDuplicates}} {
		for i := range g.v {
			out = append(out, Counter{g.name + "/" + attrCounterNames[i], g.v[i].Load()})
		}
	}
	for _, d := range []struct {
		name string
		v    *atomic.Uint64
	}{
		{"rcvd_wrong_opcode", &c.RcvdWrongOpcode}, {"rcvd_short", &c.RcvdShort}, {"rcvd_long", &c.RcvdLong},
		{"rcvd_queue_full", &c.RcvdQueueFull}, {"drop_base_version", &c.DropBaseVersion}, {"drop_smi", &c.DropSMI},
		{"drop_cm_method", &c.DropCMMethod}, {"drop_no_agent", &c.DropNoAgent}, {"drop_attr", &c.DropAttr},
		{"answered_unsupported", &c.Answered}, {"no_id", &c.NoID}, {"wrong_state", &c.WrongState},
		{"wrong_qpn", &c.WrongQPN}, {"no_roce_paths", &c.NoRoCEPaths}, {"listen_overflow", &c.ListenOverflow},
		{"too_many_ids", &c.TooManyIDs}, {"rejects_sent", &c.RejectsSent}, {"stale_conns", &c.StaleConns},
		{"bad_rdma_cm_header", &c.BadRDMACMHeader},
	} {
		out = append(out, Counter{d.name, d.v.Load()})
	}
	return out
}
