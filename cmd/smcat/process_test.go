package main

import (
	"bytes"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/race"
)

// buildSmcat builds the program into dir (with the race detector when the
// test runs with it).
func buildSmcat(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build smcat with:", err)
	}
	bin := filepath.Join(t.TempDir(), "smcat")
	args := []string{"build", "-o", bin}
	if race.Enabled {
		args = append(args, "-race")
	}
	out, err := exec.Command(goTool, append(args, ".")...).CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// process is a running smcat.
type process struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr *watchBuffer
	done   chan int
}

func startProcess(t *testing.T, bin string, stdin []byte, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...), stderr: newWatchBuffer(), done: make(chan int, 1)}
	p.cmd.Stdin = bytes.NewReader(stdin)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, p.stderr
	require.NoError(t, p.cmd.Start())
	t.Cleanup(func() { p.cmd.Process.Kill() })
	go func() {
		err := p.cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		} else if err != nil {
			code = -1
		}
		p.done <- code
	}()
	return p
}

func (p *process) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-p.done:
		return code
	case <-time.After(waitWait):
		t.Fatalf("%v did not exit in %v:\n%s", p.cmd.Args, waitWait, p.stderr.String())
	}
	return -1
}

// Two processes, as a user runs them: the data and its checksum come
// back, both exit 0 once the link group lingered out, the listener said
// "listening" (the line the interop harness waits for), and a signal
// stops a -k listener with 128+signal.
func TestTwoProcesses(t *testing.T) {
	bin := buildSmcat(t)
	t.Setenv("GOROCE_RUN_DIR", t.TempDir())
	sa, ca := hostPair(t)
	srv := startProcess(t, bin, nil, args("-v", "-l", "--echo", sa.String(), "0")...)
	port := srv.stderr.waitMatch(t, listenRE, srv.done)[1]
	data := randomBytes(t, 2<<20)
	cli := startProcess(t, bin, data, args("-v", "-s", ca.String(), sa.String(), port)...)
	require.Equal(t, 0, cli.wait(t), cli.stderr.String())
	require.Equal(t, 0, srv.wait(t), srv.stderr.String())
	assert.Equal(t, sha256.Sum256(data), sha256.Sum256(cli.stdout.Bytes()))
	assert.Contains(t, srv.stderr.String(), "SMC-R v2")

	keep := startProcess(t, bin, nil, args("-v", "-l", "-k", sa.String(), "0")...)
	keep.stderr.waitMatch(t, listenRE, keep.done)
	require.NoError(t, keep.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 128+int(syscall.SIGTERM), keep.wait(t), keep.stderr.String())
	_, err := os.Stat(filepath.Join(os.Getenv("GOROCE_RUN_DIR"), "smc-"+strconv.Itoa(keep.cmd.Process.Pid)+".sock"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the publishing socket is removed on the way out")
}
