package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/xml"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/ctlmsg"
	"github.com/goroce/goroce/smcr"
)

// inProcess starts the server side in this process (on 127.0.0.2, as the
// server process would) and connects a control connection to it.
func inProcess(t *testing.T, set smcSettings) *serverProc {
	t.Helper()
	s := newServer(set)
	h, err := s.start(allModes)
	require.NoError(t, err)
	a, b := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.serveCtl(b, t.TempDir()) }()
	p := &serverProc{hello: h, conn: a}
	p.ctl = ctlmsg.New(a)
	t.Cleanup(func() {
		p.stop()
		require.NoError(t, <-done)
		s.close()
	})
	return p
}

// A small run of every workload in every mode through the real control
// protocol: each point moves requests, every SMC-R connection is SMC-R on
// both sides (else the point fails), the SMC-R points count completions,
// and the table, CSV and chart come out in their formats. The numbers are
// not checked.
func TestEveryModeAndWorkloadRuns(t *testing.T) {
	set := smcSettings{DevPort: 24791, Signalling: "configured", Linger: 50 * time.Millisecond}
	srv := inProcess(t, set)
	b := &bench{set: set, srv: srv, n: 300, duration: 2 * time.Second, pipe: 1}
	var lines int
	rs, err := b.runAll(allWorkloads, []int{1, 3}, allModes, 1, func(done, total int, r *result) {
		lines++
		assert.Equal(t, 2*len(allModes)*len(allWorkloads), total)
	})
	require.NoError(t, err)
	require.Len(t, rs, 2*len(allModes)*len(allWorkloads))
	assert.Equal(t, len(rs), lines)
	for _, r := range rs {
		assert.Empty(t, r.Err, "%s c=%d %s", r.Workload, r.Clients, r.Mode)
		assert.Equal(t, int64(300), r.Requests, "%s c=%d %s", r.Workload, r.Clients, r.Mode)
		assert.Positive(t, r.RPS)
		if r.Mode != modeTCP {
			assert.Equal(t, r.Clients, smcCount(r.ClientConns.ByMode), "%s c=%d %s", r.Workload, r.Clients, r.Mode)
			assert.Equal(t, r.Clients, smcCount(r.ServerConns), "%s c=%d %s", r.Workload, r.Clients, r.Mode)
			assert.Positive(t, r.Comps, "%s c=%d %s", r.Workload, r.Clients, r.Mode)
			assert.Equal(t, 1, r.LinkGroups)
		}
	}
	ps := summarize(rs)
	var table, file, svg bytes.Buffer
	printTables(&table, ps, "header")
	assert.Contains(t, table.String(), "SMC cq_pool (shm)")
	assert.NotContains(t, table.String(), "FAILED")
	require.NoError(t, writeCSV(&file, ps))
	raw := append([]byte(nil), file.Bytes()...)
	recs, err := csv.NewReader(&file).ReadAll()
	require.NoError(t, err)
	require.Len(t, recs, 1+len(ps))
	assert.Equal(t, "workload,clients,mode,rps,p50_us,p99_us,cpu_us_per_req", strings.Join(recs[0], ","))
	back, err := readCSV(bytes.NewReader(raw))
	require.NoError(t, err)
	require.Len(t, back, len(ps))
	assert.Equal(t, ps[0].Workload, back[0].Workload)
	assert.InDelta(t, ps[0].RPS, back[0].RPS, 1)
	_, err = readCSV(strings.NewReader("a,b\n1,2\n"))
	assert.Error(t, err)
	require.NoError(t, writeSVG(&svg, ps, "title <&>"))
	dec := xml.NewDecoder(&svg)
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "the chart is not well-formed XML")
	}
}

// A connection that fell back to TCP fails the check of an SMC-R mode.
func TestFallbackIsAFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			_, _ = io.Copy(io.Discard, c)
		}
	}()
	// Told the peer does not speak SMC: plain TCP, as a Linux peer without
	// the TCP option would leave it.
	d := smcr.Dialer{Config: smcr.Config{Signalling: smcr.SignalConfigured}, LocalAddr: netip.MustParseAddr("127.0.0.1")}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	var m modeCounts
	m.add(c)
	err = m.check(modeSMCCQP, 1)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "fallback")
	assert.NoError(t, (&modeCounts{ByMode: map[string]int{"tcp": 1}}).check(modeTCP, 1))
}

func TestHistQuantilesAndMax(t *testing.T) {
	var h hist
	for i := 1; i <= 100; i++ {
		h.add(time.Duration(i)*time.Microsecond, 1)
	}
	h.add(time.Second, 1)
	assert.InDelta(t, 50, h.quantile(0.5), 4)
	assert.InDelta(t, 99, h.quantile(0.99), 7)
	assert.Equal(t, 1e6, h.maxUs())
	for _, v := range []uint64{0, 31, 32, 1000, 1 << 40} {
		i := bucketOf(v)
		assert.LessOrEqual(t, bucketLow(i), v)
	}
}

func TestMedianAndRange(t *testing.T) {
	assert.Equal(t, 2.0, median([]float64{3, 1, 2}))
	assert.Equal(t, 2.5, median([]float64{4, 1, 2, 3}))
	assert.Equal(t, 0.0, median(nil))
	for _, c := range []struct{ start, stop, n, lo, hi int }{
		{0, -1, 5, 0, 5}, {1, 2, 5, 1, 3}, {-2, -1, 5, 3, 5}, {3, 1, 5, 0, 0}, {0, 10, 3, 0, 3}, {0, -1, 0, 0, 0},
	} {
		lo, hi := rangeOf(c.start, c.stop, c.n)
		assert.Equal(t, [2]int{c.lo, c.hi}, [2]int{lo, hi}, "%+v", c)
	}
}

func TestReadProc(t *testing.T) {
	p, err := readProc(os.Getpid())
	require.NoError(t, err)
	assert.Positive(t, p.Threads)
	assert.Positive(t, p.RSSKiB)
	assert.Positive(t, p.FDs)
	assert.Positive(t, p.Vol+p.Nonvol)
	_, err = readProc(-1)
	assert.Error(t, err)
}

func TestProfileNamesArePlain(t *testing.T) {
	dir := t.TempDir()
	for _, bad := range []string{"", "../x", "/etc/passwd", "a/b", ".hidden", strings.Repeat("a", 200)} {
		_, err := createProfile(dir, bad)
		assert.Error(t, err, "%q", bad)
	}
	f, err := createProfile(dir, "redis-get-c1-smc-pool-rep1-server.pprof")
	require.NoError(t, err)
	f.Close()
	_, err = createProfile("", "x.pprof")
	assert.Error(t, err)
}

// A failed repetition (here a fallback, which still moved requests) is
// reported with its point but left out of the medians.
func TestFailedRepetitionsAreNotMedians(t *testing.T) {
	rs := []*result{
		{Workload: wlGet, Clients: 1, Mode: modeSMCCQP, Rep: 0, Requests: 100, RPS: 60000, Err: "client: 0 of 1 connections are SMC-R"},
		{Workload: wlGet, Clients: 1, Mode: modeSMCCQP, Rep: 1, Requests: 100, RPS: 10000},
		{Workload: wlGet, Clients: 1, Mode: modeSMCCQP, Rep: 2, Requests: 100, RPS: 12000},
	}
	ps := summarize(rs)
	require.Len(t, ps, 1)
	assert.Equal(t, 11000.0, ps[0].RPS)
	assert.Equal(t, 3, ps[0].Reps)
	require.Len(t, ps[0].Errs, 1)
	assert.Contains(t, ps[0].Errs[0], "rep 1:")
}
