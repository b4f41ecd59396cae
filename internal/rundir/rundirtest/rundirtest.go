// Package rundirtest gives tests of the run directory the other processes
// they need: a publisher that a signal ends, and a socket that another
// user serves. Each is this test binary run again; importing the package
// makes a test binary answer such a run (in init) instead of testing.
package rundirtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/goroce/goroce/internal/rundir"
)

// envChild carries a child's orders, as JSON.
const envChild = "GOROCE_RUNDIRTEST_CHILD"

// wait bounds every wait for a child: its first line, or its exit.
const wait = 60 * time.Second

// orders is what a child does.
type orders struct {
	// Mode: "publish" (rundir.Listen with ExitOnSignal), "notify"
	// (rundir.Listen with NotifyContext) or "serve" (a plain socket that
	// answers Reply).
	Mode      string
	Dir, Name string
	Path      string
	Reply     string
}

func init() {
	if v := os.Getenv(envChild); v != "" {
		var o orders
		if err := json.Unmarshal([]byte(v), &o); err != nil {
			fmt.Fprintln(os.Stderr, "rundirtest child:", err)
			os.Exit(2)
		}
		os.Exit(child(&o))
	}
}

// child runs o: it prints "ready" once its socket is there, answers
// connections with o.Reply, and ends when its stdin does.
func child(o *orders) int {
	var ln net.Listener
	var err error
	var ctx context.Context
	var status func(int) int
	switch o.Mode {
	case "publish":
		rundir.ExitOnSignal()
		ln, err = rundir.Listen(o.Dir, o.Name)
	case "notify":
		ctx, status = rundir.NotifyContext(context.Background())
		ln, err = rundir.Listen(o.Dir, o.Name)
	case "serve":
		ln, err = net.Listen("unix", o.Path)
	}
	if err != nil || ln == nil {
		fmt.Fprintln(os.Stderr, "rundirtest child:", o.Mode, err)
		return 2
	}
	go answer(ln, o.Reply)
	fmt.Println("ready")
	stdinDone := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stdinDone)
	}()
	if ctx != nil {
		// As a program that shuts down on the first signal, slowly: it
		// waits for stdin to end first, so that a second signal finds it
		// still running.
		<-ctx.Done()
		fmt.Println("stopping")
		<-stdinDone
		ln.Close()
		return status(0)
	}
	<-stdinDone
	ln.Close()
	return 0
}

// Process is a running child.
type Process struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan struct{}
}

// start runs this test binary as a child with orders o and returns it
// once it is ready; the test's cleanup ends it.
func start(t testing.TB, bin string, o orders, attr *syscall.SysProcAttr, env ...string) *Process {
	t.Helper()
	v, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envChild+"="+string(v)), env...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = attr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start a child: %v", err)
	}
	p := &Process{cmd: cmd, stdin: stdin, lines: make(chan string, 4), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			select {
			case p.lines <- s.Text():
			default:
			}
		}
		cmd.Wait() // after the last read, as exec requires
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-p.done:
		case <-time.After(wait):
			cmd.Process.Kill()
			<-p.done
		}
	})
	p.WaitLine(t, "ready")
	return p
}

// WaitLine waits for the child to print line.
func (p *Process) WaitLine(t testing.TB, line string) {
	t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case l := <-p.lines:
			if l == line {
				return
			}
		case <-p.done:
			t.Fatalf("the child exited before printing %q", line)
		case <-timer.C:
			t.Fatalf("the child did not print %q within %v", line, wait)
		}
	}
}

// Signal sends sig to the child.
func (p *Process) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// CloseStdin tells the child to finish.
func (p *Process) CloseStdin() { p.stdin.Close() }

// Exit waits for the child to end and returns its exit status (-1 if a
// signal ended it).
func (p *Process) Exit(t testing.TB) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(wait):
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("the child still ran after %v: killed", wait)
	}
	return p.cmd.ProcessState.ExitCode()
}

// Publisher runs a process that publishes the socket name in dir with
// rundir.Listen; notify selects rundir.NotifyContext over
// rundir.ExitOnSignal. It returns once the socket is there.
func Publisher(t testing.TB, dir, name string, notify bool) *Process {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mode := "publish"
	if notify {
		mode = "notify"
	}
	return start(t, bin, orders{Mode: mode, Dir: dir, Name: name}, nil)
}

// Serve answers reply on a plain socket at path, as a fake publisher of
// the user's own would, until the test ends.
func Serve(t testing.TB, path, reply string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go answer(ln, reply)
}

// answer writes reply to each connection ln accepts, until ln closes.
func answer(ln net.Listener, reply string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		io.WriteString(c, reply)
		c.Close()
	}
}
