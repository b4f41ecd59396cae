//go:build linux

package main

// Generic netlink: a family's ID by name (the controller's GETFAMILY), and
// what the family says about itself, so that its command numbers can be
// checked at run time in the guest (smcguest genl FAMILY).

import (
	"errors"
	"fmt"
	"io"
	"time"

	"golang.org/x/sys/unix"
)

// Generic netlink controller (linux/genetlink.h).
const (
	genlIDCtrl          = 0x10
	ctrlCmdGetFamily    = 3
	ctrlAttrFamilyID    = 1
	ctrlAttrFamilyName  = 2
	ctrlAttrVersion     = 3
	ctrlAttrHdrSize     = 4
	ctrlAttrMaxAttr     = 5
	ctrlAttrOps         = 6
	ctrlAttrOpID        = 1
	ctrlAttrOpFlags     = 2
	genlAdminPerm       = 0x01
	genlCmdCapDo        = 0x02
	genlCmdCapDump      = 0x04
	genlCmdCapHasPolicy = 0x08
)

// genlFamily is what the controller says about a family.
type genlFamily struct {
	name    string
	id      uint16
	version uint32
	hdrSize uint32
	maxAttr uint32
	ops     []genlOp
}

type genlOp struct {
	id, flags uint32
}

// genlConn is a generic netlink socket bound to one family.
type genlConn struct {
	*nlConn
	fam genlFamily
}

// dialGenl opens a generic netlink socket for the family name. A family
// the kernel does not have means its module is not loaded: the error says
// which one to load.
func dialGenl(name, module string, timeout time.Duration) (*genlConn, error) {
	c, err := dialNetlink(unix.NETLINK_GENERIC, timeout)
	if err != nil {
		return nil, err
	}
	fam, err := getFamily(c, name)
	if err != nil {
		c.Close()
		if errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("the kernel has no generic netlink family %s: load the %s module (modprobe %s)", name, module, module)
		}
		return nil, fmt.Errorf("generic netlink family %s: %w", name, err)
	}
	return &genlConn{nlConn: c, fam: fam}, nil
}

func getFamily(c *nlConn, name string) (genlFamily, error) {
	msgs, err := c.query(genlIDCtrl, genlPayload(ctrlCmdGetFamily, 1, appendAttrString(nil, ctrlAttrFamilyName, name)))
	if err != nil {
		return genlFamily{}, err
	}
	for _, m := range msgs {
		if m.typ != genlIDCtrl {
			continue
		}
		g, err := parseGenl(m.data)
		if err != nil {
			return genlFamily{}, fmt.Errorf("controller reply: %w", err)
		}
		return parseFamily(g)
	}
	return genlFamily{}, fmt.Errorf("the controller sent no description of %s", name)
}

// parseFamily reads a controller reply.
func parseFamily(g genlMsg) (genlFamily, error) {
	var f genlFamily
	idSeen := false
	for _, a := range g.attrs {
		switch a.typ {
		case ctrlAttrFamilyID:
			if v, ok := a.uint(); ok {
				f.id, idSeen = uint16(v), true
			}
		case ctrlAttrFamilyName:
			f.name = a.str()
		case ctrlAttrVersion:
			v, _ := a.uint()
			f.version = uint32(v)
		case ctrlAttrHdrSize:
			v, _ := a.uint()
			f.hdrSize = uint32(v)
		case ctrlAttrMaxAttr:
			v, _ := a.uint()
			f.maxAttr = uint32(v)
		case ctrlAttrOps:
			ops, err := a.children()
			if err != nil {
				return f, fmt.Errorf("family ops: %w", err)
			}
			for _, op := range ops {
				fields, err := op.children()
				if err != nil {
					return f, fmt.Errorf("family op: %w", err)
				}
				var o genlOp
				for _, fa := range fields {
					v, _ := fa.uint()
					switch fa.typ {
					case ctrlAttrOpID:
						o.id = uint32(v)
					case ctrlAttrOpFlags:
						o.flags = uint32(v)
					}
				}
				f.ops = append(f.ops, o)
			}
		}
	}
	if !idSeen {
		return f, errors.New("the controller's reply has no family ID")
	}
	return f, nil
}

// request sends a family command that expects only an ACK.
func (g *genlConn) request(cmd uint8, attrs []byte) error {
	return g.do(g.fam.id, genlPayload(cmd, uint8(g.fam.version), attrs))
}

// dumpCmd runs a family dump command and returns its messages, parsed.
func (g *genlConn) dumpCmd(cmd uint8, attrs []byte) ([]genlMsg, error) {
	msgs, err := g.dump(g.fam.id, genlPayload(cmd, uint8(g.fam.version), attrs))
	if err != nil {
		return nil, err
	}
	var out []genlMsg
	for _, m := range msgs {
		if m.typ != g.fam.id {
			continue
		}
		gm, err := parseGenl(m.data)
		if err != nil {
			return out, err
		}
		out = append(out, gm)
	}
	return out, nil
}

// printFamily prints a family's description as key=value lines.
func printFamily(w io.Writer, f genlFamily) {
	fmt.Fprintf(w, "family=%s\nid=%d\nversion=%d\nhdrsize=%d\nmaxattr=%d\n", f.name, f.id, f.version, f.hdrSize, f.maxAttr)
	for _, o := range f.ops {
		fmt.Fprintf(w, "op.%d=%s\n", o.id, opFlags(o.flags))
	}
}

func opFlags(fl uint32) string {
	s := ""
	for _, x := range []struct {
		bit  uint32
		name string
	}{{genlCmdCapDo, "do"}, {genlCmdCapDump, "dump"}, {genlAdminPerm, "admin"}, {genlCmdCapHasPolicy, "policy"}} {
		if fl&x.bit != 0 {
			if s != "" {
				s += ","
			}
			s += x.name
		}
	}
	if s == "" {
		s = "-"
	}
	return s
}
