package tcpopt

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Under `ip netns exec`, which gives the process a mount namespace of its
// own with a fresh /sys (hiding the host's cgroup v2 at /sys/fs/cgroup),
// Open mounts cgroup v2 privately and works, as a user of ip netns exec
// expects: the option goes into a handshake in that network namespace.
// The host's mount table is left as it was. (Root only, with ip.)
func TestOpenUnderIPNetnsExec(t *testing.T) {
	if os.Getenv("TCPOPT_NETNS_CHILD") == "1" {
		netnsChild()
		return
	}
	needRoot(t)
	_ = openSignaller(t) // skips where BPF cannot be loaded at all
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("no ip command")
	}
	name := fmt.Sprintf("goroce-tcpopt-%d", os.Getpid())
	if out, err := exec.Command(ip, "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(ip, "netns", "delete", name).Run() })
	before := mountTable(t)

	cmd := exec.Command(ip, "netns", "exec", name, os.Args[0], "-test.run=^TestOpenUnderIPNetnsExec$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TCPOPT_NETNS_CHILD=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	lines := string(out)
	assert.Contains(t, lines, "hidden: no cgroup2 mount\n", "ip netns exec hides the host's cgroup v2")
	assert.Contains(t, lines, "opened: ", "Open works there")
	assert.Contains(t, lines, "option: sent\n", "and the option goes into a handshake")
	assert.Equal(t, before, mountTable(t), "the host's mounts are as they were")
}

// netnsChild runs under ip netns exec: it reports what it finds and does.
func netnsChild() {
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if _, _, err := cgroup2Mount(bytes.NewReader(mi)); errors.Is(err, errNoCgroup2) {
		fmt.Println("hidden: no cgroup2 mount")
	}
	s, err := Open()
	if err != nil {
		fmt.Println("open failed:", err)
		os.Exit(1)
	}
	defer s.Close()
	fmt.Println("opened:", s.cgroup)
	if err := exec.Command("ip", "link", "set", "lo", "up").Run(); err != nil {
		fmt.Println("lo up:", err)
		os.Exit(1)
	}
	ok, err := selfHandshake(s)
	switch {
	case err != nil:
		fmt.Println("handshake:", err)
		os.Exit(1)
	case ok:
		fmt.Println("option: sent")
	default:
		fmt.Println("option: not sent")
	}
	mi, _ = os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mi), "goroce-cgroup2-") {
		fmt.Println("the private mount is still there")
		os.Exit(1)
	}
}

// mountTable is the process's mount points.
func mountTable(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	require.NoError(t, err)
	defer f.Close()
	var m []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 4 {
			m = append(m, fs[4])
		}
	}
	return m
}

// selfHandshake connects to itself on 127.0.0.1, both ends opted in, and
// reports whether the server saw the option in the client's SYN.
func selfHandshake(s *Signaller) (bool, error) {
	lc := net.ListenConfig{Control: s.Control}
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		return false, err
	}
	defer ln.Close()
	d := net.Dialer{Control: s.Control, Timeout: 10 * time.Second}
	d.SetMultipathTCP(false)
	c, err := d.Dial("tcp4", ln.Addr().String())
	if err != nil {
		return false, err
	}
	defer c.Close()
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
	a, err := ln.Accept()
	if err != nil {
		return false, err
	}
	defer a.Close()
	return s.PeerSignalled(a.(*net.TCPConn))
}

// ip netns exec's sysfs: the last mount on /sys, named after the network
// namespace.
func TestSysfsSource(t *testing.T) {
	host := "23 27 0:22 / /sys rw,relatime - sysfs sysfs rw\n31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
	netns := host + "56 53 0:40 / /sys rw,relatime shared:7 - sysfs red rw\n"
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{{host, "sysfs", true}, {netns, "red", true}, {"", "", false}, {"1 2 0:1 / /sysx rw - sysfs x rw\n", "", false}} {
		name, ok := sysfsSource([]byte(tc.in))
		assert.Equal(t, tc.ok, ok)
		assert.Equal(t, tc.want, name)
	}
}
