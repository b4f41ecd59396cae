package perftest

import (
	"bufio"
	"bytes"
	"fmt"
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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/race"
	"github.com/goroce/goroce/rocev2/device"
)

// procWait bounds every wait for a process: a line, or its exit.
const procWait = 90 * time.Second

var (
	builtMu sync.Mutex
	built   = map[string]string{}
)

// buildTool builds test's program once per directory, with the race detector
// when the test runs with it, so that the two-process runs check the
// device too.
func buildTool(t *testing.T, test *Test, dir string) string {
	t.Helper()
	builtMu.Lock()
	defer builtMu.Unlock()
	bin := filepath.Join(dir, test.name)
	if built[bin] != "" {
		return bin
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build "+test.name+" with:", err)
	}
	args := []string{"build", "-o", bin}
	if race.Enabled {
		args = append(args, "-race")
	}
	out, err := exec.Command(goTool, append(args, "github.com/goroce/goroce/cmd/"+test.name)...).CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	built[bin] = bin
	return bin
}

// proc is a running tool.
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

// waitLine waits for a line of stdout that contains s.
func (p *proc) waitLine(t *testing.T, s string) {
	t.Helper()
	timer := time.NewTimer(procWait)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				<-p.done
				require.FailNow(t, fmt.Sprintf("exited before printing %q", s), "%s", p.output())
			}
			if strings.Contains(l, s) {
				return
			}
		case <-timer.C:
			require.FailNow(t, fmt.Sprintf("no %q line within %v", s, procWait), "%s", p.output())
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
		require.FailNow(t, fmt.Sprintf("still running after %v: killed", procWait), "%s", p.output())
	}
	return p.cmd.ProcessState.ExitCode()
}

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

var (
	addrRe  = regexp.MustCompile(`(?m)^ (local|remote) address: LID 0000 QPN (0x[0-9a-f]{4,6}) PSN (0x[0-9a-f]+|0+)`)
	bwRe    = regexp.MustCompile(`(?m)^ (\d+) +(\d+) +(\d+\.\d\d) +(\d+\.\d\d) *\t\t   (\d+\.\d{6})$`)
	latRe   = regexp.MustCompile(`(?m)^ (\d+) +(\d+) +(\d+\.\d\d) +(\d+\.\d\d) +(\d+\.\d\d) +\t +(\d+\.\d\d) +\t(\d+\.\d\d) *\t\t(\d+\.\d\d) *\t\t(\d+\.\d\d) *$`)
	durRe   = regexp.MustCompile(`(?m)^ (\d+) +(\d+) +(\d+\.\d\d) +(\d+\.\d\d) *$`)
	gidLine = " GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:00:00:0"
)

// TestToolsProcesses runs a server and a client of each program as two
// processes over the UDP backend, as one would run perftest on two hosts,
// and checks what each prints: the addresses (each side's remote the
// other's local), and a result line for every message size.
func TestToolsProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the perftest processes")
	}
	dir := t.TempDir()
	pow2 := func(max int) (s []int) {
		for n := 2; n <= max; n *= 2 {
			s = append(s, n)
		}
		return s
	}
	for _, tc := range []struct {
		test  *Test
		args  []string
		sizes []int // the sizes of the result lines
		iters int   // 0: a duration run
	}{
		{SendBW, []string{"-n", "200", "-s", "4096"}, []int{4096}, 200},
		{SendBW, []string{"-n", "200", "-s", "1024", "-c", "UC"}, []int{1024}, 200},
		{SendBW, []string{"-n", "200", "-s", "1024", "-c", "UD"}, []int{1024}, 200},
		{SendBW, []string{"-n", "20", "-a", "-c", "UD"}, pow2(4096), 20},
		{SendBW, []string{"-n", "200", "-s", "4096", "-e", "-q", "2"}, []int{4096}, 400},
		{WriteBW, []string{"-n", "200", "-s", "4096"}, []int{4096}, 200},
		{WriteBW, []string{"-n", "200", "-s", "4096", "-c", "UC", "-q", "3"}, []int{4096}, 600},
		{WriteBW, []string{"-D", "2", "-s", "4096"}, []int{4096}, 0},
		{ReadBW, []string{"-n", "200", "-s", "4096", "-o", "4"}, []int{4096}, 200},
		{AtomicBW, []string{"-n", "200"}, []int{8}, 200},
		{AtomicBW, []string{"-n", "200", "-A", "CMP_AND_SWAP"}, []int{8}, 200},
		{SendLat, []string{"-n", "200"}, []int{2}, 200},
		{SendLat, []string{"-n", "200", "-s", "1024", "-c", "UC", "-e"}, []int{1024}, 200},
		{SendLat, []string{"-n", "20", "-a", "-c", "UD"}, pow2(4096), 20},
		{WriteLat, []string{"-n", "200", "-s", "64"}, []int{64}, 200},
		{WriteLat, []string{"-n", "200", "-c", "UC"}, []int{2}, 200},
		{ReadLat, []string{"-n", "200", "-s", "4096"}, []int{4096}, 200},
		{ReadLat, []string{"-D", "2"}, []int{2}, 0},
		// Through the RDMA CM: the channel (-z), and the QPs too (-R).
		{SendBW, []string{"-n", "200", "-s", "4096", "-R"}, []int{4096}, 200},
		{SendBW, []string{"-n", "200", "-s", "4096", "-R", "-q", "2"}, []int{4096}, 400},
		{SendBW, []string{"-n", "200", "-s", "4096", "-z"}, []int{4096}, 200},
		{ReadBW, []string{"-n", "200", "-s", "4096", "-o", "4", "-R"}, []int{4096}, 200},
		{WriteLat, []string{"-n", "200", "-s", "64", "-R"}, []int{64}, 200},
		{SendLat, []string{"-n", "200", "-R"}, []int{2}, 200},
	} {
		t.Run(tc.test.name+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			bin := buildTool(t, tc.test, dir)
			common := append([]string{"-p", strconv.Itoa(freeTCPPort(t)), "-udp-port", strconv.Itoa(freeUDPPort(t)), "--timeout", "60s"}, tc.args...)
			srv := start(t, bin, append([]string{"-d", serverAddr}, common...)...)
			srv.waitLine(t, "Waiting for client to connect")
			cli := start(t, bin, append([]string{"-d", clientAddr}, append(common, serverAddr)...)...)
			require.Equal(t, 0, cli.exit(t), cli.output())
			require.Equal(t, 0, srv.exit(t), srv.output())

			// Each side's remote addresses are the other's local ones.
			addrs := func(out string) (local, remote []string) {
				for _, m := range addrRe.FindAllStringSubmatch(out, -1) {
					if m[1] == "local" {
						local = append(local, m[2]+" "+m[3])
					} else {
						remote = append(remote, m[2]+" "+m[3])
					}
				}
				return local, remote
			}
			sl, sr := addrs(srv.out())
			cl, cr := addrs(cli.out())
			require.NotEmpty(t, sl, srv.output())
			assert.Equal(t, sl, cr)
			assert.Equal(t, cl, sr)
			assert.Contains(t, srv.out(), gidLine+"1\n")
			assert.Contains(t, cli.out(), gidLine+"2\n")

			// The result lines: the client's (and send_lat's and
			// write_lat's server's, and send_bw's server's) for every
			// size; write_bw's, read_bw's and atomic_bw's server prints
			// the client's last; read_lat's server takes no part in the
			// test and prints none.
			check := func(out string, sizes []int) {
				t.Helper()
				var re *regexp.Regexp
				switch {
				case tc.test.kind == BW:
					re = bwRe
				case tc.iters == 0:
					re = durRe
				default:
					re = latRe
				}
				lines := re.FindAllStringSubmatch(out, -1)
				require.Len(t, lines, len(sizes), out)
				for i, m := range lines {
					assert.Equal(t, strconv.Itoa(sizes[i]), m[1])
					n, _ := strconv.Atoi(m[2])
					if tc.iters > 0 {
						assert.Equal(t, tc.iters, n, m[0])
					} else {
						assert.Positive(t, n, m[0])
					}
				}
			}
			check(cli.out(), tc.sizes)
			switch {
			case tc.test == ReadLat:
				check(srv.out(), nil)
			case tc.test.kind == BW && tc.test.verb != Send:
				check(srv.out(), tc.sizes[len(tc.sizes)-1:])
			default:
				check(srv.out(), tc.sizes)
			}
		})
	}
}

// SIGTERM ends a server waiting for its client with 128+signal, and
// leaves no counter socket behind in the run directory.
func TestSignalLeavesNoSocket(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs an ib_write_bw process")
	}
	bin := buildTool(t, WriteBW, t.TempDir())
	run := t.TempDir()
	t.Setenv("GOROCE_RUN_DIR", run)
	udpPort := freeUDPPort(t)
	srv := start(t, bin, "-d", serverAddr, "-p", strconv.Itoa(freeTCPPort(t)), "-udp-port", strconv.Itoa(udpPort))
	srv.waitLine(t, "Waiting for client to connect")
	sock := device.PublishPath(run, netip.AddrPortFrom(netip.MustParseAddr(serverAddr), uint16(udpPort)))
	require.FileExists(t, sock, "the server publishes its counters")
	require.NoError(t, srv.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 143, srv.exit(t), srv.output())
	assert.NoFileExists(t, sock)
}

// A server listens on its device's address: servers on two loopback
// addresses share a control port, and a third on a taken address and port
// says which port to change.
func TestServersOnTwoAddresses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs perftest processes")
	}
	bin := buildTool(t, WriteBW, t.TempDir())
	tcpPort, udpPort := strconv.Itoa(freeTCPPort(t)), strconv.Itoa(freeUDPPort(t))
	for _, addr := range []string{serverAddr, clientAddr} {
		srv := start(t, bin, "-d", addr, "-p", tcpPort, "-udp-port", udpPort, "--timeout", "60s")
		srv.waitLine(t, "Waiting for client to connect")
	}
	third := start(t, bin, "-d", serverAddr, "-p", tcpPort, "-udp-port", strconv.Itoa(freeUDPPort(t)))
	require.NotEqual(t, 0, third.exit(t), third.output())
	assert.Contains(t, third.output(), "TCP control port "+tcpPort+" on "+serverAddr+" is in use")
	assert.NotContains(t, third.output(), "UDP port", "not taken for the RoCE port")
}
