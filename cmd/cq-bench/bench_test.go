package main

import (
	"bytes"
	"encoding/csv"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHistBuckets(t *testing.T) {
	for _, v := range []uint64{0, 1, 31, 32, 33, 63, 64, 1000, 123456, 1 << 40} {
		i := bucketOf(v)
		lo := bucketLow(i)
		assert.LessOrEqual(t, lo, v, "value %d", v)
		assert.Greater(t, bucketLow(i+1), v, "value %d", v)
	}
	var h hist
	for i := 1; i <= 100; i++ {
		h.add(time.Duration(i) * time.Microsecond)
	}
	assert.InDelta(t, 50, h.quantile(0.5), 4)
	assert.InDelta(t, 99, h.quantile(0.99), 7)
}

// One small run of every mode through the real control protocol, with the
// server in this process: the numbers are not checked, only that every mode
// moves traffic, shuts down cleanly and reports in both formats.
func TestEveryModeRuns(t *testing.T) {
	ln, err := net.Listen("tcp", net.JoinHostPort(serverAddr.String(), "0"))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		ln.Close()
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		done <- serve(newCtl(conn))
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	c := newCtl(conn)
	rows, err := runAll(c, shapes, []int{3}, []string{"tcp", "legacy", "legacy-rtc", "pooled", "nodim"}, 100*time.Millisecond, func(string) {})
	require.NoError(t, err)
	require.NoError(t, c.send(msg{Kind: "quit"}))
	require.NoError(t, <-done)
	require.Len(t, rows, 2)
	for _, r := range rows {
		for _, mode := range []string{"tcp", "legacy", "legacy-rtc", "pooled", "nodim"} {
			assert.Positive(t, r.Res[mode].TPS, "%s %s", r.Shape, mode)
		}
		assert.Positive(t, r.Res["pooled"].Comps)
	}
	var table, file bytes.Buffer
	printTable(&table, rows, "100ms")
	assert.Contains(t, table.String(), "legacy tps (vs TCP)")
	require.NoError(t, writeCSV(&file, rows))
	recs, err := csv.NewReader(&file).ReadAll()
	require.NoError(t, err)
	require.Len(t, recs, 3)
	assert.True(t, strings.HasPrefix(strings.Join(recs[0], ","),
		"clients,tcp_tps,legacy_tps,pooled_tps,pooled_wakeups_per_1k_comps,pooled_p50_us,pooled_p99_us"))
}
