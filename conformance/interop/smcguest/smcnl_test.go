//go:build linux

package main

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The replies below are built the way the kernel builds them (6.12's
// smc_stats.c, smc_core.c, smc_pnet.c, smc_clc.c): nests without
// NLA_F_NESTED, u64 counters, u32/u8 fields, NUL-terminated strings.

func u64(typ uint16, v uint64) []byte {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], v)
	return appendAttr(nil, typ, b[:])
}

func u32(typ uint16, v uint32) []byte {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	return appendAttr(nil, typ, b[:])
}

func u16(typ uint16, v uint16) []byte {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], v)
	return appendAttr(nil, typ, b[:])
}

func str(typ uint16, s string) []byte { return appendAttrString(nil, typ, s) }

func nest(typ uint16, parts ...[]byte) []byte {
	var v []byte
	for _, p := range parts {
		v = append(v, p...)
	}
	return appendAttr(nil, typ, v)
}

// genl parses a payload as a reply message would arrive.
func genl(t *testing.T, cmd uint8, attrs ...[]byte) genlMsg {
	t.Helper()
	var a []byte
	for _, x := range attrs {
		a = append(a, x...)
	}
	g, err := parseGenl(genlPayload(cmd, 1, a))
	require.NoError(t, err)
	return g
}

func statsReply(t *testing.T) genlMsg {
	tech := func(typ uint16, clntV2, srvV2, rx, tx uint64) []byte {
		return nest(typ,
			nest(5, u64(5, 2), u64(6, 1), u64(0, 0)), // tx_rmb_stats: reuse, alloc, a pad
			nest(3, u64(1, 3)),                       // tx_pload_size 8k
			u64(8, clntV2), u64(10, srvV2), u64(16, rx), u64(17, tx),
			u32(20, 0), // rx_rmb_usage: nla_put_uint, 4 bytes
		)
	}
	return genl(t, smcCmdGetStats, nest(smcGenStats,
		tech(1, 0, 0, 0, 0), tech(2, 3, 1, 300, 200),
		u64(3, 0), u64(4, 1)))
}

func fbackReply(t *testing.T, srv bool, srvCnt, clntCnt uint64, code uint32, cnt uint16, withCnt bool) genlMsg {
	typ := uint8(0)
	if srv {
		typ = 1
	}
	parts := [][]byte{appendAttrU8(nil, 1, typ)}
	if withCnt {
		parts = append(parts, u64(2, srvCnt), u64(3, clntCnt))
	}
	parts = append(parts, u32(4, code), u16(5, cnt))
	return genl(t, smcCmdGetFbackStats, nest(smcGenFbackStats, parts...))
}

func TestDecodeStats(t *testing.T) {
	fb := []genlMsg{
		fbackReply(t, true, 2, 1, 0x03010000, 2, true), // totals only in the first
		fbackReply(t, false, 0, 0, 0x03030008, 1, false),
	}
	lines, err := decodeStats([]genlMsg{statsReply(t)}, fb)
	require.NoError(t, err)
	got := strings.Join(lines, "\n") + "\n"
	for _, want := range []string{
		"smcr.clnt_v2_succ=3\n", "smcr.srv_v2_succ=1\n", "smcr.rx_bytes=300\n", "smcr.tx_bytes=200\n",
		"smcr.tx_rmb_stats.reuse_cnt=2\n", "smcr.tx_rmb_stats.alloc_cnt=1\n", "smcr.tx_pload_size.8k=3\n",
		"smcr.rx_rmb_usage=0\n", "smcd.clnt_v2_succ=0\n", "clnt_hs_err_cnt=0\n", "srv_hs_err_cnt=1\n",
		"fallback.srv_cnt=2\n", "fallback.clnt_cnt=1\n",
		"fallback.srv.0x03010000=2\n# fallback.srv.0x03010000: peer did not indicate SMC\n",
		"fallback.clnt.0x03030008=1\n# fallback.clnt.0x03030008: no UEID\n",
	} {
		assert.Contains(t, got, want)
	}
	assert.NotContains(t, got, "pad")

	// No fallback yet: the kernel sends nothing; the totals read 0.
	lines, err = decodeStats([]genlMsg{statsReply(t)}, nil)
	require.NoError(t, err)
	assert.Contains(t, lines, "fallback.srv_cnt=0")
	assert.Contains(t, lines, "fallback.clnt_cnt=0")

	_, err = decodeStats(nil, nil)
	assert.ErrorContains(t, err, "no statistics")
}

func TestDecodeLgr(t *testing.T) {
	lgrMsg := genl(t, smcCmdGetLgrSMCR, nest(smcGenLgrSMCR,
		u32(1, 256), u32(6, 0), appendAttrU8(nil, 2, 1), appendAttrU8(nil, 3, 1), appendAttrU8(nil, 11, 0),
		appendAttrU8(nil, 5, 0), u64(9, 1), str(4, "GOROCEPNET      "),
		u32(12, 65536), u32(13, 65536),
		// v2 common: numbered from 0.
		nest(7, appendAttrU8(nil, 0, 2), appendAttrU8(nil, 1, 1), appendAttrU8(nil, 2, 2),
			str(4, "goroce"), str(3, "GOROCE-INTEROP-UEID             ")),
		nest(8, appendAttrU8(nil, 1, 1), appendAttrU8(nil, 2, 255), appendAttrU8(nil, 3, 2)),
	))
	linkMsg := genl(t, smcCmdGetLinkSMCR, nest(smcGenLinkSMCR,
		appendAttrU8(nil, 1, 1), u32(10, 3), u32(6, 0), appendAttrU8(nil, 3, 1), u32(7, 2), str(2, "rxe0"),
		u32(8, 16842752), u32(9, 16842752),
		str(4, "0000:0000:0000:0000:0000:ffff:c612:000b"), str(5, "0000:0000:0000:0000:0000:ffff:c612:0001"),
	))
	lines, err := decodeLgr([]genlMsg{lgrMsg, linkMsg})
	require.NoError(t, err)
	got := strings.Join(lines, "\n") + "\n"
	for _, want := range []string{
		"lgr.0.id=256\n", "lgr.0.role=server\n", "lgr.0.type=single\n", "lgr.0.conns=0\n",
		"lgr.0.pnetid=GOROCEPNET\n", "lgr.0.v2_common.ver=2\n", "lgr.0.v2_common.neg_eid=GOROCE-INTEROP-UEID\n",
		"lgr.0.v2_common.peer_host=goroce\n", "lgr.0.v2.max_links=2\n", "lgr.0.sndbuf_alloc=65536\n",
		"lgr.0.link.1.state=active\n", "lgr.0.link.1.ib_dev=rxe0\n",
		"lgr.0.link.1.gid=0000:0000:0000:0000:0000:ffff:c612:000b\n", "lgr.0.link.1.uid=16842752\n",
		"lgrs=1\n", "links=1\n",
	} {
		assert.Contains(t, got, want)
	}

	lines, err = decodeLgr(nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"lgrs=0", "links=0"}, lines)

	_, err = decodeLgr([]genlMsg{linkMsg})
	assert.ErrorContains(t, err, "before any link group")
}

func TestDecodeUnknownAttr(t *testing.T) {
	// A newer kernel's attribute: printed by number, not dropped.
	kvs, err := flatten("lgr.0", mustAttrs(t, append(u32(1, 5), u32(42, 7)...)), lgrSchema)
	require.NoError(t, err)
	assert.Equal(t, []kv{{"lgr.0.id", "5"}, {"lgr.0.attr42", "7"}}, kvs)
}

func mustAttrs(t *testing.T, b []byte) []nlAttr {
	t.Helper()
	a, err := parseAttrs(b)
	require.NoError(t, err)
	return a
}

func TestDecodePnetAndUEID(t *testing.T) {
	msgs := []genlMsg{
		genl(t, pnetCmdGet, str(pnetName, "GOROCEPNET"), str(pnetEthName, "eth0"), str(pnetIBName, "n/a"), appendAttrU8(nil, pnetIBPort, 255)),
		genl(t, pnetCmdGet, str(pnetName, "GOROCEPNET"), str(pnetEthName, "n/a"), str(pnetIBName, "rxe0"), appendAttrU8(nil, pnetIBPort, 1)),
	}
	assert.Equal(t, []string{
		"pnetid=GOROCEPNET eth=eth0 ib=n/a port=255",
		"pnetid=GOROCEPNET eth=n/a ib=rxe0 port=1",
	}, decodePnet(msgs))
	u := genl(t, smcCmdDumpUEID, str(smcEIDEntry, "GOROCE-INTEROP-UEID             "))
	assert.Equal(t, []string{"ueid=GOROCE-INTEROP-UEID"}, decodeUEIDs([]genlMsg{u}))
}

func TestPrintRaw(t *testing.T) {
	var sb strings.Builder
	printRaw(&sb, statsReply(t).attrs, 0)
	out := sb.String()
	assert.Contains(t, out, "attr 7 len ")
	assert.Contains(t, out, "  attr 2 len ")
	assert.Contains(t, out, "    attr 8 len 8 = 3\n")
}

func TestDiagMsg(t *testing.T) {
	b := make([]byte, smcDiagMsgLen)
	b[0], b[2] = afSMC, 1
	binary.NativeEndian.PutUint64(b[56:], 4242)
	var fbk [8]byte
	binary.NativeEndian.PutUint32(fbk[0:], 0x03010000)
	b = appendAttr(b, smcDiagFallback, fbk[:])
	m, ino, err := parseDiagMsg(b)
	require.NoError(t, err)
	assert.Equal(t, uint64(4242), ino)
	assert.Equal(t, "mode=fallback reason=0x03010000 (peer did not indicate SMC)", m.String())
	m.mode = 0
	assert.Equal(t, "mode=smcr", m.String())
	_, _, err = parseDiagMsg(b[:20])
	assert.ErrorIs(t, err, errTruncated)
}

// FuzzReplies feeds arbitrary bytes to every reply parser: none may
// panic, whatever a kernel (or anything else) sends.
func FuzzReplies(f *testing.F) {
	f.Add(appendMsg(nil, 0x1c, nlmFMulti, 1, 1, genlPayload(smcCmdGetStats, 1, nest(smcGenStats, nest(2, u64(8, 1))))))
	f.Add(appendMsg(nil, nlmsgError, nlmFCapped|nlmFAckTLVs, 1, 1, errMsg(-22, "bad").data))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, _ := parseMsgs(b)
		var gs []genlMsg
		for _, m := range msgs {
			parseError(m)
			parseDiagMsg(m.data)
			if g, err := parseGenl(m.data); err == nil {
				gs = append(gs, g)
				parseFamily(g)
				var sb strings.Builder
				printRaw(&sb, g.attrs, 0)
			}
		}
		decodeStats(gs, gs)
		decodeLgr(gs)
		decodePnet(gs)
		decodeUEIDs(gs)
		// The bytes as a bare attribute run too.
		if attrs, err := parseAttrs(b); err == nil {
			flatten("x", attrs, statsSchema)
			flatten("x", attrs, lgrSchema)
		}
	})
}
