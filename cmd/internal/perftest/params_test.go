package perftest

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseDefaults(t *testing.T) {
	for _, tc := range []struct {
		test                              *Test
		size, iters, tx, rx, cqMod, outRd int
	}{
		{SendBW, 65536, 1000, 128, 512, 1, 0}, // 64 KiB: above the CQ moderation limit
		{WriteBW, 65536, 5000, 128, 1, 1, 0},
		{ReadBW, 65536, 1000, 128, 1, 1, 0},
		{AtomicBW, 8, 1000, 128, 1, 100, 0},
		{SendLat, 2, 1000, 1, 512, 1, 0},
		{WriteLat, 2, 1000, 1, 1, 1, 0},
		{ReadLat, 2, 1000, 1, 1, 1, 0},
	} {
		t.Run(tc.test.Name(), func(t *testing.T) {
			p, err := tc.test.parse(nil, io.Discard)
			require.NoError(t, err)
			assert.Equal(t, tc.size, p.size)
			assert.Equal(t, tc.iters, p.iters)
			assert.Equal(t, tc.tx, p.txDepth)
			assert.Equal(t, tc.rx, p.rxDepth)
			assert.Equal(t, tc.cqMod, p.cqMod)
			assert.Equal(t, defPort, p.port)
			assert.Equal(t, RC, p.conn)
			assert.False(t, p.isClient())
		})
	}
}

func TestParseDependencies(t *testing.T) {
	parse := func(test *Test, args ...string) params {
		t.Helper()
		p, err := test.parse(args, io.Discard)
		require.NoError(t, err, "%v", args)
		return p
	}
	p := parse(WriteBW, "-n", "5", "-s", "4096", "-x", "1", "-F", "198.18.0.11")
	assert.Equal(t, 5, p.txDepth, "tx depth at most the iterations")
	assert.Equal(t, 5, p.cqMod, "CQ moderation at most the tx depth")
	assert.Equal(t, "198.18.0.11", p.server)
	assert.Equal(t, 1, p.gidIndex)

	p = parse(SendBW, "-c", "UD", "-n", "300")
	assert.Equal(t, 300, p.rxDepth, "UD: a receive for every message")
	p = parse(SendBW, "-c", "UC", "-n", "20000")
	assert.Equal(t, ucMaxRx, p.rxDepth)
	p = parse(SendBW, "-c", "UD")
	assert.Equal(t, 100, p.cqMod, "UD keeps CQ moderation for large sizes")
	p = parse(WriteBW, "-a")
	assert.Equal(t, maxSize, p.size)
	assert.Equal(t, 100, p.cqMod)
	p = parse(WriteBW, "-D", "8")
	assert.Equal(t, 8*time.Second, p.duration)
	assert.Equal(t, 2*time.Second, p.margin)
	assert.True(t, p.noPeak)
	p = parse(WriteBW, "-D", "4", "-f", "1")
	assert.Equal(t, time.Second, p.margin)
	p = parse(SendBW, "--size=1024", "--iters", "7", "-q2", "--cq-mod=3")
	assert.Equal(t, 1024, p.size)
	assert.Equal(t, 7, p.iters)
	assert.Equal(t, 2, p.numQPs)
	assert.Equal(t, 3, p.cqMod)
	p = parse(SendBW, "--conn=UD", "-udp-port", "5000", "--timeout=3s", "-stats")
	assert.Equal(t, UD, p.conn, "unique prefixes of long options")
	assert.Equal(t, uint16(5000), p.udpPort)
	assert.Equal(t, 3*time.Second, p.timeout)
	assert.True(t, p.stats)
	p = parse(AtomicBW, "-A", "CMP_AND_SWAP")
	assert.Equal(t, CmpAndSwap, p.atomic)
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		test *Test
		args []string
		bad  bool // an unknown option: usage follows
		want string
	}{
		{WriteBW, []string{"-c", "UD"}, false, "UD connection only possible in SEND verb"},
		{ReadBW, []string{"-c", "UC"}, false, "UC connection not possible in READ/ATOMIC verbs"},
		{SendBW, []string{"-c", "XRC"}, false, "not supported by goroce"},
		{SendBW, []string{"-c", "XX"}, false, "Invalid Connection type"},
		{AtomicBW, []string{"-s", "16"}, true, "invalid option -- 's'"},
		{AtomicBW, []string{"-A", "SWAP"}, false, "Invalid Atomic type"},
		{WriteBW, []string{"-e"}, false, "Events feature not available on WRITE verb"},
		{SendBW, []string{"-D", "2", "-e"}, false, "Duration mode doesn't work with events."},
		{SendBW, []string{"-D", "2", "-a"}, false, "Duration mode currently doesn't support running on all sizes."},
		{SendBW, []string{"-D", "2", "-f", "1"}, false, "Duration must be greater than two margins"},
		{SendBW, []string{"-n", "2"}, false, "Iteration num should be between 5 and"},
		{SendBW, []string{"-b"}, false, "--bidirectional is not supported by goroce"},
		{SendBW, []string{"-R", "-c", "UC"}, false, "UC is not supported in librdmacm"},
		{SendBW, []string{"-R", "-c", "UD"}, false, "-R with UD QPs is not supported by goroce"},
		{SendLat, []string{"-q", "2"}, true, "invalid option -- 'q'"},
		{SendBW, []string{"--nosuch"}, true, "unrecognized option '--nosuch'"},
		{SendBW, []string{"--r"}, true, "is ambiguous"},
		{SendBW, []string{"-s"}, false, "option requires an argument -- 's'"},
		{SendBW, []string{"a", "b"}, false, "Invalid command line"},
		{SendBW, []string{"--timeout", "soon"}, false, "invalid duration"},
		{SendBW, []string{"-udp-port", "0"}, false, "UDP port should be between 1 and 65535"}, // a free port could not be told to the peer
	} {
		t.Run(tc.test.Name()+" "+tc.want, func(t *testing.T) {
			var stderr bytes.Buffer
			_, err := tc.test.parse(tc.args, &stderr)
			require.Error(t, err)
			assert.Contains(t, stderr.String(), tc.want)
			if tc.bad {
				assert.ErrorIs(t, err, errBadOption)
			}
		})
	}
}

// Like perftest, -h and -V print and exit with status 1; a bad option
// prints the usage and perftest's words.
func TestMainUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 1, Main(SendBW, []string{"-h"}, &stdout, &stderr))
	assert.Contains(t, stdout.String(), "Usage:\n  ib_send_bw            start a server and wait for connection\n")
	assert.Contains(t, stdout.String(), "-udp-port")
	stdout.Reset()
	assert.Equal(t, 1, Main(ReadLat, []string{"-V"}, &stdout, &stderr))
	assert.Equal(t, "Version: 6.06\n", stdout.String())
	stdout.Reset()
	assert.Equal(t, 1, Main(WriteBW, []string{"-Z"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), " Invalid Command or flag.\n Please check command line and run again.\n")
	assert.Contains(t, stderr.String(), " Parser function exited with Error\n")
	assert.Contains(t, stdout.String(), "Usage:")
	stderr.Reset()
	assert.Equal(t, 1, Main(WriteBW, []string{"-d", "eth0"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "goroce's -d takes the IP address")
}
