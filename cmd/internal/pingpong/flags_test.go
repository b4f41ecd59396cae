package pingpong

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
)

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want func(*options)
	}{
		{"defaults", nil, func(*options) {}},
		{"short with separate args", []string{"-p", "1234", "-s", "64", "-n", "10", "-g", "1"},
			func(o *options) { o.port, o.size, o.iters, o.gidIdx = 1234, 64, 10, 1 }},
		{"attached args and clusters", []string{"-s64", "-ecg1"},
			func(o *options) { o.size, o.events, o.chk, o.gidIdx = 64, true, true, 1 }},
		{"server operand anywhere (GNU permutation)", []string{"-g", "1", "10.0.0.1", "-s", "8"},
			func(o *options) { o.gidIdx, o.server, o.size = 1, "10.0.0.1", 8 }},
		{"long options and a unique prefix", []string{"--size=128", "--iters", "5", "--gid=1", "--mtu=4096"},
			func(o *options) { o.size, o.iters, o.gidIdx, o.mtu = 128, 5, 1, rocev2.MTU4096 }},
		{"strtol bases", []string{"-s", "0x100", "-r", "010"},
			func(o *options) { o.size, o.rxDepth = 256, 8 }},
		{"goroce options with one or two dashes", []string{"-udp-port", "5000", "--stats", "-timeout=3s"},
			func(o *options) { o.udpPort, o.stats, o.timeout = 5000, true, 3*time.Second }},
		{"-- ends options", []string{"-e", "--", "-host"},
			func(o *options) { o.events, o.server = true, "-host" }},
		{"accepted for compatibility", []string{"-l", "3", "-o", "-i", "1"},
			func(o *options) { o.sl, o.odp = 3, true }},
		{"rdma-core's -O, -P and -N", []string{"-O", "-P", "-N"},
			func(o *options) { o.odp, o.prefetch, o.newSend = true, true, true }},
		{"and their long names", []string{"--iodp", "--prefetch", "--new_send"},
			func(o *options) { o.odp, o.prefetch, o.newSend = true, true, true }},
		{"the backend and its interface", []string{"-backend", "afpacket", "-i", "veth0"},
			func(o *options) { o.backend, o.iface = "afpacket", "veth0" }},
		{"the interface by its long name", []string{"--backend=udp", "-iface", "eth1", "-i", "1"},
			func(o *options) { o.backend, o.iface = "udp", "eth1" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			got, err := RC.parseFlags("rc_pingpong", tc.args, &stderr)
			require.NoError(t, err, stderr.String())
			want := RC.defaultOptions()
			tc.want(&want)
			assert.Equal(t, want, got)
		})
	}
}

func TestParseFlagsErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"unknown short", []string{"-x"}, "invalid option -- 'x'"},
		{"unknown long", []string{"--frobnicate"}, "unrecognized option '--frobnicate'"},
		{"ambiguous prefix", []string{"--s=1"}, "is ambiguous"},
		{"missing argument", []string{"-s"}, "option requires an argument -- 's'"},
		{"missing long argument", []string{"--size"}, "option '--size' requires an argument"},
		{"argument to a flag", []string{"--events=1"}, "doesn't allow an argument"},
		{"MTU not an IB MTU", []string{"-m", "1500"}, "invalid MTU 1500"},
		{"port too large", []string{"-p", "70000"}, "invalid value '70000' for --port"},
		{"ib port 0", []string{"-i", "0"}, "for --ib-port"},
		{"not a number", []string{"-n", "many"}, "invalid value 'many'"},
		{"two servers", []string{"a", "b"}, ""},
		{"unknown backend", []string{"-backend", "dpdk"}, "use udp, afpacket, shm or auto"},
		// A free port (roce-perf -port 0) cannot be told to the peer.
		{"UDP port 0", []string{"-udp-port", "0"}, "invalid value '0' for --udp-port (want a number from 1 to 65535)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			_, err := RC.parseFlags("rc_pingpong", tc.args, &stderr)
			require.ErrorIs(t, err, errUsage)
			assert.Contains(t, stderr.String(), tc.stderr)
		})
	}
}

// TestRunUsage checks the exit statuses and that usage goes to stdout, as
// the original prints it.
func TestRunUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"-h"}, 0},
		{[]string{"--help"}, 0},
		{[]string{"-q"}, 1},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, tc.code, Main(RC, "rc_pingpong", tc.args, &stdout, &stderr), tc.args)
		assert.Contains(t, stdout.String(), "Usage:\n  rc_pingpong            start a server", tc.args)
		assert.Contains(t, stdout.String(), "-udp-port", tc.args)
	}
}

func TestRunBadDevice(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 1, Main(RC, "rc_pingpong", []string{"-d", "rxe0"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "IB device rxe0 not found")
	assert.Contains(t, stderr.String(), "-d takes the IP address")
	assert.Contains(t, stderr.String(), "or goroce0 for the default one")

	// An address of no interface here: said so, not taken for a busy port.
	stderr.Reset()
	assert.Equal(t, 1, Main(RC, "rc_pingpong", []string{"-d", "192.0.2.77"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "192.0.2.77 is not an address of this host")
	assert.NotContains(t, stderr.String(), "UDP port")
}

// -d goroce0, the name every tool prints for its device, is the default
// device: a client with it gets as far as connecting to its server.
func TestRunDeviceName(t *testing.T) {
	var stdout, stderr bytes.Buffer
	port := strconv.Itoa(freeTCPPort(t))
	args := []string{"-d", "goroce0", "-g", "1", "-udp-port", strconv.Itoa(freeUDPPort(t)), "-p", port, "-timeout", "5s", "127.0.0.1"}
	assert.Equal(t, 1, Main(RC, "rc_pingpong", args, &stdout, &stderr))
	assert.NotContains(t, stderr.String(), "not found")
	assert.Contains(t, stderr.String(), "Couldn't connect to 127.0.0.1:"+port)
}

// rc_pingpong's own checks of its memory options, in its words.
func TestRunMemoryOptions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-P"}, "prefetch is valid only with on-demand memory region"},
		{[]string{"-o", "-j"}, "DM memory region can't be on demand"},
		{[]string{"-O", "-j"}, "DM memory region can't be on demand"},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 1, Main(RC, "rc_pingpong", tc.args, &stdout, &stderr), tc.args)
		assert.Contains(t, stderr.String(), tc.want, tc.args)
	}
}

func TestRunUnsupported(t *testing.T) {
	for _, tc := range []struct {
		flag, want string
	}{
		{"-t", "The device isn't completion timestamp capable"},
		{"-j", "Device doesn't support dm allocation"},
	} {
		var stdout, stderr bytes.Buffer
		args := []string{tc.flag, "-d", "127.0.0.1", "-udp-port", strconv.Itoa(freeUDPPort(t))}
		assert.Equal(t, 1, Main(RC, "rc_pingpong", args, &stdout, &stderr), tc.flag)
		assert.Contains(t, stderr.String(), tc.want, tc.flag)
	}
}
