package pingpong

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goroce/goroce/internal/race"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2/device"
)

// Addresses of the two ends: two loopback addresses, so that both devices
// can bind the same UDP port as RoCEv2 peers do.
const (
	serverAddr = "127.0.0.1"
	clientAddr = "127.0.0.2"
	// procWait bounds every wait for a process: a line, or its exit.
	procWait = 60 * time.Second
)

// buildBinary builds the program of kind k into dir, with the race
// detector when the test runs with it, so that the two-process runs check
// the device too.
func buildBinary(t *testing.T, k *Kind, dir string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build "+k.name+" with:", err)
	}
	bin := filepath.Join(dir, k.name)
	args := []string{"build", "-o", bin}
	if race.Enabled {
		args = append(args, "-race")
	}
	out, err := exec.Command(goTool, append(args, "github.com/goroce/goroce/cmd/"+k.name)...).CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// proc is a running rc_pingpong.
type proc struct {
	cmd    *exec.Cmd
	lines  chan string // stdout, line by line; closed at EOF
	mu     sync.Mutex
	stdout bytes.Buffer
	stderr bytes.Buffer // written by exec until exit
	done   chan struct{}
}

// start runs bin with args; the test's cleanup kills it if it still runs.
func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), lines: make(chan string, 1024), done: make(chan struct{})}
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.stdout.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default: // nobody waits for lines this far in
			}
		}
		close(p.lines)
		p.cmd.Wait() // after the last read, as exec requires
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// waitLine returns the first line of stdout that starts with prefix.
func (p *proc) waitLine(t *testing.T, prefix string) string {
	t.Helper()
	timer := time.NewTimer(procWait)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				<-p.done
				require.FailNow(t, fmt.Sprintf("rc_pingpong exited before printing %q", prefix), "%s", p.output())
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timer.C:
			require.FailNow(t, fmt.Sprintf("no %q line within %v", prefix, procWait), "%s", p.output())
		}
	}
}

// exit waits for the process to end and returns its exit status.
func (p *proc) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(procWait):
		p.cmd.Process.Kill()
		<-p.done
		require.FailNow(t, fmt.Sprintf("rc_pingpong still running after %v: killed", procWait), "%s", p.output())
	}
	return p.cmd.ProcessState.ExitCode()
}

// output is stdout and stderr, for failure messages; call it after exit.
func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return "stdout:\n" + p.stdout.String() + "stderr:\n" + p.stderr.String()
}

func (p *proc) out() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String()
}

// freeTCPPort returns a TCP port nobody listens on right now.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", ":0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// freeUDPPort returns a UDP port that is free on both loopback addresses.
func freeUDPPort(t *testing.T) int {
	t.Helper()
	for range 20 {
		a, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(serverAddr+":0")))
		require.NoError(t, err)
		port := a.LocalAddr().(*net.UDPAddr).Port
		b, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(clientAddr), Port: port})
		a.Close()
		if err == nil {
			b.Close()
			return port
		}
	}
	require.FailNow(t, "no UDP port free on both "+serverAddr+" and "+clientAddr)
	return 0
}

var (
	addrLine    = regexp.MustCompile(`^  (local|remote) address: {1,2}LID 0x0000, QPN 0x([0-9a-f]{6}), PSN 0x([0-9a-f]{6})[,:] GID (\S+)$`)
	bytesLine   = regexp.MustCompile(`^(\d+) bytes in \d+\.\d\d seconds = \d+\.\d\d Mbit/sec$`)
	itersLine   = regexp.MustCompile(`^(\d+) iters in \d+\.\d\d seconds = \d+\.\d\d usec/iter$`)
	counterLine = regexp.MustCompile(`(?m)^    sent_pkts (\d+)$`)
)

// checkRun checks one side's output: its nqp local and remote address
// lines, and the summary lines with the byte and iteration counts of the
// run. It returns the address lines' fields.
func checkRun(t *testing.T, k *Kind, out string, size, iters, nqp int, localGID, remoteGID string) (local, remote [][]string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.GreaterOrEqual(t, len(lines), 2*nqp+2, out)
	for i := range nqp {
		l := addrLine.FindStringSubmatch(lines[i])
		r := addrLine.FindStringSubmatch(lines[nqp+i])
		require.NotNil(t, l, "local address line: %q", lines[i])
		require.NotNil(t, r, "remote address line: %q", lines[nqp+i])
		assert.Equal(t, "local", l[1])
		assert.Equal(t, "remote", r[1])
		assert.Equal(t, localGID, l[4])
		assert.Equal(t, remoteGID, r[4])
		if k == UD {
			assert.Contains(t, lines[i], ": GID", "ud_pingpong's local line has a colon")
		}
		local, remote = append(local, l), append(remote, r)
	}
	b := bytesLine.FindStringSubmatch(lines[2*nqp])
	require.NotNil(t, b, "bytes line: %q", lines[2*nqp])
	assert.Equal(t, strconv.Itoa(size*iters*2), b[1])
	n := itersLine.FindStringSubmatch(lines[2*nqp+1])
	require.NotNil(t, n, "iters line: %q", lines[2*nqp+1])
	assert.Equal(t, strconv.Itoa(iters), n[1])
	return local, remote
}

// TestPingPongProcesses runs a server and a client of each program as two
// processes over the UDP backend, as one would run the originals on two
// hosts, with -c checking every byte (and for UD the GRH area).
func TestPingPongProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the pingpong processes")
	}
	dir := t.TempDir()
	const iters = 200
	for _, tc := range []struct {
		k      *Kind
		size   int
		events bool
		extra  []string
	}{
		{k: RC, size: 1}, {k: RC, size: 1, events: true}, {k: RC, size: 1024}, {k: RC, size: 1024, events: true},
		{k: RC, size: 4096}, {k: RC, size: 4096, events: true}, {k: RC, size: 65536}, {k: RC, size: 65536, events: true},
		{k: UC, size: 1}, {k: UC, size: 4096, events: true}, {k: UC, size: 65536},
		{k: UD, size: 1}, {k: UD, size: 2048, events: true}, {k: UD, size: 4096},
		{k: SRQ, size: 1, extra: []string{"-q", "4"}}, {k: SRQ, size: 4096, events: true, extra: []string{"-q", "16"}},
	} {
		t.Run(fmt.Sprintf("%s/size=%d/events=%v", tc.k.name, tc.size, tc.events), func(t *testing.T) {
			bin := buildOnce(t, tc.k, dir)
			tcpPort, udpPort := strconv.Itoa(freeTCPPort(t)), strconv.Itoa(freeUDPPort(t))
			common := append([]string{"-g", "1", "-c", "-p", tcpPort, "-udp-port", udpPort,
				"-s", strconv.Itoa(tc.size), "-n", strconv.Itoa(iters), "-timeout", "30s"}, tc.extra...)
			if tc.events {
				common = append(common, "-e")
			}
			srv := start(t, bin, append([]string{"-d", serverAddr, "-stats"}, common...)...)
			srv.waitLine(t, "  local address:") // printed once the server listens
			cli := start(t, bin, append([]string{"-d", clientAddr}, append(common, serverAddr)...)...)

			require.Equal(t, 0, cli.exit(t), cli.output())
			require.Equal(t, 0, srv.exit(t), srv.output())
			nqp := 1
			if tc.k.srq {
				nqp, _ = strconv.Atoi(tc.extra[1])
			}
			cl, cr := checkRun(t, tc.k, cli.out(), tc.size, iters, nqp, "::ffff:"+clientAddr, "::ffff:"+serverAddr)
			sl, sr := checkRun(t, tc.k, srv.out(), tc.size, iters, nqp, "::ffff:"+serverAddr, "::ffff:"+clientAddr)
			for i := range nqp {
				assert.Equal(t, sl[i][2:4], cr[i][2:4], "the client's remote QPN and PSN are the server's")
				assert.Equal(t, cl[i][2:4], sr[i][2:4], "the server's remote QPN and PSN are the client's")
			}
			assert.NotContains(t, cli.out()+srv.out(), "invalid")

			// -stats: the counters in rdma statistic's layout, after the summary.
			assert.Contains(t, srv.out(), "\nlink goroce0/1\n")
			m := counterLine.FindStringSubmatch(srv.out())
			require.NotNil(t, m, srv.out())
			sent, _ := strconv.Atoi(m[1])
			assert.GreaterOrEqual(t, sent, iters, "at least one packet per message")
		})
	}
}

var (
	builtMu sync.Mutex
	built   = map[string]string{}
)

// buildOnce builds the program of kind k into dir once.
func buildOnce(t *testing.T, k *Kind, dir string) string {
	builtMu.Lock()
	defer builtMu.Unlock()
	key := dir + "/" + k.name
	if bin, ok := built[key]; ok {
		return bin
	}
	bin := buildBinary(t, k, dir)
	built[key] = bin
	return bin
}

// TestPingPongFailures checks that failures end the process with status 1
// and a message that says what went wrong, within a bounded time.
func TestPingPongFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs rc_pingpong processes")
	}
	bin := buildOnce(t, RC, t.TempDir())

	t.Run("server unreachable", func(t *testing.T) {
		port := strconv.Itoa(freeTCPPort(t))
		cli := start(t, bin, "-g", "1", "-d", clientAddr, "-udp-port", strconv.Itoa(freeUDPPort(t)), "-p", port, serverAddr)
		require.Equal(t, 1, cli.exit(t), cli.output())
		assert.Contains(t, cli.output(), "Couldn't connect to "+serverAddr+":"+port)
	})

	t.Run("no GID", func(t *testing.T) {
		// Without -g the server gets no GID from the client and cannot
		// build a GRH: as with the original on RoCE, RTR fails.
		tcpPort, udpPort := strconv.Itoa(freeTCPPort(t)), strconv.Itoa(freeUDPPort(t))
		srv := start(t, bin, "-g", "1", "-d", serverAddr, "-p", tcpPort, "-udp-port", udpPort)
		srv.waitLine(t, "  local address:")
		cli := start(t, bin, "-d", clientAddr, "-p", tcpPort, "-udp-port", udpPort, serverAddr)
		require.Equal(t, 1, srv.exit(t), srv.output())
		require.Equal(t, 1, cli.exit(t), cli.output())
		assert.Contains(t, srv.output(), "Failed to modify QP to RTR")
		assert.Contains(t, srv.output(), "Couldn't connect to remote QP")
		assert.Contains(t, srv.output(), "run it with -g 1 too")
		assert.Contains(t, cli.output(), "Couldn't read/write remote address")
		assert.Contains(t, cli.output(), "use -g 1")
	})

	t.Run("peer QP never answers", func(t *testing.T) {
		// A fake server completes the exchange but has no device: the
		// client's first SEND is never acknowledged, and after retry_cnt 7
		// retries of timeout 14 (67 ms) it completes in error.
		ln, err := net.Listen("tcp", serverAddr+":0")
		require.NoError(t, err)
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		fake := dest{qpn: 0x99, psn: 1, gid: device.GIDFromAddr(netip.MustParseAddr(serverAddr))}
		go serverExchange(ln, []dest{fake}, procWait, func([]dest) error { return nil })
		cli := start(t, bin, "-g", "1", "-d", clientAddr, "-udp-port", strconv.Itoa(freeUDPPort(t)), "-p", port, serverAddr)
		require.Equal(t, 1, cli.exit(t), cli.output())
		assert.Contains(t, cli.output(), "Failed status transport retry counter exceeded (12) for wr_id 2")
		assert.Contains(t, cli.output(), "parse WC failed")
	})
}

// ud_pingpong refuses a size above the port's MTU, as the original does.
func TestUDSizeAboveMTU(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"-g", "1", "-d", "127.0.0.1", "-udp-port", strconv.Itoa(freeUDPPort(t)), "-s", "4097"}
	assert.Equal(t, 1, Main(UD, "ud_pingpong", args, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "Requested size larger than port MTU (4096)")
}

// srq_pingpong refuses fewer receives than QPs, and 256 QPs or more.
func TestSRQCounts(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-q", "8", "-r", "4"}, "rx_depth 4 is too small for 8 QPs -- must have at least one receive per QP."},
		{[]string{"-q", "256", "-r", "500"}, "num_qp 256 must be less than 256"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"-g", "1", "-d", "127.0.0.1", "-udp-port", strconv.Itoa(freeUDPPort(t))}, tc.args...)
		assert.Equal(t, 1, Main(SRQ, "srq_pingpong", args, &stdout, &stderr))
		assert.Contains(t, stderr.String(), tc.want)
	}
}

func TestRouteSource(t *testing.T) {
	a, err := routeSource(serverAddr, 18515)
	require.NoError(t, err)
	assert.True(t, a.IsLoopback(), "the route to %s leaves from %v", serverAddr, a)
}

// SIGTERM and SIGINT end a server waiting for its client with 128+signal,
// as they end the original, and leave no counter socket behind in the run
// directory.
func TestSignalLeavesNoSocket(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs pingpong processes")
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		k      *Kind
		sig    syscall.Signal
		status int
	}{
		{RC, syscall.SIGTERM, 143}, {RC, syscall.SIGINT, 130}, {UD, syscall.SIGTERM, 143},
	} {
		t.Run(tc.k.name+"/"+tc.sig.String(), func(t *testing.T) {
			bin := buildOnce(t, tc.k, dir)
			run := t.TempDir()
			t.Setenv("GOROCE_RUN_DIR", run)
			udpPort := freeUDPPort(t)
			srv := start(t, bin, "-g", "1", "-d", serverAddr, "-p", strconv.Itoa(freeTCPPort(t)), "-udp-port", strconv.Itoa(udpPort))
			srv.waitLine(t, "  local address:")
			sock := device.PublishPath(run, netip.AddrPortFrom(netip.MustParseAddr(serverAddr), uint16(udpPort)))
			require.FileExists(t, sock, "the server publishes its counters")
			require.NoError(t, srv.cmd.Process.Signal(tc.sig))
			assert.Equal(t, tc.status, srv.exit(t), srv.output())
			assert.NoFileExists(t, sock)
		})
	}
}

// A server listens for its client on its device's address, not on every
// address: servers on two loopback addresses share a control port (as
// they share the RoCEv2 UDP port), and a third on a taken address and
// port says which port to change.
func TestServersOnTwoAddresses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs rc_pingpong processes")
	}
	bin := buildOnce(t, RC, t.TempDir())
	tcpPort, udpPort := strconv.Itoa(freeTCPPort(t)), strconv.Itoa(freeUDPPort(t))
	for _, addr := range []string{serverAddr, clientAddr} {
		srv := start(t, bin, "-g", "1", "-d", addr, "-p", tcpPort, "-udp-port", udpPort, "-timeout", "60s")
		srv.waitLine(t, "  local address:") // printed once it listens
	}
	third := start(t, bin, "-g", "1", "-d", serverAddr, "-p", tcpPort, "-udp-port", strconv.Itoa(freeUDPPort(t)))
	require.Equal(t, 1, third.exit(t), third.output())
	assert.Contains(t, third.output(), "Couldn't listen to port "+tcpPort)
	assert.Contains(t, third.output(), "TCP control port "+tcpPort+" on "+serverAddr+" is in use")
	assert.Contains(t, third.output(), "pass -p with another port")
	assert.NotContains(t, third.output(), "UDP port", "not taken for the RoCE port")
}
