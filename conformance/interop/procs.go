//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// procs tracks every process the harness starts, so that each is stopped
// by its PID at the end, on failure and on Ctrl-C alike.
type procs struct {
	mu   sync.Mutex
	live map[int]*proc
}

// proc is one started process. done is closed when it has exited; err is
// then its exit error.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func newProcs() *procs { return &procs{live: map[int]*proc{}} }

// start starts cmd and tracks it. The child gets SIGKILL if the harness
// dies without cleaning up (Pdeathsig).
func (ps *procs) start(name string, cmd *exec.Cmd) (*proc, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	ps.mu.Lock()
	ps.live[cmd.Process.Pid] = p
	ps.mu.Unlock()
	go func() {
		p.err = cmd.Wait()
		ps.mu.Lock()
		delete(ps.live, cmd.Process.Pid)
		ps.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) exitCode() int {
	if p.cmd.ProcessState == nil {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// stop sends SIGTERM to the process by its PID, then SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	p.signal(syscall.SIGTERM, grace)
}

// signal sends sig by PID and waits up to grace for the exit; then SIGKILL.
func (p *proc) signal(sig syscall.Signal, grace time.Duration) {
	if p.exited() {
		return
	}
	syscall.Kill(p.pid(), sig)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	syscall.Kill(p.pid(), syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
	}
}

// stopAll stops every live process, each by its PID.
func (ps *procs) stopAll() {
	ps.mu.Lock()
	var all []*proc
	for _, p := range ps.live {
		all = append(all, p)
	}
	ps.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range all {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(3 * time.Second) }()
	}
	wg.Wait()
}

// netns is the harness's network namespace: a bridge br0 with the host-side
// address and one tap per VM.
type netns struct {
	name   string
	hostIP string // e.g. 198.18.0.1
	prefix int
	taps   []string
}

// nsPrefix starts the name of every namespace the harness creates.
const nsPrefix = "goroce-interop-"

// removeStaleNetns deletes namespaces a killed earlier run left behind: those
// named nsPrefix+PID whose PID is no longer alive.
func removeStaleNetns(ctx context.Context, logf func(string, ...any)) {
	out, err := runOut(ctx, "ip", "netns", "list")
	if err != nil {
		return
	}
	for _, l := range readLines(out) {
		f := strings.Fields(l)
		if len(f) == 0 || !strings.HasPrefix(f[0], nsPrefix) {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimPrefix(f[0], nsPrefix))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			logf("deleting stale network namespace %s", f[0])
			runOut(ctx, "ip", "netns", "del", f[0])
		}
	}
}

// createNetns creates the namespace, its bridge and taps, with the given MTU.
func createNetns(ctx context.Context, name, hostIP string, prefix int, taps []string, mtu int) (*netns, error) {
	n := &netns{name: name, hostIP: hostIP, prefix: prefix, taps: taps}
	if out, err := runOut(ctx, "ip", "netns", "add", name); err != nil {
		return nil, fmt.Errorf("ip netns add %s: %v: %s", name, err, out)
	}
	steps := [][]string{
		{"link", "set", "lo", "up"},
		// A fixed MAC: br0's IPv6 link-local address (goroce's in the
		// IPv6 cases) follows from it.
		{"link", "add", "br0", "address", hostMAC, "type", "bridge", "stp_state", "0", "forward_delay", "0"},
		{"link", "set", "br0", "mtu", strconv.Itoa(mtu)},
		{"addr", "add", fmt.Sprintf("%s/%d", hostIP, prefix), "dev", "br0"},
	}
	for _, t := range taps {
		steps = append(steps,
			[]string{"tuntap", "add", "dev", t, "mode", "tap"},
			[]string{"link", "set", t, "mtu", strconv.Itoa(mtu), "master", "br0", "up"})
	}
	steps = append(steps, []string{"link", "set", "br0", "up"})
	// No IPv6 in the namespace: quiet captures.
	if err := n.sysctl(ctx, "net/ipv6/conf/all/disable_ipv6", "1"); err != nil {
		n.delete(ctx)
		return nil, err
	}
	n.sysctl(ctx, "net/ipv6/conf/default/disable_ipv6", "1")
	for _, s := range steps {
		if err := n.ip(ctx, s...); err != nil {
			n.delete(ctx)
			return nil, err
		}
	}
	return n, nil
}

func (n *netns) ip(ctx context.Context, args ...string) error {
	out, err := runOut(ctx, "ip", append([]string{"-n", n.name}, args...)...)
	if err != nil {
		return fmt.Errorf("ip -n %s %s: %v: %s", n.name, strings.Join(args, " "), err, strings.TrimSpace(out))
	}
	return nil
}

func (n *netns) sysctl(ctx context.Context, key, val string) error {
	out, err := runOut(ctx, "ip", "netns", "exec", n.name, "sh", "-c", fmt.Sprintf("echo %s > /proc/sys/%s", val, key))
	if err != nil {
		return fmt.Errorf("setting %s in %s: %v: %s", key, n.name, err, out)
	}
	return nil
}

// setMTU sets the MTU of the bridge and every tap.
func (n *netns) setMTU(ctx context.Context, mtu int) error {
	for _, t := range n.taps {
		if err := n.ip(ctx, "link", "set", t, "mtu", strconv.Itoa(mtu)); err != nil {
			return err
		}
	}
	return n.ip(ctx, "link", "set", "br0", "mtu", strconv.Itoa(mtu))
}

// command returns cmd to run inside the namespace (ip netns exec execs it,
// so the PID is the program's own).
func (n *netns) command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.name, name}, args...)...)
}

// netCommand is command for a program that needs the host's mounts: it
// enters only the namespace's network. (ip netns exec also gives the
// program a mount namespace with a fresh /sys, which hides the cgroup v2
// mount that the SMC TCP option's sock_ops BPF program attaches to;
// tcpopt mounts one privately there now, but the harness keeps to the
// host's mounts.)
func (n *netns) netCommand(name string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=/run/netns/" + n.name, "--", name}, args...)...)
}

func (n *netns) delete(ctx context.Context) error {
	out, err := runOut(context.WithoutCancel(ctx), "ip", "netns", "del", n.name)
	if err != nil {
		return fmt.Errorf("ip netns del %s: %v: %s", n.name, err, out)
	}
	return nil
}
