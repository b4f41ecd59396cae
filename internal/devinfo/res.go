package devinfo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/goroce/goroce/rocev2/device"
)

// The resource and statistic views of running devices (roce-devinfo res
// show and statistic): iproute2 rdma's lines and -j JSON, field for
// field, for the goroce devices other processes publish. rdma numbers a
// kernel device with its ifindex; a goroce device is numbered by its
// place in the listing, from 1. Where a kernel device's objects carry the
// pid and comm of the process that made them, a goroce device's carry
// its process's: each device lives in one.

// Views lists the kinds WriteRes shows: rdma res show's objects.
var Views = []string{"qp", "cq", "mr", "pd"}

// field is one key and value of a line; hex values are rdma's keys
// (0x…, a string in JSON).
type field struct {
	key string
	val any // string, int, uint64 or hex
}

type hex uint64

// line is one object: its device, the port if it has one (-1: none; 0: a
// QP bound to no port, which rdma shows as DEV/-) and its fields.
type line struct {
	index  int
	name   string
	port   int
	fields []field
}

// WriteRes prints the objects of kind ("qp", "cq", "mr" or "pd") of every
// device in devs, in rdma res show's layout, or as its -j JSON array.
func WriteRes(w io.Writer, kind string, devs []*device.Published, asJSON bool) error {
	var ls []line
	for i, d := range devs {
		own := []field{{"pid", d.PID}, {"comm", d.Comm}}
		r := &d.Resources
		switch kind {
		case "qp":
			for _, q := range r.QPs {
				fs := []field{{"lqpn", uint64(q.LQPN)}}
				if q.Connected {
					fs = append(fs, field{"rqpn", uint64(q.RQPN)})
				}
				fs = append(fs, field{"type", q.Type}, field{"state", q.State})
				if q.Connected {
					fs = append(fs, field{"rq-psn", uint64(q.RQPSN)})
				}
				fs = append(fs, field{"sq-psn", uint64(q.SQPSN)})
				if q.Connected {
					fs = append(fs, field{"path-mig-state", q.PathMigState})
				}
				fs = append(fs, field{"path-mtu", q.PathMTU}, field{"pdn", uint64(q.PDN)})
				ls = append(ls, line{i + 1, d.Name, q.Port, append(fs, own...)})
			}
		case "cq":
			for _, c := range r.CQs {
				ls = append(ls, line{i + 1, d.Name, -1, append([]field{{"cqn", uint64(c.CQN)}, {"cqe", c.CQE}, {"users", c.Users}}, own...)})
			}
		case "mr":
			for _, m := range r.MRs {
				ls = append(ls, line{i + 1, d.Name, -1, append([]field{{"mrn", uint64(m.MRN)}, {"rkey", hex(m.RKey)}, {"lkey", hex(m.LKey)},
					{"iova", hex(m.IOVA)}, {"mrlen", m.Len}, {"pdn", uint64(m.PDN)}}, own...)})
			}
		case "pd":
			for _, p := range r.PDs {
				ls = append(ls, line{i + 1, d.Name, -1, append([]field{{"pdn", uint64(p.PDN)}, {"users", p.Users}}, own...)})
			}
		default:
			return fmt.Errorf("unknown resource %q (want qp, cq, mr or pd)", kind)
		}
	}
	return writeLines(w, ls, asJSON)
}

// WriteStatistic prints every device's counters as rdma statistic show
// does: one line per device ("link DEV/1 name value ..."), pretty (one
// counter per indented line, rdma -p) or as its -j JSON array. The
// device's address and process follow its link, so that the devices of
// several processes (all goroce0) can be told apart.
func WriteStatistic(w io.Writer, devs []*device.Published, asJSON, pretty bool) error {
	var ls []line
	for i, d := range devs {
		fs := []field{{"addr", d.Addr.String()}, {"pid", d.PID}, {"comm", d.Comm}}
		for _, c := range d.Counters {
			fs = append(fs, field{c.Name, c.Value})
		}
		ls = append(ls, line{i + 1, d.Name, 1, fs})
	}
	if pretty && !asJSON {
		p := &printer{w: w}
		for _, l := range ls {
			p.f("link %s/%d", l.name, l.port)
			for _, f := range l.fields {
				p.f("\n    %s %s", f.key, text(f.val))
			}
			p.f("\n")
		}
		return p.err
	}
	return writeLines(w, ls, asJSON)
}

// writeLines prints lines as rdma does: "link NAME/PORT " (or "dev NAME ")
// and "key value " pairs, one object a line; or one JSON array of
// objects whose keys are in the same order (ifindex, ifname, port first).
func writeLines(w io.Writer, ls []line, asJSON bool) error {
	p := &printer{w: w}
	if !asJSON {
		for _, l := range ls {
			switch {
			case l.port < 0:
				p.f("dev %s ", l.name)
			case l.port == 0:
				p.f("link %s/- ", l.name)
			default:
				p.f("link %s/%d ", l.name, l.port)
			}
			for _, f := range l.fields {
				p.f("%s %s ", f.key, text(f.val))
			}
			p.f("\n")
		}
		return p.err
	}
	var b bytes.Buffer
	b.WriteByte('[')
	for i, l := range ls {
		if i > 0 {
			b.WriteByte(',')
		}
		head := []field{{"ifindex", l.index}, {"ifname", l.name}}
		if l.port > 0 {
			head = append(head, field{"port", l.port})
		}
		b.WriteByte('{')
		for j, f := range append(head, l.fields...) {
			if j > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(f.key)
			b.Write(k)
			b.WriteByte(':')
			b.Write(jsonValue(f.val))
		}
		b.WriteByte('}')
	}
	b.WriteString("]\n")
	p.f("%s", b.Bytes())
	return p.err
}

func text(v any) string {
	switch v := v.(type) {
	case hex:
		return "0x" + strconv.FormatUint(uint64(v), 16)
	case string:
		return v
	}
	return fmt.Sprint(v)
}

func jsonValue(v any) []byte {
	if h, ok := v.(hex); ok {
		v = text(h)
	}
	b, _ := json.Marshal(v) // strings and numbers always marshal
	return b
}

// WriteResSummary prints each device's count of objects as rdma res show
// does ("1: rxe0: pd 1 cq 2 qp 2 ..."), with its process, or as JSON.
func WriteResSummary(w io.Writer, devs []*device.Published, asJSON bool) error {
	p := &printer{w: w}
	if asJSON {
		var b bytes.Buffer
		b.WriteByte('[')
		for i, d := range devs {
			if i > 0 {
				b.WriteByte(',')
			}
			r := &d.Resources
			name, _ := json.Marshal(d.Name)
			comm, _ := json.Marshal(d.Comm)
			fmt.Fprintf(&b, `{"ifindex":%d,"ifname":%s,"pd":%d,"cq":%d,"qp":%d,"mr":%d,"pid":%d,"comm":%s}`,
				i+1, name, len(r.PDs), len(r.CQs), len(r.QPs), len(r.MRs), d.PID, comm)
		}
		b.WriteString("]\n")
		p.f("%s", b.Bytes())
		return p.err
	}
	for i, d := range devs {
		r := &d.Resources
		p.f("%d: %s: pd %d cq %d qp %d mr %d pid %d comm %s addr %v\n", i+1, d.Name, len(r.PDs), len(r.CQs), len(r.QPs), len(r.MRs), d.PID, d.Comm, d.Addr)
	}
	return p.err
}
