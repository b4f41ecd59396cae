package perftest

import (
	"bytes"
	"io"
	"math"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
)

func TestCFormats(t *testing.T) {
	for _, tc := range []struct {
		v     uint64
		width int
		want  string
	}{
		{0x15, 6, "0x0015"}, {0, 4, "0000"}, {0x574d2, 6, "0x574d2"}, {0xd6fab0, 6, "0xd6fab0"},
		{0x690, 8, "0x000690"}, {0x555d296b5000, 16, "0x00555d296b5000"}, {0x80, 4, "0x80"}, {0, 6, "000000"},
	} {
		assert.Equal(t, tc.want, cHex(tc.v, tc.width), "%#x", tc.v)
	}
	assert.Equal(t, "3.79   ", cFloat(3.7949, 7, 2))
	assert.Equal(t, "1367.91", cFloat(1367.909, 7, 2))
	assert.Equal(t, "0.000759", cFloat(0.000759, 7, 6))
	assert.Equal(t, "inf    ", cFloat(math.Inf(1), 7, 2))
	assert.Equal(t, "nan    ", cFloat(math.NaN(), 7, 2))
	assert.Equal(t, "1.5", cG(1.5))
	assert.Equal(t, "1.23457e+06", cG(1234567))
	assert.Equal(t, "0.000123", cG(0.000123))
}

// clientParams are the client's parameters of the rxe captures' runs,
// after the exchange (IB MTU 1024).
func clientParams(t *testing.T, test *Test, args ...string) *params {
	t.Helper()
	p, err := test.parse(append(args, "198.18.0.11"), io.Discard)
	require.NoError(t, err)
	p.gidIndex, p.curMTU, p.inline = 1, int(rocev2.MTU1024), 0
	p.outReads = 1
	if test.verb == Read || test.verb == Atomic {
		p.outReads = device.MaxQPRdAtom
	}
	return &p
}

// The client's test information and address lines are the rxe client's,
// line for line, but for the device's name.
func TestPrintTestInfoGolden(t *testing.T) {
	for _, tc := range []struct {
		capture string
		test    *Test
		args    []string
		my, rem dest
	}{
		{"write_bw", WriteBW, []string{"-x", "1", "-F", "-n", "5", "-s", "4096"},
			dest{qpn: 0x15, psn: 0xd6fab0, rkey: 0x642, vaddr: 0x555e22f57000, outReads: 1, gid: gidOf("198.18.0.12")},
			dest{qpn: 0x15, psn: 0x574d2, rkey: 0x690, vaddr: 0x555d296b5000, outReads: 1, gid: gidOf("198.18.0.11")}},
		{"read_bw", ReadBW, []string{"-x", "1", "-F", "-n", "5", "-s", "4096"},
			dest{qpn: 0x16, psn: 0x5f1d0a, rkey: 0x7bc, vaddr: 0x560455e5c000, outReads: 128, gid: gidOf("198.18.0.12")},
			dest{qpn: 0x16, psn: 0x6d0c02, rkey: 0x708, vaddr: 0x563c0a902000, outReads: 128, gid: gidOf("198.18.0.11")}},
		{"atomic_fetch_add", AtomicBW, []string{"-x", "1", "-F", "-n", "5", "-A", "FETCH_AND_ADD"},
			dest{qpn: 0x17, psn: 0x6e39a6, gid: gidOf("198.18.0.12")},
			dest{qpn: 0x17, psn: 0x3f9f04, gid: gidOf("198.18.0.11")}},
	} {
		t.Run(tc.capture, func(t *testing.T) {
			p := clientParams(t, tc.test, tc.args...)
			var out bytes.Buffer
			p.printTestInfo(&out, rocev2.MTU(p.curMTU))
			p.printDest(&out, "local", &tc.my)
			p.printDest(&out, "remote", &tc.rem)
			p.printBWHeader(&out)
			golden := goldenOutput(t, tc.capture, "client output")
			// From the test information's first line to the table header.
			start := -1
			for i, l := range golden {
				if strings.HasPrefix(l, "                    ") {
					start = i - 1
					break
				}
			}
			require.GreaterOrEqual(t, start, 0)
			want := strings.ReplaceAll(strings.Join(golden[start:start+len(strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"))], "\n")+"\n", "rxe0", deviceName)
			assert.Equal(t, want, out.String())
		})
	}
}

func gidOf(s string) device.GID { return device.GIDFromAddr(netip.MustParseAddr(s)) }

// The BW report's numbers are perftest's formulas: the peak is the best
// rate over consecutive messages (the moderated completions, never timed,
// don't count), the average over the whole run.
func TestBWReport(t *testing.T) {
	p := &params{t: WriteBW, size: 4096, iters: 5, numQPs: 1}
	c := &ctx{p: p, tposted: []int64{100, 200, 300, 400, 500}, tcompleted: []int64{0, 0, 0, 0, 1100}}
	r := c.bwReport(5)
	assert.Equal(t, uint64(4096), r.size)
	assert.Equal(t, uint64(5), r.iters)
	assert.InDelta(t, 4096e9/(200*1048576.0), r.bwPeak, 1e-9, "peak: 5 messages in 1000 ns, 200 ns each")
	assert.InDelta(t, 4096*5e9/(1000*1048576.0), r.bwAvg, 1e-9)
	assert.InDelta(t, 5.0, r.msgRate, 1e-9)
	var out bytes.Buffer
	p.printBWReport(&out, &r)
	assert.Equal(t, " 4096       5                19531.25            19531.25\t\t   5.000000\n", out.String())

	p.noPeak = true
	c.tposted[0], c.tcompleted[0] = 0, 2000
	r = c.bwReport(5)
	assert.Zero(t, r.bwPeak, "no peak without the times of each message")
	assert.InDelta(t, 4096*5e9/(2000*1048576.0), r.bwAvg, 1e-9)

	p.gbits = true
	r = bwReport{size: 8, iters: 5, bwPeak: 0.01, bwAvg: 0.01, msgRate: 0.001222}
	out.Reset()
	p.printBWReport(&out, &r)
	assert.Equal(t, " 8          5           0.010000            0.010000            0.001222\n", out.String(), "small Gb/s rates get more digits")
}

// The latency report: the times between posts, halved for a ping-pong,
// the two largest left out, and perftest's standard deviation of
// truncated integers.
func TestLatReport(t *testing.T) {
	p := &params{t: WriteLat, size: 2, iters: 10, numQPs: 1}
	c := &ctx{p: p, tposted: make([]int64, 10)}
	for i := 1; i < 10; i++ {
		c.tposted[i] = c.tposted[i-1] + int64(i)*1000 // 1, 2, ... 9 us apart: 0.5 ... 4.5 us one way
	}
	var out bytes.Buffer
	c.printLatReport(&out)
	// min 0.5; max the first left out (4.0); median 2.0; average of
	// 0.5..3.5 = 2.0; stdev sqrt((1+1+0+0+0+1+1)/7); 99% and 99.9%: 4.0.
	assert.Equal(t, " 2       10          0.50           4.00         2.00     \t       2.00        \t0.76   \t\t4.00    \t\t4.00   \n", out.String())

	p.t = ReadLat // a READ is a round trip: not halved
	out.Reset()
	c.printLatReport(&out)
	assert.True(t, strings.HasPrefix(out.String(), " 2       10          1.00           8.00         4.00 "), out.String())

	p.histogram = true
	out.Reset()
	c.printLatReport(&out)
	assert.True(t, strings.HasPrefix(out.String(), "#, usec\n1, 1\n2, 2\n"), out.String())
	assert.Contains(t, out.String(), resultLine+resultFmtLat+"\n")

	p.duration = 1
	c.tposted[0], c.tcompleted = 0, []int64{2e9}
	out.Reset()
	c.printLatDurReport(&out, 1000)
	assert.Equal(t, " 2             1000            2000.00        500.00 \n", out.String())
}

// With -R a server's test information says so and asks for its client,
// as Linux 6.1's perftest 4.5 server said in the interop run of
// `ib_send_bw -d rxe0 -i 1 -x 1 -F -p 18516 -s 65536 -m 1024 -n 200 -R`.
func TestPrintTestInfoCM(t *testing.T) {
	const want = "---------------------------------------------------------------------------------------\n" +
		"                    Send BW Test\n" +
		" Dual-port       : OFF\t\tDevice         : goroce0\n" +
		" Number of qps   : 1\t\tTransport type : IB\n" +
		" Connection type : RC\t\tUsing SRQ      : OFF\n" +
		" PCIe relax order: ON\n" +
		" ibv_wr* API     : OFF\n" +
		" RX depth        : 200\n" +
		" CQ Moderation   : 1\n" +
		" Mtu             : 1024[B]\n" +
		" Link type       : Ethernet\n" +
		" GID index       : 1\n" +
		" Max inline data : 0[B]\n" +
		" rdma_cm QPs\t : ON\n" +
		" Data ex. method : rdma_cm\n" +
		"---------------------------------------------------------------------------------------\n" +
		" Waiting for client rdma_cm QP to connect\n" +
		" Please run the same command with the IB/RoCE interface IP\n" +
		"---------------------------------------------------------------------------------------\n"
	p, err := SendBW.parse([]string{"-x", "1", "-F", "-p", "18516", "-s", "65536", "-m", "1024", "-n", "200", "-R"}, io.Discard)
	require.NoError(t, err)
	p.gidIndex, p.curMTU, p.inline, p.outReads = 1, int(rocev2.MTU1024), 0, 1
	var out bytes.Buffer
	p.printTestInfo(&out, rocev2.MTU(p.curMTU))
	assert.Equal(t, want, out.String())

	// The client's says nothing more than that the QPs are rdma_cm's.
	p.server = "198.18.0.11"
	out.Reset()
	p.printTestInfo(&out, rocev2.MTU(p.curMTU))
	assert.NotContains(t, out.String(), "Waiting for client rdma_cm QP")
	assert.Contains(t, out.String(), " rdma_cm QPs\t : ON\n Data ex. method : rdma_cm\n")
}
