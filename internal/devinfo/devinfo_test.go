package devinfo

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2/backend/memlink"
	"github.com/goroce/goroce/rocev2/device"
)

// newDevice returns a device on an in-memory link at addr.
func newDevice(t *testing.T, addr string) *device.Device {
	t.Helper()
	be, err := memlink.NewNetwork().Attach(netip.MustParseAddrPort(addr))
	require.NoError(t, err)
	d, err := device.New(device.Config{Backend: be})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

func TestGUIDString(t *testing.T) {
	for _, tc := range []struct {
		guid uint64
		want string
	}{
		{0x505400fffe96b707, "5054:00ff:fe96:b707"},
		{0, "0000:0000:0000:0000"},
		{0xffffffffffffffff, "ffff:ffff:ffff:ffff"},
	} {
		assert.Equal(t, tc.want, GUIDString(tc.guid))
	}
}

func TestSysfsGID(t *testing.T) {
	for _, tc := range []struct {
		addr, want string
	}{
		{"127.0.0.1", "0000:0000:0000:0000:0000:ffff:7f00:0001"},
		{"::1", "0000:0000:0000:0000:0000:0000:0000:0001"},
		{"fe80::200:7fff:fe00:1", "fe80:0000:0000:0000:0200:7fff:fe00:0001"},
	} {
		assert.Equal(t, tc.want, SysfsGID(device.GIDFromAddr(netip.MustParseAddr(tc.addr))), tc.addr)
	}
}

func TestWriteDevinfo(t *testing.T) {
	d := newDevice(t, "127.0.0.1:4791")
	for _, tc := range []struct {
		verbose bool
		want    []string // lines that must appear, in this order
		absent  []string
	}{
		{
			verbose: false,
			want: []string{
				"hca_id:\tgoroce0",
				"\ttransport:\t\t\tInfiniBand (0)",
				"\tnode_guid:\t\t\t" + GUIDString(d.Attr().NodeGUID),
				"\tphys_port_cnt:\t\t\t1",
				"\t\tport:\t1",
				"\t\t\tstate:\t\t\tPORT_ACTIVE (4)",
				"\t\t\tmax_mtu:\t\t4096 (5)",
				"\t\t\tport_lmc:\t\t0x00",
				"\t\t\tlink_layer:\t\tEthernet",
			},
			absent: []string{"max_qp:", "GID["},
		},
		{
			verbose: true,
			want: []string{
				"hca_id:\tgoroce0",
				"\tmax_qp:\t\t\t\t16384",
				"\tatomic_cap:\t\t\tATOMIC_HCA (1)",
				"\t\tport:\t1",
				"\t\t\tgid_tbl_len:\t\t2",
				"\t\t\tGID[  0]:\t\tfe80::",
				"\t\t\tGID[  1]:\t\t::ffff:127.0.0.1, RoCE v2",
			},
		},
	} {
		var out bytes.Buffer
		require.NoError(t, WriteDevinfo(&out, d, tc.verbose))
		assertLinesInOrder(t, out.String(), tc.want)
		for _, s := range tc.absent {
			assert.NotContains(t, out.String(), s)
		}
		assert.True(t, strings.HasSuffix(out.String(), "\n\n"), "the port block ends with an empty line")
	}
}

func TestWriteGIDs(t *testing.T) {
	d := newDevice(t, "127.0.0.1:4791")
	var out bytes.Buffer
	require.NoError(t, WriteGIDs(&out, d))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 5, out.String())
	assert.Equal(t, "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4 \t\tVER\tDEV", lines[0])
	assert.Regexp(t, `^goroce0\t1\t0\tfe80:0000:0000:0000:[0-9a-f:]{19}\t\t\tv2\t\S+$`, lines[2])
	assert.Regexp(t, `^goroce0\t1\t1\t0000:0000:0000:0000:0000:ffff:7f00:0001\t127\.0\.0\.1 \tv2\t\S+$`, lines[3])
	assert.Equal(t, "n_gids_found=2", lines[4])
}

func TestWriteCounters(t *testing.T) {
	d := newDevice(t, "127.0.0.1:4791")
	d.Counters.SentPkts.Add(7)
	var out bytes.Buffer
	require.NoError(t, WriteCounters(&out, d))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	assert.Equal(t, "link goroce0/1", lines[0])
	assert.Equal(t, "    sent_pkts 7", lines[1])
	assert.Equal(t, "    rcvd_pkts 0", lines[2])
	assert.Len(t, lines, 1+len(d.Counters.Snapshot()))
	for _, l := range lines[1:] {
		assert.Regexp(t, `^    [a-z0-9_]+ \d+$`, l)
	}
}

// assertLinesInOrder checks that every wanted line prefix starts a line of
// out, in the given order.
func assertLinesInOrder(t *testing.T, out string, want []string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	i := 0
	for _, w := range want {
		for i < len(lines) && !strings.HasPrefix(lines[i], w) {
			i++
		}
		if !assert.Less(t, i, len(lines), "line starting %q missing or out of order in:\n%s", w, out) {
			return
		}
	}
}
