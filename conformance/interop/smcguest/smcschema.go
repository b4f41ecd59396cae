//go:build linux

package main

// The attributes of the SMC generic netlink replies (include/uapi/linux/
// smc.h), as a schema: each attribute's number, the name it is printed
// under and its kind. Numbers the schema does not know are printed as
// "attrN", so that a kernel newer than this table loses nothing.

import (
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/goroce/goroce/smcr/smcwire"
)

// SMC_GEN_NETLINK commands.
const (
	smcCmdGetSysInfo    = 1
	smcCmdGetLgrSMCR    = 2
	smcCmdGetLinkSMCR   = 3
	smcCmdGetStats      = 7
	smcCmdGetFbackStats = 8
	smcCmdDumpUEID      = 9
	smcCmdAddUEID       = 10
	smcCmdRemoveUEID    = 11
)

// SMC_GEN_NETLINK top-level (nest) attributes.
const (
	smcGenSysInfo    = 1
	smcGenLgrSMCR    = 2
	smcGenLinkSMCR   = 3
	smcGenStats      = 7
	smcGenFbackStats = 8
)

// SMC_PNETID family: commands and attributes.
const (
	pnetCmdGet  = 1
	pnetCmdAdd  = 2
	pnetCmdDel  = 3
	pnetName    = 1
	pnetEthName = 2
	pnetIBName  = 3
	pnetIBPort  = 4

	smcEIDEntry  = 1  // SMC_NLA_EID_TABLE_ENTRY
	smcMaxEIDLen = 32 // SMC_MAX_EID_LEN
	smcMaxPnetID = 16 // SMC_MAX_PNETID_LEN
)

type attrKind int

const (
	kUint attrKind = iota
	kStr
	kNest
	kPad
)

type field struct {
	name string
	kind attrKind
	sub  schema
}

type schema map[uint16]field

var (
	// SMC_NLA_STATS_PLOAD_* (payload and RMB size buckets).
	ploadSchema = schema{0: {"pad", kPad, nil}, 1: {"8k", kUint, nil}, 2: {"16k", kUint, nil}, 3: {"32k", kUint, nil},
		4: {"64k", kUint, nil}, 5: {"128k", kUint, nil}, 6: {"256k", kUint, nil}, 7: {"512k", kUint, nil},
		8: {"1024k", kUint, nil}, 9: {"over_1024k", kUint, nil}}
	// SMC_NLA_STATS_RMB_*.
	rmbSchema = schema{0: {"pad", kPad, nil}, 1: {"size_small_peer_cnt", kUint, nil}, 2: {"size_small_cnt", kUint, nil},
		3: {"full_peer_cnt", kUint, nil}, 4: {"full_cnt", kUint, nil}, 5: {"reuse_cnt", kUint, nil},
		6: {"alloc_cnt", kUint, nil}, 7: {"dgrade_cnt", kUint, nil}}
	// SMC_NLA_STATS_T_* (per technology: SMC-D, SMC-R).
	techSchema = schema{0: {"pad", kPad, nil},
		1: {"tx_rmb_size", kNest, ploadSchema}, 2: {"rx_rmb_size", kNest, ploadSchema},
		3: {"tx_pload_size", kNest, ploadSchema}, 4: {"rx_pload_size", kNest, ploadSchema},
		5: {"tx_rmb_stats", kNest, rmbSchema}, 6: {"rx_rmb_stats", kNest, rmbSchema},
		7: {"clnt_v1_succ", kUint, nil}, 8: {"clnt_v2_succ", kUint, nil}, 9: {"srv_v1_succ", kUint, nil},
		10: {"srv_v2_succ", kUint, nil}, 11: {"sendpage_cnt", kUint, nil}, 12: {"splice_cnt", kUint, nil},
		13: {"cork_cnt", kUint, nil}, 14: {"ndly_cnt", kUint, nil}, 15: {"urg_data_cnt", kUint, nil},
		16: {"rx_bytes", kUint, nil}, 17: {"tx_bytes", kUint, nil}, 18: {"rx_cnt", kUint, nil},
		19: {"tx_cnt", kUint, nil}, 20: {"rx_rmb_usage", kUint, nil}, 21: {"tx_rmb_usage", kUint, nil}}
	// SMC_NLA_STATS_* inside SMC_GEN_STATS.
	statsSchema = schema{0: {"pad", kPad, nil}, 1: {"smcd", kNest, techSchema}, 2: {"smcr", kNest, techSchema},
		3: {"clnt_hs_err_cnt", kUint, nil}, 4: {"srv_hs_err_cnt", kUint, nil}}
	// SMC_NLA_FBACK_STATS_* inside SMC_GEN_FBACK_STATS.
	fbackSchema = schema{0: {"pad", kPad, nil}, 1: {"type", kUint, nil}, 2: {"srv_cnt", kUint, nil},
		3: {"clnt_cnt", kUint, nil}, 4: {"rsn_code", kUint, nil}, 5: {"rsn_cnt", kUint, nil}}
	// SMC_NLA_LGR_V2_* (numbered from 0: the header has no UNSPEC there).
	lgrV2CommonSchema = schema{0: {"ver", kUint, nil}, 1: {"rel", kUint, nil}, 2: {"os", kUint, nil},
		3: {"neg_eid", kStr, nil}, 4: {"peer_host", kStr, nil}}
	lgrV2Schema = schema{1: {"direct", kUint, nil}, 2: {"max_conns", kUint, nil}, 3: {"max_links", kUint, nil}}
	// SMC_NLA_LGR_R_*.
	lgrSchema = schema{1: {"id", kUint, nil}, 2: {"role", kUint, nil}, 3: {"type", kUint, nil},
		4: {"pnetid", kStr, nil}, 5: {"vlan_id", kUint, nil}, 6: {"conns", kUint, nil},
		7: {"v2_common", kNest, lgrV2CommonSchema}, 8: {"v2", kNest, lgrV2Schema}, 9: {"net_cookie", kUint, nil},
		10: {"pad", kPad, nil}, 11: {"buf_type", kUint, nil}, 12: {"sndbuf_alloc", kUint, nil}, 13: {"rmb_alloc", kUint, nil}}
	// SMC_NLA_LINK_*.
	linkSchema = schema{1: {"id", kUint, nil}, 2: {"ib_dev", kStr, nil}, 3: {"ib_port", kUint, nil},
		4: {"gid", kStr, nil}, 5: {"peer_gid", kStr, nil}, 6: {"conns", kUint, nil}, 7: {"net_dev", kUint, nil},
		8: {"uid", kUint, nil}, 9: {"peer_uid", kUint, nil}, 10: {"state", kUint, nil}}
	// SMC_NLA_SYS_*.
	sysInfoSchema = schema{1: {"ver", kUint, nil}, 2: {"rel", kUint, nil}, 3: {"is_ism_v2", kUint, nil},
		4: {"local_host", kStr, nil}, 5: {"seid", kStr, nil}, 6: {"is_smcr_v2", kUint, nil}}
)

// kv is one decoded value, under its dotted key.
type kv struct {
	key string
	val string
}

// flatten decodes attrs with sc into key=value pairs, keys prefixed with
// prefix. A value of an unexpected size or a nest that does not parse is
// reported as an error, with what was decoded so far.
func flatten(prefix string, attrs []nlAttr, sc schema) ([]kv, error) {
	var out []kv
	for _, a := range attrs {
		f, ok := sc[a.typ]
		if !ok {
			f = field{name: "attr" + strconv.Itoa(int(a.typ)), kind: guessKind(a)}
		}
		key := f.name
		if prefix != "" {
			key = prefix + "." + f.name
		}
		switch f.kind {
		case kPad:
		case kUint:
			v, ok := a.uint()
			if !ok {
				out = append(out, kv{key, "0x" + hex.EncodeToString(a.data)})
				continue
			}
			out = append(out, kv{key, strconv.FormatUint(v, 10)})
		case kStr:
			out = append(out, kv{key, strings.TrimRight(a.str(), " ")})
		case kNest:
			ch, err := a.children()
			if err != nil {
				return out, fmt.Errorf("%s: %w", key, err)
			}
			sub, err := flatten(key, ch, f.sub)
			out = append(out, sub...)
			if err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// guessKind is how an attribute the schema does not know is printed: as
// a number if it has a number's size, else as hex.
func guessKind(a nlAttr) attrKind {
	if _, ok := a.uint(); ok {
		return kUint
	}
	return kStr
}

// printRaw prints attributes as a tree with their numbers and sizes, for
// checking the schema's numbers against a kernel (-raw).
func printRaw(w io.Writer, attrs []nlAttr, depth int) {
	ind := strings.Repeat("  ", depth)
	for _, a := range attrs {
		v, isNum := a.uint()
		switch {
		case a.nested || (len(a.data) >= nlaHdrLen && looksNested(a.data)):
			fmt.Fprintf(w, "%sattr %d len %d nest\n", ind, a.typ, len(a.data))
			if ch, err := a.children(); err == nil {
				printRaw(w, ch, depth+1)
			}
		case isNum:
			fmt.Fprintf(w, "%sattr %d len %d = %d\n", ind, a.typ, len(a.data), v)
		default:
			fmt.Fprintf(w, "%sattr %d len %d = %q\n", ind, a.typ, len(a.data), a.str())
		}
	}
}

// looksNested reports whether b parses as attributes that fill it exactly
// (the SMC family does not set NLA_F_NESTED on its nests).
func looksNested(b []byte) bool {
	attrs, err := parseAttrs(b)
	return err == nil && len(attrs) > 0 && len(b)%4 == 0 && !printable(b)
}

func printable(b []byte) bool {
	for i, c := range b {
		if c == 0 && i == len(b)-1 {
			continue
		}
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// declineName names a CLC decline / fallback reason code (the kernel's
// SMC_CLC_DECL_*), or says it is unknown.
func declineName(code uint32) string {
	if n := smcwire.DiagCode(code).Name(); n != "" {
		return n
	}
	return "unknown reason"
}
