package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The kernel's rping: five CM messages, their text lines and JSON objects.
func TestCMVectors(t *testing.T) {
	file := filepath.Join(vectorDir, "rping.pcap")
	code, out, _ := runDump(t, "-r", file, "-op", "UD")
	require.Equal(t, 0, code)
	var kinds []string
	for _, l := range lines(out) {
		i := strings.Index(l, " CM ")
		require.Positive(t, i, l)
		kinds = append(kinds, strings.Fields(l[i+4:])[0])
	}
	require.Equal(t, []string{"REQ", "REP", "RTU", "DREQ", "DREP"}, kinds)
	require.Contains(t, out, "CM REQ comm 0xa3a187cc sid 0x1061c06 (TCP 7174) qpn 0x1a psn 0x4b8d0f")
	require.Contains(t, out, "rdma_cm 198.18.0.12:43344 > 198.18.0.11")

	code, out, _ = runDump(t, "-r", file, "-json", "-op", "UD")
	require.Equal(t, 0, code)
	var mads []map[string]any
	for _, l := range lines(out) {
		var v struct {
			MAD map[string]any `json:"mad"`
		}
		d := json.NewDecoder(strings.NewReader(l))
		d.UseNumber()
		require.NoError(t, d.Decode(&v), l)
		require.NotNil(t, v.MAD, l)
		mads = append(mads, v.MAD)
	}
	require.Len(t, mads, 5)
	req := mads[0]
	require.Equal(t, "CM REQ", req["type"])
	require.Equal(t, json.Number("12021375395"), req["tid"])
	cm := req["cm"].(map[string]any)
	require.Equal(t, json.Number("4951311"), cm["starting_psn"])
	require.Equal(t, "::ffff:198.18.0.12", cm["primary_path"].(map[string]any)["local_gid"])
	require.Equal(t, "0040a950", cm["private_data"].(string)[:8])
	require.Equal(t, map[string]any{"cma_version": json.Number("0"), "ip_version": json.Number("4"),
		"port": json.Number("43344"), "src": "198.18.0.12", "dst": "198.18.0.11"}, req["rdma_cm"])
	for i, typ := range []string{"CM REP", "CM RTU", "CM DREQ", "CM DREP"} {
		require.Equal(t, typ, mads[i+1]["type"])
		require.Nil(t, mads[i+1]["rdma_cm"])
	}
}
