package device

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// How the resource lines of a snapshot are written and read (publish.go):
// a kind, then rdma's key and value pairs.

// writeResources writes r's objects, one line each.
func writeResources(w io.Writer, r Resources) {
	for _, q := range r.QPs {
		fmt.Fprintf(w, "qp lqpn %d type %s state %s port %d sq-psn %d path-mtu %d pdn %d", q.LQPN, q.Type, q.State, q.Port, q.SQPSN, q.PathMTU, q.PDN)
		if q.Connected {
			fmt.Fprintf(w, " rqpn %d rq-psn %d path-mig-state %s", q.RQPN, q.RQPSN, q.PathMigState)
		}
		fmt.Fprintln(w)
	}
	for _, c := range r.CQs {
		fmt.Fprintf(w, "cq cqn %d cqe %d users %d\n", c.CQN, c.CQE, c.Users)
	}
	for _, m := range r.MRs {
		fmt.Fprintf(w, "mr mrn %d rkey %#x lkey %#x iova %#x mrlen %d pdn %d\n", m.MRN, m.RKey, m.LKey, m.IOVA, m.Len, m.PDN)
	}
	for _, p := range r.PDs {
		fmt.Fprintf(w, "pd pdn %d users %d\n", p.PDN, p.Users)
	}
}

// The most objects of each kind a reader takes: what one device can have.
const (
	maxPublishedQPs = MaxQP
	maxPublishedMRs = MaxMR
	maxPublishedCQs = 2 * MaxQP
	maxPublishedPDs = MaxQP + MaxMR
)

// add reads one resource line: kind, then its pairs.
func (r *Resources) add(kind, line string) error {
	f := strings.Fields(line)
	if len(f)%2 != 0 || len(f) > 2*maxResourcePairs {
		return fmt.Errorf("%s line %q: want up to %d key value pairs", kind, truncated(line), maxResourcePairs)
	}
	pairs := map[string]string{}
	for i := 0; i < len(f); i += 2 {
		pairs[f[i]] = f[i+1]
	}
	var errs []error
	num := func(key string, bits int) uint64 {
		v, ok := pairs[key]
		if !ok {
			errs = append(errs, fmt.Errorf("no %s", key))
			return 0
		}
		n, err := strconv.ParseUint(v, 0, bits)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
		return n
	}
	full := func(n, limit int) error {
		if n >= limit {
			return fmt.Errorf("more than %d %s lines", limit, kind)
		}
		return nil
	}
	var err error
	switch kind {
	case "qp":
		if err = full(len(r.QPs), maxPublishedQPs); err != nil {
			return err
		}
		q := QPResource{
			LQPN: uint32(num("lqpn", 24)), Type: pairs["type"], State: pairs["state"], Port: int(num("port", 8)),
			SQPSN: uint32(num("sq-psn", 24)), PathMTU: int(num("path-mtu", 16)), PDN: uint32(num("pdn", 32)),
		}
		if _, ok := pairs["rqpn"]; ok {
			q.Connected = true
			q.RQPN, q.RQPSN, q.PathMigState = uint32(num("rqpn", 24)), uint32(num("rq-psn", 24)), pairs["path-mig-state"]
		}
		r.QPs = append(r.QPs, q)
	case "cq":
		if err = full(len(r.CQs), maxPublishedCQs); err != nil {
			return err
		}
		r.CQs = append(r.CQs, CQResource{CQN: uint32(num("cqn", 32)), CQE: int(num("cqe", 32)), Users: int(num("users", 32))})
	case "mr":
		if err = full(len(r.MRs), maxPublishedMRs); err != nil {
			return err
		}
		r.MRs = append(r.MRs, MRResource{MRN: uint32(num("mrn", 32)), RKey: uint32(num("rkey", 32)), LKey: uint32(num("lkey", 32)),
			IOVA: num("iova", 64), Len: num("mrlen", 64), PDN: uint32(num("pdn", 32))})
	case "pd":
		if err = full(len(r.PDs), maxPublishedPDs); err != nil {
			return err
		}
		r.PDs = append(r.PDs, PDResource{PDN: uint32(num("pdn", 32)), Users: int(num("users", 32))})
	default:
		return fmt.Errorf("unknown line %q", truncated(kind+" "+line))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s line %q: %v", kind, truncated(line), errs[0])
	}
	return nil
}

// processName is the process's name as the kernel's comm has it (what
// rdma res prints as comm): /proc/self/comm where there is one, else the
// program's base name cut to the kernel's 15 bytes.
func processName() string {
	if b, err := os.ReadFile("/proc/self/comm"); err == nil {
		if s := strings.TrimSpace(string(b)); s != "" {
			return strings.ReplaceAll(s, " ", "_")
		}
	}
	n := filepath.Base(os.Args[0])
	if len(n) > 15 {
		n = n[:15]
	}
	return strings.ReplaceAll(n, " ", "_")
}
