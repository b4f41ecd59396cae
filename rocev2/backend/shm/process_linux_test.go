package shm_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/shm"
)

// Two processes: the test binary runs itself again as the peer (TestChild,
// selected by $GOROCE_SHM_CHILD), and the two talk over their stdin and
// stdout, line by line, to exchange what RC needs (rc_pingpong's way).

const (
	childEnv    = "GOROCE_SHM_CHILD"
	childDirEnv = "GOROCE_SHM_CHILD_DIR"
	parentAddr  = "127.0.0.1:4791"
	childAddr   = "127.0.0.2:4791"
	rcBufSize   = 4 << 20
)

// child is a peer process.
type child struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	mu    sync.Mutex
	out   strings.Builder // stdout and stderr, for failure messages
	done  chan struct{}
}

// startChild runs the test binary as role in dir; the cleanup kills it.
func startChild(t testing.TB, role, dir string, attr *syscall.SysProcAttr, bin string, args ...string) *child {
	t.Helper()
	if bin == "" {
		bin = os.Args[0]
	}
	c := &child{cmd: exec.Command(bin, append([]string{"-test.run=^TestChild$", "-test.v=false"}, args...)...),
		lines: make(chan string, 64), done: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), childEnv+"="+role, childDirEnv+"="+dir)
	c.cmd.SysProcAttr = attr
	var err error
	c.in, err = c.cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := c.cmd.StdoutPipe()
	require.NoError(t, err)
	c.cmd.Stderr = writerFunc(func(p []byte) { c.mu.Lock(); c.out.Write(p); c.mu.Unlock() })
	require.NoError(t, c.cmd.Start())
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.mu.Lock()
			c.out.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
			select {
			case c.lines <- sc.Text():
			default:
			}
		}
		close(c.lines)
		c.cmd.Wait()
	}()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.done
	})
	return c
}

// eventually waits, without sleeping, for what another goroutine (or
// process) does next.
var eventually = shm.Eventually

type writerFunc func([]byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

// line returns the child's next line that starts with prefix.
func (c *child) line(t testing.TB, prefix string) string {
	t.Helper()
	timer := time.NewTimer(hangGuard)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				<-c.done
				c.mu.Lock()
				defer c.mu.Unlock()
				t.Fatalf("the child ended before %q:\n%s", prefix, c.out.String())
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timer.C:
			t.Fatalf("no %q from the child", prefix)
		}
	}
}

func (c *child) say(t testing.TB, format string, args ...any) {
	t.Helper()
	_, err := fmt.Fprintf(c.in, format+"\n", args...)
	require.NoError(t, err)
}

// TestChild is the peer process's body; it does nothing in a normal run.
func TestChild(t *testing.T) {
	role := os.Getenv(childEnv)
	if role == "" {
		t.Skip("runs only as the child of a two-process test")
	}
	dir := os.Getenv(childDirEnv)
	in := bufio.NewScanner(os.Stdin)
	switch role {
	case "rc":
		childRC(t, dir, in)
	case "listen":
		be := openShm(t, dir, childAddr, shm.Config{})
		fmt.Println("READY")
		for in.Scan() {
		}
		fmt.Printf("STATS %d %d\n", be.Stats().RefusedPeers, be.Stats().Pairings)
	case "dial":
		be := openShm(t, dir, childAddr, shm.Config{NoListen: true})
		require.NoError(t, be.Send([]backend.Outgoing{{Buf: make([]byte, 64), Dst: netip.MustParseAddrPort(parentAddr)}}))
		eventually(t, "the dial ends", func() bool { return be.LinkTo(netip.MustParseAddrPort(parentAddr)) != shm.LinkConnecting })
		fmt.Printf("LINK %s %d\n", be.LinkTo(netip.MustParseAddrPort(parentAddr)), be.Stats().RefusedPeers)
	case "admitted":
		childAdmitted(t, dir, in)
	default:
		childEcho(t, role, dir, in)
	}
}

// childRC is an RC peer: it prints its QP, connects to the parent's, and
// after each SEND prints the CRC of the bytes the parent wrote before it.
func childRC(t *testing.T, dir string, in *bufio.Scanner) {
	cfg := nodeConfig{typ: qp.RC, bufSize: rcBufSize}
	n := newNode(t, openShm(t, dir, childAddr, shm.Config{}), cfg)
	fmt.Printf("QP %d %d %d %d\n", n.qp.QPN(), n.psn, n.mr.VA(), n.mr.RKey())
	require.True(t, in.Scan())
	var qpn, psn uint32
	_, err := fmt.Sscanf(in.Text(), "PEER %d %d", &qpn, &psn)
	require.NoError(t, err)
	connectRC(t, n, netip.MustParseAddrPort(parentAddr), qpn, rocev2.PSN(psn), cfg)
	for i := range 64 {
		n.postRecv(t, uint64(i), rcBufSize-64, 64)
	}
	fmt.Println("READY")
	for seq := 64; ; seq++ {
		wc := waitWC(t, n.cq, 1)[0]
		if wc.Status != cq.Success {
			fmt.Printf("WC %v\n", wc.Status)
			return
		}
		size := int(binary.BigEndian.Uint32(n.buf[rcBufSize-64:]))
		fmt.Printf("SUM %d %d\n", wc.WRID, crc32.ChecksumIEEE(n.buf[:min(size, rcBufSize-64)]))
		n.postRecv(t, uint64(seq), rcBufSize-64, 64)
	}
}

func TestKilledPeer(t *testing.T) {
	dir := runDir(t)
	c := startChild(t, "rc", dir, nil, "")
	var cqpn, cpsn, rkey uint32
	var va uint64
	_, err := fmt.Sscanf(c.line(t, "QP "), "QP %d %d %d %d", &cqpn, &cpsn, &va, &rkey)
	require.NoError(t, err)

	cfg := nodeConfig{typ: qp.RC, bufSize: rcBufSize, timeout: 12, retry: 3} // 16.8 ms, 3 retries
	be := openShm(t, dir, parentAddr, shm.Config{})
	n := newNode(t, be, cfg)
	connectRC(t, n, netip.MustParseAddrPort(childAddr), cqpn, rocev2.PSN(cpsn), cfg)
	c.say(t, "PEER %d %d", n.qp.QPN(), n.psn)
	c.line(t, "READY")

	// Data moves, byte-exact, between the processes.
	sizes := []int{1, 4096, 1 << 20, rcBufSize - 64}
	for i, size := range sizes {
		fill(n.buf[:size], uint64(i))
		binary.BigEndian.PutUint32(n.buf[rcBufSize-64:], uint32(size))
		_, err := n.qp.PostSend([]qp.SendWR{
			{WRID: 1, Opcode: qp.WRRDMAWrite, SGL: []qp.SGE{n.sge(0, size)}, RemoteAddr: va, RKey: rkey},
			{WRID: 2, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{n.sge(rcBufSize-64, 64)}},
		})
		require.NoError(t, err)
		require.Equal(t, cq.Success, waitWC(t, n.cq, 1)[0].Status)
		var wrid, sum uint32
		_, err = fmt.Sscanf(c.line(t, "SUM "), "SUM %d %d", &wrid, &sum)
		require.NoError(t, err)
		assert.Equal(t, crc32.ChecksumIEEE(n.buf[:size]), sum, "size %d", size)
	}
	require.Equal(t, shm.LinkShm, be.LinkTo(netip.MustParseAddrPort(childAddr)))

	// Killed mid-transfer: every posted WRITE completes, the first that was
	// not acknowledged with retry exhaustion, the rest flushed.
	const writes = 64
	var wrs []qp.SendWR
	for i := range writes {
		wrs = append(wrs, qp.SendWR{WRID: uint64(100 + i), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
			SGL: []qp.SGE{n.sge(0, 1<<20)}, RemoteAddr: va, RKey: rkey})
	}
	_, err = n.qp.PostSend(wrs)
	require.NoError(t, err)
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
	var failed []cq.Status
	for _, wc := range waitWC(t, n.cq, writes) {
		if wc.Status != cq.Success {
			failed = append(failed, wc.Status)
		}
	}
	require.NotEmpty(t, failed, "the transfer cannot have finished: the peer was killed")
	assert.Equal(t, cq.RetryExcErr, failed[0])
	for _, s := range failed[1:] {
		assert.Equal(t, cq.WRFlushErr, s)
	}
	s := be.Stats()
	assert.Zero(t, s.Paired, "the pairing is torn down: %+v", s)
	assert.Equal(t, shm.LinkNone, be.LinkTo(netip.MustParseAddrPort(childAddr)))
}
