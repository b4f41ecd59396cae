package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// smcLines returns the "smc" objects of a -json dump, in order.
func smcLines(t *testing.T, name string) []map[string]any {
	t.Helper()
	code, out, _ := runDump(t, "-r", filepath.Join(vectorDir, name), "-json")
	require.Equal(t, 0, code)
	var res []map[string]any
	for _, l := range lines(out) {
		var v struct {
			SMC map[string]any `json:"smc"`
		}
		d := json.NewDecoder(strings.NewReader(l))
		d.UseNumber()
		require.NoError(t, d.Decode(&v), l)
		if v.SMC != nil {
			res = append(res, v.SMC)
		}
	}
	return res
}

// The real SMC decoders: every SMC message of the captures is printed with
// its type (the counts of CATALOG.md) and its fields as JSON numbers.
func TestSMCJSONVectors(t *testing.T) {
	types := map[string]int{}
	var accept, addLink, closing map[string]any
	for _, m := range smcLines(t, "smcr_close.pcap") {
		typ := m["type"].(string)
		types[typ]++
		switch {
		case typ == "CLC Accept" && accept == nil:
			accept = m
		case typ == "LLC ADD_LINK_v2":
			addLink = m
		case typ == "CDC" && m["conn_flags"] == json.Number("32"):
			closing = m
		}
	}
	assert.Equal(t, map[string]int{
		"CLC Proposal": 3, "CLC Accept": 3, "CLC Confirm": 3, "CDC": 13,
		"LLC ADD_LINK_v2": 1, "LLC ADD_LINK_v2 RESP": 1, "LLC CONFIRM_LINK_v2": 1, "LLC CONFIRM_LINK_v2 RESP": 1,
		"LLC CONFIRM_RKEY_v2": 4, "LLC CONFIRM_RKEY_v2 RESP": 4, "LLC DELETE_LINK_v2": 16, "LLC DELETE_RKEY_v2": 6,
		"LLC DELETE_RKEY_v2 RESP": 6, "LLC TEST_LINK_v2": 2, "LLC TEST_LINK_v2 RESP": 2,
	}, types)
	require.NotNil(t, accept)
	assert.Equal(t, json.Number("808"), accept["rmb_rkey"]) // 0x328
	assert.Equal(t, json.Number("65536"), accept["rmbe_size"])
	assert.Equal(t, "::ffff:198.18.0.11", accept["gid"])
	assert.Equal(t, true, accept["first_contact"])
	require.NotNil(t, addLink)
	assert.Equal(t, json.Number("88"), addLink["length"])
	require.NotNil(t, closing, "abort CDC")
	assert.Equal(t, []any{"peer_conn_abort"}, closing["flag_names"])
}

func TestSMCTextVectors(t *testing.T) {
	code, out, _ := runDump(t, "-r", filepath.Join(vectorDir, "smcr_close.pcap"))
	require.Equal(t, 0, code)
	var smc []string
	for _, l := range lines(out) {
		if i := strings.Index(l, " smc "); i >= 0 {
			smc = append(smc, l[i+5:])
		}
	}
	require.Len(t, smc, 9+44+13)
	assert.Equal(t, "LLC DELETE_LINK_v2 len 44 all reason OP_INIT_TERM", smc[9+44+13-16])
	assert.Contains(t, out, "TCP smc CLC Confirm v2 len 108 qpn 0x11 psn 13172500 mtu 1024 rkey 0x344 va 0xffff8d3f03c80000 token 2 rmbe 65536\n")
	assert.Contains(t, out, "smc CDC seq 2 token 3 prod 0:100 cons 0:0 peer_conn_abort\n")

	// Verbs traffic carries no SMC.
	code, out, _ = runDump(t, "-r", filepath.Join(vectorDir, "rping.pcap"))
	require.Equal(t, 0, code)
	assert.NotContains(t, out, " smc ")
}
