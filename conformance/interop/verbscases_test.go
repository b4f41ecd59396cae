//go:build linux

package main

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rxeWriteBWServer is ib_write_bw's server output on rxe (perftest
// 4.5+0.17, Debian 12; conformance/testdata/rxe/write_bw.txt).
const rxeWriteBWServer = `
************************************
* Waiting for client to connect... *
************************************
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF		Device         : rxe0
 Number of qps   : 1		Transport type : IB
 Connection type : RC		Using SRQ      : OFF
 Mtu             : 1024[B]
 GID index       : 1
---------------------------------------------------------------------------------------
 local address: LID 0000 QPN 0x0015 PSN 0x574d2 RKey 0x000690 VAddr 0x00555d296b5000
 GID: 00:00:00:00:00:00:00:00:00:00:255:255:198:18:00:11
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 4096       5                3.79               2.97   		   0.000759
---------------------------------------------------------------------------------------
`

func TestParsePerftest(t *testing.T) {
	const latHead = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"
	for _, tc := range []struct {
		name string
		out  string
		want perf
	}{
		{"rxe write_bw server", rxeWriteBWServer,
			perf{ok: true, bytes: 4096 * 5, iters: 5, mbits: 2.97 * 1048576 * 8 / 1e6, usecIter: 1 / 0.000759, secs: 5 / 0.000759 / 1e6}},
		{"report_gbits",
			" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n 65536      1000             0.00               1.50   \t\t   0.002861\n",
			perf{ok: true, bytes: 65536 * 1000, iters: 1000, mbits: 1500, usecIter: 1 / 0.002861, secs: 1000 / 0.002861 / 1e6}},
		{"latency",
			latHead + " 2       200          85.13          2107.54      120.35  \t       151.92     \t130.44\t\t1532.91 \t\t2107.54\n",
			perf{ok: true, bytes: 400, iters: 200, usecIter: 151.92, secs: 200 * 151.92 / 1e6}},
		{"latency -D",
			" #bytes        #iterations       t_avg[usec]    tps average\n 2             9650            103.52          4829.97\n",
			perf{ok: true, bytes: 2 * 9650, iters: 9650, usecIter: 103.52, secs: 9650 * 103.52 / 1e6}},
		{"no clock: perftest's inf and -nan (rxe, TCG)",
			"Correlation coefficient r^2: 0.88401 < 0.9\n" + latHead + " 2       200          inf            inf          inf      \t       inf         \t-nan   \t\tinf     \t\tinf    \n",
			perf{ok: true, bytes: 400, iters: 200, usecIter: math.Inf(1), secs: math.Inf(1)}},
		{"-a: the last size's row",
			" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n 2          200              0.10               0.09   \t\t   0.045000\n 4          200              0.20               0.18   \t\t   0.045000\n",
			perf{ok: true, bytes: 800, iters: 200, mbits: 0.18 * 1048576 * 8 / 1e6, usecIter: 1 / 0.045, secs: 200 / 0.045 / 1e6}},
		{"header without a row", " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n" + strings.Repeat("-", 87) + "\n", perf{}},
		{"a row without a header", " 4096       5                3.79               2.97   \t\t   0.000759\n", perf{}},
		{"a short row", " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n 4096       5                3.79\n", perf{}},
		{"failure", " Couldn't connect to 198.18.0.11:18515\nUnable to open file descriptor for socket connection\n", perf{}},
		{"empty", "", perf{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parsePerftest(tc.out)
			assert.Equal(t, tc.want.ok, got.ok)
			assert.Equal(t, tc.want.bytes, got.bytes)
			assert.Equal(t, tc.want.iters, got.iters)
			assert.InDelta(t, tc.want.mbits, got.mbits, 1e-9)
			if math.IsInf(tc.want.usecIter, 1) {
				assert.True(t, math.IsInf(got.usecIter, 1) && math.IsInf(got.secs, 1), "%v %v", got.usecIter, got.secs)
				return
			}
			assert.InDelta(t, tc.want.usecIter, got.usecIter, 1e-6)
			assert.InDelta(t, tc.want.secs, got.secs, 1e-9)
		})
	}
}

func TestPerftestNotes(t *testing.T) {
	assert.Equal(t, []string{`rxe's perftest could not calibrate its clock ("Correlation coefficient r^2: 0.88401 < 0.9"), so its times read inf: its iterations still count`},
		perftestNotes("rxe", " local address: LID 0000\nCorrelation coefficient r^2: 0.88401 < 0.9\n"))
	assert.Nil(t, perftestNotes("goroce", rxeWriteBWServer))
	assert.Equal(t, []string(nil), ibReadLat.notes("rxe", ""))
}

func TestVerbsCommands(t *testing.T) {
	for _, tc := range []struct {
		c              testCase
		guest, goroce  string
		name, slugPart string
	}{
		{testCase{tool: ucPingpong, size: 4096, iters: 100, mtu: 1024, chk: true},
			"ibv_uc_pingpong -d rxe0 -i 1 -g 1 -p 18520 -s 4096 -m 1024 -n 100 -c",
			"uc_pingpong -d 198.18.0.1 -g 1 -timeout 30s -p 18520 -s 4096 -m 1024 -n 100 -c 198.18.0.11",
			"uc_pingpong s=4096 m=1024 n=100 -c", "uc_pingpong_s4096_m1024_n100_c_rxesrv"},
		{testCase{tool: udPingpong, size: 1024, iters: 100, mtu: 1024, chk: true},
			"ibv_ud_pingpong -d rxe0 -i 1 -g 1 -p 18520 -s 1024 -n 100 -c",
			"ud_pingpong -d 198.18.0.1 -g 1 -timeout 30s -p 18520 -s 1024 -n 100 -c 198.18.0.11",
			"ud_pingpong s=1024 m=1024 n=100 -c", "ud_pingpong_s1024_m1024_n100_c_rxesrv"},
		{testCase{tool: srqPingpong, size: 4096, iters: 100, mtu: 1024, qps: 4},
			"ibv_srq_pingpong -d rxe0 -i 1 -g 1 -p 18520 -s 4096 -m 1024 -n 100 -q 4",
			"srq_pingpong -d 198.18.0.1 -g 1 -timeout 30s -p 18520 -s 4096 -m 1024 -n 100 -q 4 198.18.0.11",
			"srq_pingpong s=4096 m=1024 n=100 q=4", "srq_pingpong_s4096_m1024_n100_q4_rxesrv"},
		{testCase{tool: ibSendBW, size: 1024, dur: 2, mtu: 1024, conn: "UD"},
			"ib_send_bw -d rxe0 -i 1 -x 1 -F -p 18520 -s 1024 -m 1024 -D 2 -c UD",
			"ib_send_bw -d 198.18.0.1 -x 1 -F -timeout 32s -p 18520 -s 1024 -m 1024 -D 2 -c UD 198.18.0.11",
			"ib_send_bw s=1024 m=1024 D=2 -c UD", "ib_send_bw_s1024_m1024_D2_c_UD_rxesrv"},
		{testCase{tool: ibAtomicBW, size: 8, iters: 200, mtu: 1024},
			"ib_atomic_bw -d rxe0 -i 1 -x 1 -F -p 18520 -m 1024 -n 200",
			"ib_atomic_bw -d 198.18.0.1 -x 1 -F -timeout 30s -p 18520 -m 1024 -n 200 198.18.0.11",
			"ib_atomic_bw s=8 m=1024 n=200", "ib_atomic_bw_s8_m1024_n200_rxesrv"},
		{testCase{tool: ibReadLat, size: 2, iters: 200, mtu: 1024, events: true},
			"ib_read_lat -d rxe0 -i 1 -x 1 -F -p 18520 -s 2 -m 1024 -n 200 -e",
			"ib_read_lat -d 198.18.0.1 -x 1 -F -timeout 30s -p 18520 -s 2 -m 1024 -n 200 -e 198.18.0.11",
			"ib_read_lat s=2 m=1024 n=200 -e", "ib_read_lat_s2_m1024_n200_e_rxesrv"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, h := tc.c.commands(5, guestEnds)
			assert.Equal(t, tc.guest, strings.Join(g, " "))
			assert.Equal(t, tc.goroce, strings.Join(h, " "))
			assert.Equal(t, tc.name, tc.c.name())
			assert.Equal(t, tc.slugPart, tc.c.slug())
			// The other way round: the kernel's program connects to goroce's.
			c := tc.c
			c.server = goroceServer
			g, h = c.commands(5, guestEnds)
			assert.Equal(t, tc.guest+" 198.18.0.1", strings.Join(g, " "))
			assert.Equal(t, strings.TrimSuffix(tc.goroce, " 198.18.0.11"), strings.Join(h, " "))
		})
	}
}

func TestVerbsExpectations(t *testing.T) {
	for _, tc := range []struct {
		c                      testCase
		srvIters, cliIters     int
		srvResults, cliResults bool
		oneWay                 bool
	}{
		{testCase{tool: udPingpong, iters: 100}, 100, 100, true, true, false},
		{testCase{tool: ibSendBW, iters: 200}, 200, 200, true, true, false},
		{testCase{tool: ibSendBW, dur: 2, conn: "UD"}, 0, 0, true, true, true},
		{testCase{tool: ibSendBW, dur: 2, conn: "UC"}, 0, 0, true, true, true},
		{testCase{tool: ibWriteBW, iters: 200, conn: "UC"}, 200, 200, true, true, true},
		{testCase{tool: ibWriteBW, iters: 200}, 200, 200, true, true, false},
		{testCase{tool: ibReadLat, iters: 200}, 200, 200, false, true, false},
		{testCase{tool: ibSendLat, iters: 200, conn: "UD"}, 200, 200, true, true, false},
	} {
		t.Run(tc.c.name(), func(t *testing.T) {
			n, ok := tc.c.expect(true)
			assert.Equal(t, tc.srvIters, n)
			assert.Equal(t, tc.srvResults, ok)
			n, ok = tc.c.expect(false)
			assert.Equal(t, tc.cliIters, n)
			assert.Equal(t, tc.cliResults, ok)
			assert.Equal(t, tc.oneWay, tc.c.oneWay())
		})
	}
}

// TestVerbsCases checks that issue 13's interop list is there: every
// program both ways, UD from 1 byte to a whole MTU, SRQ with several QPs,
// perftest's seven over RC and UC/UD where perftest has them.
func TestVerbsCases(t *testing.T) {
	cs := verbsCases()
	require.NotEmpty(t, cs)
	dirs := map[string]map[side]bool{}
	udSizes := map[int]bool{}
	conns := map[string]bool{}
	lossy := map[string]bool{}
	for _, c := range cs {
		require.NotNil(t, c.tool)
		key := c.tool.name
		if c.conn != "" {
			key += " " + c.conn
			conns[key] = true
		}
		if dirs[key] == nil {
			dirs[key] = map[side]bool{}
		}
		dirs[key][c.server] = true
		assert.Equal(t, rcGuest, c.guest)
		if c.lossy() {
			// A loss case needs recovery (RC) or a client that does not
			// wait for what is lost (UC WRITE), and both directions lost.
			assert.NotEqual(t, "UD", c.conn, c.name())
			assert.True(t, c.conn == "" || c.tool == ibWriteBW, c.name())
			assert.True(t, c.loss > 0 && c.lossIn > 0, c.name())
			lossy[map[bool]string{true: "RC", false: c.conn}[c.conn == ""]] = true
		}
		switch c.tool {
		case udPingpong:
			assert.LessOrEqual(t, c.size, c.mtu, "a UD message is at most the MTU")
			if c.size == 1 || c.size == c.mtu {
				udSizes[c.size] = true
			}
			assert.True(t, c.chk, "-c: goroce checks the GRH area")
		case srqPingpong:
			assert.Greater(t, c.qps, 1)
		}
		if c.conn != "" {
			assert.Contains(t, []string{"UC", "UD"}, c.conn)
		}
		if c.dur == 0 {
			assert.Greater(t, c.iters, 0, c.name())
			assert.LessOrEqual(t, c.iters, 200, "%s: interop, not speed", c.name())
		}
		assert.Zero(t, c.dur, "%s: a -D run floods the slower side", c.name())
	}
	for _, name := range []string{"uc_pingpong", "ud_pingpong", "srq_pingpong", "ib_send_bw", "ib_write_bw", "ib_read_bw",
		"ib_atomic_bw", "ib_send_lat", "ib_write_lat", "ib_read_lat", "ib_send_bw UC", "ib_send_bw UD", "ib_write_bw UC",
		"ib_send_lat UC", "ib_send_lat UD", "ib_write_lat UC"} {
		assert.Equal(t, map[side]bool{guestServer: true, goroceServer: true}, dirs[name], name)
	}
	assert.True(t, udSizes[1] && udSizes[1024] && udSizes[4096], "UD sizes 1 to MTU: %v", udSizes)
	assert.Len(t, conns, 6)
	assert.Equal(t, map[string]bool{"RC": true, "UC": true}, lossy)
}
