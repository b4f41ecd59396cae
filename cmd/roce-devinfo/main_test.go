package main

import (
	"bytes"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/rundir/rundirtest"
	"github.com/goroce/goroce/rocev2/backend/memlink"
	"github.com/goroce/goroce/rocev2/device"
)

// runDevinfo runs roce-devinfo in process. Every run passes -udp-port 0
// unless it names a port, so that tests never contend for 4791.
func runDevinfo(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(append([]string{"-udp-port", "0"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// guidPattern is a node GUID made of a random locally administered MAC
// (rxe's EUI-64: the universal/local bit flipped back, ff:fe in the middle).
const guidPattern = `[0-9a-f][048c][0-9a-f]{2}:[0-9a-f]{2}ff:fe[0-9a-f]{2}:[0-9a-f]{4}`

// golden is ibv_devinfo's layout for a device on 127.0.0.1. The active MTU
// follows the loopback interface's MTU, and the GUIDs the device's random
// MAC, so those lines are patterns.
var golden = regexp.MustCompile(`^` + regexp.QuoteMeta("hca_id:\tgoroce0\n"+
	"\ttransport:\t\t\tInfiniBand (0)\n"+
	"\tfw_ver:\t\t\t\tgoroce 0.1\n") +
	`\tnode_guid:\t\t\t(` + guidPattern + `)\n` +
	`\tsys_image_guid:\t\t\t(` + guidPattern + `)\n` +
	regexp.QuoteMeta("\tvendor_id:\t\t\t0x0000\n"+
		"\tvendor_part_id:\t\t\t0\n"+
		"\thw_ver:\t\t\t\t0x0\n"+
		"\tphys_port_cnt:\t\t\t1\n"+
		"\t\tport:\t1\n"+
		"\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"+
		"\t\t\tmax_mtu:\t\t4096 (5)\n") +
	`\t\t\tactive_mtu:\t\t(256 \(1\)|512 \(2\)|1024 \(3\)|2048 \(4\)|4096 \(5\))\n` +
	regexp.QuoteMeta("\t\t\tsm_lid:\t\t\t0\n"+
		"\t\t\tport_lid:\t\t0\n"+
		"\t\t\tport_lmc:\t\t0x00\n"+
		"\t\t\tlink_layer:\t\tEthernet\n"+
		"\n") + `$`)

func TestDevinfoLayouts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, out string)
	}{
		{"ibv_devinfo", nil, func(t *testing.T, out string) {
			m := golden.FindStringSubmatch(out)
			require.NotNil(t, m, "%q does not match %v", out, golden)
			assert.Equal(t, m[1], m[2], "sys_image_guid is node_guid")
		}},
		{"ibv_devinfo -v", []string{"-v"}, func(t *testing.T, out string) {
			for _, want := range []string{
				"\tmax_qp:\t\t\t\t16384\n",
				"\tmax_qp_wr:\t\t\t16384\n",
				"\tatomic_cap:\t\t\tATOMIC_HCA (1)\n",
				"\t\t\tgid_tbl_len:\t\t2\n",
				"\t\t\tGID[  1]:\t\t::ffff:127.0.0.1, RoCE v2\n\n",
			} {
				assert.Contains(t, out, want)
			}
			// GID 0 is fe80:: and the node GUID.
			m := regexp.MustCompile(`node_guid:\t+([0-9a-f:]+)\n`).FindStringSubmatch(out)
			require.NotNil(t, m)
			want := netip.MustParseAddr("fe80::" + m[1])
			assert.Contains(t, out, "\t\t\tGID[  0]:\t\t"+want.String()+", RoCE v2\n")
		}},
		{"show_gids", []string{"-gids"}, func(t *testing.T, out string) {
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			require.Len(t, lines, 5, out)
			assert.Equal(t, "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4 \t\tVER\tDEV", lines[0])
			assert.Equal(t, "---\t----\t-----\t---\t\t\t\t\t------------ \t---\t---", lines[1])
			assert.Regexp(t, `^goroce0\t1\t0\tfe80:0000:0000:0000:`+guidPattern+`\t\t\tv2\t\S+$`, lines[2])
			assert.Regexp(t, `^goroce0\t1\t1\t0000:0000:0000:0000:0000:ffff:7f00:0001\t127\.0\.0\.1 \tv2\t\S+$`, lines[3])
			assert.Equal(t, "n_gids_found=2", lines[4])
		}},
		{"counters", []string{"-counters"}, func(t *testing.T, out string) {
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			assert.Equal(t, "link goroce0/1", lines[0])
			assert.Equal(t, "    sent_pkts 0", lines[1])
			for _, l := range lines[1:] {
				assert.Regexp(t, `^    [a-z_]+ 0$`, l)
			}
		}},
		{"list", []string{"-l"}, func(t *testing.T, out string) {
			assert.Equal(t, "1 HCA found:\n\tgoroce0\n\n", out)
		}},
		{"another address", []string{"-d", "127.0.0.3", "-v"}, func(t *testing.T, out string) {
			assert.Contains(t, out, "\t\t\tGID[  1]:\t\t::ffff:127.0.0.3, RoCE v2\n")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := runDevinfo(t, tc.args...)
			require.Equal(t, 0, code, stderr)
			assert.Empty(t, stderr)
			tc.check(t, out)
		})
	}
}

func TestDevinfoErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no such port", []string{"-i", "2"}, 4, "Invalid port requested for device"},
		{"device name instead of address", []string{"-d", "rxe0"}, 2, "want the IP address of the device"},
		{"unknown flag", []string{"-x"}, 2, "flag provided but not defined: -x"},
		{"operand", []string{"extra"}, 2, `unknown object "extra": want res (resource) or statistic`},
		{"unknown resource", []string{"res", "show", "srq"}, 2, `res show "srq": want one of qp, cq, mr, pd`},
		{"a filter", []string{"res", "show", "qp", "lqpn", "7"}, 2, `unexpected "lqpn" (filters are not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runDevinfo(t, tc.args...)
			assert.Equal(t, tc.code, code)
			assert.Contains(t, stderr, tc.stderr)
		})
	}
}

// TestDevinfoPortInUse holds a UDP port and asks for a device on it: with
// the default port roce-devinfo falls back to an ephemeral one and says so,
// with a port the user named it fails and says why.
func TestDevinfoPortInUse(t *testing.T) {
	held, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	require.NoError(t, err)
	defer held.Close()
	port := uint16(held.LocalAddr().(*net.UDPAddr).Port)
	addr := netip.MustParseAddr("127.0.0.1")

	var stderr bytes.Buffer
	dev, err := openDevice(config{addr: addr, udpPort: port}, &stderr)
	require.NoError(t, err)
	defer dev.Close()
	assert.NotEqual(t, port, dev.LocalAddr().Port())
	assert.Contains(t, stderr.String(), "UDP port "+strconv.Itoa(int(port))+" of 127.0.0.1 is in use")

	_, err = openDevice(config{addr: addr, udpPort: port, portExplicit: true}, &stderr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "address already in use")
	assert.Contains(t, err.Error(), "try another -d address or -udp-port")

	code, _, errOut := runDevinfo(t, "-udp-port", strconv.Itoa(int(port)))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "address already in use")
}

// -counters shows the counters a running device publishes on -d's address
// and -udp-port; without one, a fresh device's (and says so).
func TestCountersOfARunningDevice(t *testing.T) {
	t.Setenv("GOROCE_RUN_DIR", t.TempDir())
	network := memlink.NewNetwork()
	be, err := network.Attach(netip.MustParseAddrPort("127.0.0.9:4791"))
	require.NoError(t, err)
	dev, err := device.New(device.Config{Name: "goroce0", Backend: be})
	require.NoError(t, err)
	defer dev.Close()
	dev.Counters.SentPkts.Add(5)
	dev.Counters.RetransmittedPkts.Add(2)
	require.NoError(t, dev.Publish(""))

	code, out, errOut := runDevinfo(t, "-d", "127.0.0.9", "-udp-port", "4791", "-counters")
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut)
	assert.True(t, strings.HasPrefix(out, "link goroce0/1\n    sent_pkts 5\n"), out)
	assert.Contains(t, out, "\n    retransmitted_pkts 2\n")

	code, out, errOut = runDevinfo(t, "-d", "127.0.0.10", "-udp-port", "47910", "-counters")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "no running goroce device publishes counters for 127.0.0.10:47910")
	assert.Contains(t, out, "    sent_pkts 0\n")
}

// -counters believes only a run directory and a socket of the user's: in
// a directory others may write to, or from a socket another user serves,
// the counters could be anyone's, and roce-devinfo says so and fails
// rather than print them (or a fresh device's zeros in their place).
func TestCountersRefusesUntrustedSources(t *testing.T) {
	const fake = "goroce-device 2\nname fake\naddr 127.0.0.9:4791\npid 1\ncounter sent_pkts 99\n"
	args := []string{"-d", "127.0.0.9", "-udp-port", "4791", "-counters"}
	t.Run("a world-writable run directory", func(t *testing.T) {
		dir := t.TempDir()
		t.Setenv("GOROCE_RUN_DIR", dir)
		rundirtest.Serve(t, device.PublishPath(dir, netip.MustParseAddrPort("127.0.0.9:4791")), fake)
		require.NoError(t, os.Chmod(dir, 0o777))
		code, out, errOut := runDevinfo(t, args...)
		assert.Equal(t, 1, code)
		assert.NotContains(t, out, "sent_pkts")
		assert.Contains(t, errOut, "roce-devinfo: -counters: read counters: run directory "+dir+" has mode 0777")
		assert.Contains(t, errOut, "GOROCE_RUN_DIR")
	})
	t.Run("a socket another user serves", func(t *testing.T) {
		dir := t.TempDir()
		t.Setenv("GOROCE_RUN_DIR", dir)
		path := device.PublishPath(dir, netip.MustParseAddrPort("127.0.0.9:4791"))
		rundirtest.ForeignSocket(t, path, fake)
		code, out, errOut := runDevinfo(t, args...)
		assert.Equal(t, 1, code)
		assert.NotContains(t, out, "sent_pkts 99")
		assert.Contains(t, errOut, "is served by uid 65534, not by you")
	})
}
