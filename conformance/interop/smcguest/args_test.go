//go:build linux

package main

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseServer(t *testing.T) {
	o, err := parseServer([]string{"5000", "-n", "8", "-close"})
	require.NoError(t, err)
	assert.Equal(t, serverOpts{addr: netip.MustParseAddrPort("0.0.0.0:5000"), conns: 8, end: endClose, timeout: 120 * time.Second}, o)

	o, err = parseServer([]string{"-n=2", "--abort", "-tcp", "-addr", "198.18.0.11", "6000", "-timeout", "30s", "-peer-abort"})
	require.NoError(t, err)
	assert.Equal(t, serverOpts{addr: netip.MustParseAddrPort("198.18.0.11:6000"), conns: 2, end: endAbort, peerAbort: true, tcp: true, timeout: 30 * time.Second}, o)

	o, err = parseServer([]string{"5000"})
	require.NoError(t, err)
	assert.Equal(t, endShut, o.end, "shut is the default")
	assert.Equal(t, 1, o.conns)

	for _, bad := range [][]string{
		{}, {"5000", "6000"}, {"0"}, {"70000"}, {"x"},
		{"5000", "-n"}, {"5000", "-n", "0"}, {"5000", "-n", "x"},
		{"5000", "-shut", "-close"}, {"5000", "-close=1"}, {"5000", "-bogus"},
		{"5000", "-n", "1", "-n", "2"}, {"5000", "-addr", "::1"}, {"5000", "-timeout", "-1s"},
	} {
		_, err := parseServer(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestParseClient(t *testing.T) {
	o, err := parseClient([]string{"198.18.0.1", "5000", "-conns", "8", "-parallel", "-sizes", "1,1024,65536,1048576,16777216", "-end", "abort"})
	require.NoError(t, err)
	assert.Equal(t, clientOpts{addr: netip.MustParseAddrPort("198.18.0.1:5000"), conns: 8, parallel: true,
		sizes: []int{1, 1024, 65536, 1 << 20, 16 << 20}, end: endAbort, timeout: 120 * time.Second}, o)

	o, err = parseClient([]string{"-sizes=1k,64K,1m,16M", "10.0.0.1", "--", "7"})
	require.NoError(t, err)
	assert.Equal(t, []int{1024, 65536, 1 << 20, 16 << 20}, o.sizes)
	assert.Equal(t, endShut, o.end)
	assert.Equal(t, uint16(7), o.addr.Port())

	o, err = parseClient([]string{"198.18.0.1", "5000", "-idle", "8s", "-timeout", "60s"})
	require.NoError(t, err)
	assert.Equal(t, 8*time.Second, o.idle)

	for _, bad := range [][]string{
		{}, {"198.18.0.1"}, {"host", "5000"}, {"::1", "5000"}, {"198.18.0.1", "5000", "6000"},
		{"198.18.0.1", "5000", "-sizes", "0"}, {"198.18.0.1", "5000", "-sizes", "1,,2"},
		{"198.18.0.1", "5000", "-sizes", "1g"}, {"198.18.0.1", "5000", "-sizes", "300m"},
		{"198.18.0.1", "5000", "-end", "later"}, {"198.18.0.1", "5000", "-conns", "0"},
		{"198.18.0.1", "5000", "-idle", "2m"}, {"198.18.0.1", "5000", "-idle", "x"},
	} {
		_, err := parseClient(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestRunUsage(t *testing.T) {
	var sb strings.Builder
	out := &lineWriter{w: &sb}
	for _, bad := range [][]string{
		nil, {"frobnicate"}, {"ueid"}, {"ueid", "add"}, {"pnet", "add", "P", "eth0", "rxe0"},
		{"pnet", "add", "P", "eth0", "rxe0", "one"}, {"stats", "extra"}, {"lgr", "-x"}, {"genl"},
		{"server"}, {"client", "1.2.3.4"},
	} {
		err := run(out, bad)
		assert.True(t, errors.Is(err, errUsage), "%q: %v", bad, err)
	}
	require.NoError(t, run(out, []string{"help"}))
	assert.Contains(t, sb.String(), "usage:")
	// Checked before any netlink: no kernel needed.
	err := run(out, []string{"ueid", "add", "lower-case"})
	assert.ErrorContains(t, err, "upper-case")
	assert.False(t, errors.Is(err, errUsage))
	assert.ErrorContains(t, run(out, []string{"pnet", "add", "P", "eth0", "rxe0", "0"}), "want 1 to 255")
}

func TestParseClientHolds(t *testing.T) {
	o, err := parseClient([]string{"198.18.0.1", "5000", "-sizes", "16m", "-hold-at", "8m,16m", "-hold", "/tmp/fo"})
	require.NoError(t, err)
	assert.Equal(t, &holds{at: []uint64{8 << 20, 16 << 20}, prefix: "/tmp/fo"}, o.holds)
	o, err = parseClient([]string{"198.18.0.1", "5000"})
	require.NoError(t, err)
	assert.Nil(t, o.holds)
	for _, bad := range [][]string{
		{"-hold-at", "1k"}, {"-hold", "/tmp/fo"}, {"-hold-at", "2k", "-hold", "/tmp/fo", "-sizes", "1k"},
		{"-hold-at", "1k,1k", "-hold", "/tmp/fo"}, {"-hold-at", "x", "-hold", "/tmp/fo"}, {"-hold-at", "1", "-hold", ""},
	} {
		_, err := parseClient(append([]string{"198.18.0.1", "5000"}, bad...))
		assert.Error(t, err, "%q", bad)
	}
}
