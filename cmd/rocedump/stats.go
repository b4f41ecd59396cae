package main

import (
	"cmp"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"text/tabwriter"

	"github.com/goroce/goroce/rocev2"
)

// qpKey names a QP the way a capture can: its host and number.
type qpKey struct {
	host netip.Addr
	qpn  uint32
}

// qpStats are the counts of one destination QP.
type qpStats struct {
	packets, bytes, retrans, naks, rnrs int
}

// retxKey identifies a transmission: the same source sending the same
// opcode to the same QP with the same PSN again is a retransmission.
type retxKey struct {
	src netip.Addr
	op  rocev2.Opcode
	qpn uint32
	psn rocev2.PSN
}

// stats accumulates -stats.
type stats struct {
	qps  map[qpKey]*qpStats
	seen map[retxKey]struct{}
}

func newStats() *stats {
	return &stats{qps: map[qpKey]*qpStats{}, seen: map[retxKey]struct{}{}}
}

// add counts a RoCE packet; bytes are its UDP payload, BTH through ICRC.
func (s *stats) add(r *roce) {
	b := r.bth
	k := qpKey{r.dst, b.DestQP}
	q := s.qps[k]
	if q == nil {
		q = &qpStats{}
		s.qps[k] = q
	}
	q.packets++
	q.bytes += len(b.Packet().Bytes())
	rk := retxKey{r.src, b.Opcode, b.DestQP, b.PSN}
	if _, dup := s.seen[rk]; dup {
		q.retrans++
	}
	s.seen[rk] = struct{}{}
	if a := b.Packet().AETH(); a != nil {
		switch a.Syndrome().Kind() {
		case rocev2.KindNAK:
			q.naks++
		case rocev2.KindRNR:
			q.rnrs++
		}
	}
}

// write prints the table, one row per destination QP and a total.
func (s *stats) write(w io.Writer) error {
	keys := make([]qpKey, 0, len(s.qps))
	for k := range s.qps {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b qpKey) int {
		if c := a.host.Compare(b.host); c != 0 {
			return c
		}
		return cmp.Compare(a.qpn, b.qpn)
	})
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "dst host\tdst qp\tpackets\tbytes\tretrans\tnaks\trnr naks\t")
	var t qpStats
	for _, k := range keys {
		q := s.qps[k]
		fmt.Fprintf(tw, "%s\t0x%x\t%d\t%d\t%d\t%d\t%d\t\n", k.host, k.qpn, q.packets, q.bytes, q.retrans, q.naks, q.rnrs)
		t.packets += q.packets
		t.bytes += q.bytes
		t.retrans += q.retrans
		t.naks += q.naks
		t.rnrs += q.rnrs
	}
	fmt.Fprintf(tw, "total\t\t%d\t%d\t%d\t%d\t%d\t\n", t.packets, t.bytes, t.retrans, t.naks, t.rnrs)
	return tw.Flush()
}
