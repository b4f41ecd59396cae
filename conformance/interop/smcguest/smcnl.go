//go:build linux

package main

// The SMC netlink commands: UEIDs, the pnet table, statistics, fallback
// reasons and link groups, each printed as stable key=value lines (lines
// starting with "#" are comments for people).

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const (
	smcFamily  = "SMC_GEN_NETLINK"
	pnetFamily = "SMC_PNETID"
	nlTimeout  = 5 * time.Second
)

func dialSMC() (*genlConn, error)  { return dialGenl(smcFamily, "smc", nlTimeout) }
func dialPnet() (*genlConn, error) { return dialGenl(pnetFamily, "smc", nlTimeout) }

// checkUEID checks a UEID as the kernel does (smc_clc_ueid_valid): 1 to 32
// characters, upper-case letters, digits, '.' and '-', starting with a
// letter or digit. The kernel only says EINVAL.
func checkUEID(u string) error {
	if u == "" || len(u) > smcMaxEIDLen {
		return fmt.Errorf("UEID %q: want 1 to %d characters", u, smcMaxEIDLen)
	}
	for i, c := range u {
		alnum := (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if !alnum && (i == 0 || (c != '.' && c != '-')) {
			return fmt.Errorf("UEID %q: only upper-case letters, digits, '.' and '-' (and a letter or digit first)", u)
		}
	}
	return nil
}

// ueidAttr is the UEID as the kernel wants it: blank-padded to 32
// characters and NUL-terminated (it checks for exactly 33 bytes).
func ueidAttr(u string) []byte {
	v := []byte(u + strings.Repeat(" ", smcMaxEIDLen-len(u)))
	return appendAttr(nil, smcEIDEntry, append(v, 0))
}

func ueidAdd(w io.Writer, u string) error {
	if err := checkUEID(u); err != nil {
		return err
	}
	g, err := dialSMC()
	if err != nil {
		return err
	}
	defer g.Close()
	if err := g.request(smcCmdAddUEID, ueidAttr(u)); err != nil {
		return fmt.Errorf("adding UEID %s: %w", u, err)
	}
	fmt.Fprintf(w, "ueid added: %s\n", u)
	return nil
}

func ueidDel(w io.Writer, u string) error {
	if err := checkUEID(u); err != nil {
		return err
	}
	g, err := dialSMC()
	if err != nil {
		return err
	}
	defer g.Close()
	if err := g.request(smcCmdRemoveUEID, ueidAttr(u)); err != nil {
		return fmt.Errorf("removing UEID %s: %w", u, err)
	}
	fmt.Fprintf(w, "ueid removed: %s\n", u)
	return nil
}

func ueidList(w io.Writer) error {
	g, err := dialSMC()
	if err != nil {
		return err
	}
	defer g.Close()
	msgs, err := g.dumpCmd(smcCmdDumpUEID, nil)
	if err != nil {
		return fmt.Errorf("listing UEIDs: %w", err)
	}
	for _, l := range decodeUEIDs(msgs) {
		fmt.Fprintln(w, l)
	}
	return nil
}

// decodeUEIDs returns one "ueid=NAME" line per entry.
func decodeUEIDs(msgs []genlMsg) []string {
	var out []string
	for _, m := range msgs {
		for _, a := range m.attrs {
			if a.typ == smcEIDEntry {
				out = append(out, "ueid="+strings.TrimRight(a.str(), " "))
			}
		}
	}
	return out
}

// pnetAdd adds a pnet table entry that ties the Ethernet device and the
// RDMA device's port to one PNET ID (what smc_pnet -a does).
func pnetAdd(w io.Writer, pnetid, eth, ib string, port int) error {
	if pnetid == "" || len(pnetid) > smcMaxPnetID {
		return fmt.Errorf("PNET ID %q: want 1 to %d letters and digits", pnetid, smcMaxPnetID)
	}
	if port < 1 || port > 255 {
		return fmt.Errorf("port %d: want 1 to 255", port)
	}
	g, err := dialPnet()
	if err != nil {
		return err
	}
	defer g.Close()
	a := appendAttrString(nil, pnetName, pnetid)
	a = appendAttrString(a, pnetEthName, eth)
	a = appendAttrString(a, pnetIBName, ib)
	a = appendAttrU8(a, pnetIBPort, uint8(port))
	if err := g.request(pnetCmdAdd, a); err != nil {
		return fmt.Errorf("adding pnet entry %s (%s, %s port %d): %w", pnetid, eth, ib, port, err)
	}
	fmt.Fprintf(w, "pnet added: pnetid=%s eth=%s ib=%s port=%d\n", strings.ToUpper(pnetid), eth, ib, port)
	return nil
}

func pnetDel(w io.Writer, pnetid string) error {
	g, err := dialPnet()
	if err != nil {
		return err
	}
	defer g.Close()
	if err := g.request(pnetCmdDel, appendAttrString(nil, pnetName, pnetid)); err != nil {
		return fmt.Errorf("removing pnet entry %s: %w", pnetid, err)
	}
	fmt.Fprintf(w, "pnet removed: pnetid=%s\n", pnetid)
	return nil
}

func pnetList(w io.Writer) error {
	g, err := dialPnet()
	if err != nil {
		return err
	}
	defer g.Close()
	msgs, err := g.dumpCmd(pnetCmdGet, nil)
	if err != nil {
		return fmt.Errorf("listing the pnet table: %w", err)
	}
	for _, l := range decodePnet(msgs) {
		fmt.Fprintln(w, l)
	}
	return nil
}

// decodePnet returns one line per pnet table entry. The kernel keeps an
// Ethernet entry and an RDMA entry for one add; the other side's fields
// read "n/a" and port 255.
func decodePnet(msgs []genlMsg) []string {
	var out []string
	for _, m := range msgs {
		var name, eth, ib, port string
		for _, a := range m.attrs {
			switch a.typ {
			case pnetName:
				name = a.str()
			case pnetEthName:
				eth = a.str()
			case pnetIBName:
				ib = a.str()
			case pnetIBPort:
				if v, ok := a.uint(); ok {
					port = strconv.FormatUint(v, 10)
				}
			}
		}
		out = append(out, fmt.Sprintf("pnetid=%s eth=%s ib=%s port=%s", name, eth, ib, port))
	}
	return out
}

// stats prints SMC_NETLINK_GET_STATS and GET_FBACK_STATS.
func stats(w io.Writer, raw bool) error {
	g, err := dialSMC()
	if err != nil {
		return err
	}
	defer g.Close()
	msgs, err := g.dumpCmd(smcCmdGetStats, nil)
	if err != nil {
		return fmt.Errorf("reading SMC statistics: %w", err)
	}
	fb, err := g.dumpCmd(smcCmdGetFbackStats, nil)
	if err != nil {
		return fmt.Errorf("reading SMC fallback statistics: %w", err)
	}
	if raw {
		fmt.Fprintln(w, "# GET_STATS")
		for _, m := range msgs {
			printRaw(w, m.attrs, 0)
		}
		fmt.Fprintln(w, "# GET_FBACK_STATS")
		for _, m := range fb {
			printRaw(w, m.attrs, 0)
		}
		return nil
	}
	lines, err := decodeStats(msgs, fb)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	return err
}

// decodeStats turns the two dumps into key=value lines: the counters of
// SMC-D and SMC-R, then fallback.srv_cnt, fallback.clnt_cnt and one line
// per reason code and side (fallback.srv.0x03010000=1), each reason named
// in a comment.
func decodeStats(msgs, fb []genlMsg) ([]string, error) {
	var out []string
	seen := false
	for _, m := range msgs {
		for _, a := range m.attrs {
			if a.typ != smcGenStats {
				continue
			}
			seen = true
			ch, err := a.children()
			if err != nil {
				return out, fmt.Errorf("statistics: %w", err)
			}
			kvs, err := flatten("", ch, statsSchema)
			for _, x := range kvs {
				out = append(out, x.key+"="+x.val)
			}
			if err != nil {
				return out, fmt.Errorf("statistics: %w", err)
			}
		}
	}
	if !seen {
		return out, fmt.Errorf("the kernel sent no statistics (SMC_GEN_STATS)")
	}
	var srvCnt, clntCnt uint64
	type reason struct {
		side string
		code uint32
	}
	counts := map[reason]uint64{}
	var order []reason
	for _, m := range fb {
		for _, a := range m.attrs {
			if a.typ != smcGenFbackStats {
				continue
			}
			ch, err := a.children()
			if err != nil {
				return out, fmt.Errorf("fallback statistics: %w", err)
			}
			var side string
			var code, cnt uint64
			hasCode := false
			for _, f := range ch {
				v, ok := f.uint()
				if !ok {
					return out, fmt.Errorf("fallback statistics: attribute %d has %d bytes", f.typ, len(f.data))
				}
				switch f.typ {
				case 1:
					side = map[bool]string{true: "srv", false: "clnt"}[v != 0]
				case 2:
					srvCnt = v
				case 3:
					clntCnt = v
				case 4:
					code, hasCode = v, true
				case 5:
					cnt = v
				}
			}
			if hasCode && side != "" {
				r := reason{side, uint32(code)}
				if _, ok := counts[r]; !ok {
					order = append(order, r)
				}
				counts[r] += cnt
			}
		}
	}
	out = append(out, fmt.Sprintf("fallback.srv_cnt=%d", srvCnt), fmt.Sprintf("fallback.clnt_cnt=%d", clntCnt))
	for _, r := range order {
		out = append(out, fmt.Sprintf("fallback.%s.0x%08x=%d", r.side, r.code, counts[r]),
			fmt.Sprintf("# fallback.%s.0x%08x: %s", r.side, r.code, declineName(r.code)))
	}
	return out, nil
}

// lgr prints the SMC-R link groups and their links.
func lgr(w io.Writer, raw bool) error {
	g, err := dialSMC()
	if err != nil {
		return err
	}
	defer g.Close()
	// GET_LINK_SMCR dumps each link group followed by its links.
	msgs, err := g.dumpCmd(smcCmdGetLinkSMCR, nil)
	if err != nil {
		return fmt.Errorf("reading SMC-R link groups: %w", err)
	}
	if raw {
		for _, m := range msgs {
			fmt.Fprintf(w, "# cmd %d\n", m.cmd)
			printRaw(w, m.attrs, 0)
		}
		return nil
	}
	lines, err := decodeLgr(msgs)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	return err
}

var (
	lgrRoles  = []string{"client", "server"}
	lgrTypes  = []string{"none", "single", "symmetric", "asymmetric_peer", "asymmetric_local"}
	linkState = []string{"unused", "inactive", "activating", "active"}
)

// enumName names v from names, or leaves the number.
func enumName(v string, names []string) string {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n >= len(names) {
		return v
	}
	return names[n]
}

// decodeLgr returns lgr.N.KEY=VALUE lines for link group N (in dump
// order) and lgr.N.link.ID.KEY=VALUE for its links, then lgrs=N and
// links=N. The SMC netlink messages carry no QP numbers (rdma res show qp
// has them).
func decodeLgr(msgs []genlMsg) ([]string, error) {
	var out []string
	n, links := -1, 0
	for _, m := range msgs {
		for _, a := range m.attrs {
			switch a.typ {
			case smcGenLgrSMCR:
				n++
				ch, err := a.children()
				if err != nil {
					return out, fmt.Errorf("link group: %w", err)
				}
				kvs, err := flatten(fmt.Sprintf("lgr.%d", n), ch, lgrSchema)
				for _, x := range kvs {
					switch {
					case strings.HasSuffix(x.key, ".role"):
						x.val = enumName(x.val, lgrRoles)
					case strings.HasSuffix(x.key, ".type"):
						x.val = enumName(x.val, lgrTypes)
					}
					out = append(out, x.key+"="+x.val)
				}
				if err != nil {
					return out, fmt.Errorf("link group: %w", err)
				}
			case smcGenLinkSMCR:
				if n < 0 {
					return out, fmt.Errorf("a link before any link group")
				}
				ch, err := a.children()
				if err != nil {
					return out, fmt.Errorf("link: %w", err)
				}
				id := "?"
				for _, f := range ch {
					if f.typ == 1 {
						if v, ok := f.uint(); ok {
							id = strconv.FormatUint(v, 10)
						}
					}
				}
				links++
				kvs, err := flatten(fmt.Sprintf("lgr.%d.link.%s", n, id), ch, linkSchema)
				for _, x := range kvs {
					if strings.HasSuffix(x.key, ".state") {
						x.val = enumName(x.val, linkState)
					}
					out = append(out, x.key+"="+x.val)
				}
				if err != nil {
					return out, fmt.Errorf("link: %w", err)
				}
			}
		}
	}
	out = append(out, fmt.Sprintf("lgrs=%d", n+1), fmt.Sprintf("links=%d", links))
	return out, nil
}

// info prints SMC_NETLINK_GET_SYS_INFO: the SMC version and release, the
// host name the kernel sends, SMC-Rv2 support.
func info(w io.Writer) error {
	g, err := dialSMC()
	if err != nil {
		return err
	}
	defer g.Close()
	msgs, err := g.dumpCmd(smcCmdGetSysInfo, nil)
	if err != nil {
		return fmt.Errorf("reading SMC system information: %w", err)
	}
	for _, m := range msgs {
		for _, a := range m.attrs {
			if a.typ != smcGenSysInfo {
				continue
			}
			ch, err := a.children()
			if err != nil {
				return err
			}
			kvs, err := flatten("", ch, sysInfoSchema)
			for _, x := range kvs {
				fmt.Fprintf(w, "%s=%s\n", x.key, x.val)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// genlInfo prints what the generic netlink controller says about a family.
func genlInfo(w io.Writer, name string) error {
	c, err := dialNetlink(unix.NETLINK_GENERIC, nlTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	f, err := getFamily(c, name)
	if err != nil {
		return fmt.Errorf("generic netlink family %s: %w", name, err)
	}
	printFamily(w, f)
	return nil
}
