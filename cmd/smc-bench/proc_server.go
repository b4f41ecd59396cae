package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/goroce/goroce/internal/ctlmsg"
)

// serverProc is the server process as the load generator sees it: its PID
// (to read its CPU in /proc, and to stop it) and its control connection.
type serverProc struct {
	cmd   *exec.Cmd // nil for a server in this process (tests)
	hello hello
	conn  net.Conn
	ctl   *ctlmsg.Conn
}

// ctlAcceptWait bounds how long the server waits for its parent's control
// connection.
const ctlAcceptWait = 30 * time.Second

var timeNow = time.Now

// startServer runs this program as the server process (-server, with the
// same SMC-R settings) and connects to it.
func startServer(set smcSettings, modes []string, profileDir string) (*serverProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"-server", "-devport", fmt.Sprint(set.DevPort), "-signalling", set.Signalling,
		"-linger", set.Linger.String(), "-shm-spin", set.ShmSpin.String(), "-busy-poll", set.BusyPoll.String(), "-modes", strings.Join(modes, ",")}
	if profileDir != "" {
		abs, err := filepath.Abs(profileDir)
		if err != nil {
			return nil, err
		}
		args = append(args, "-profile-dir", abs)
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &serverProc{cmd: cmd}
	line, err := bufio.NewReaderSize(out, ctlmsg.MaxLen).ReadString('\n')
	if err == nil {
		err = json.Unmarshal([]byte(line), &p.hello)
	}
	if err == nil && p.hello.Err != "" {
		err = fmt.Errorf("%s", p.hello.Err)
	}
	if err == nil {
		p.conn, err = net.DialTimeout("tcp", p.hello.Ctl, 10*time.Second)
	}
	if err != nil {
		p.kill()
		return nil, fmt.Errorf("server process: %w", err)
	}
	p.ctl = ctlmsg.New(p.conn)
	return p, nil
}

func (p *serverProc) pid() int {
	if p.cmd == nil {
		return os.Getpid()
	}
	return p.cmd.Process.Pid
}

// kill stops the process by its PID and reaps it.
func (p *serverProc) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// stop asks the server to quit, and kills it (by PID) if it has not
// exited within a few seconds.
func (p *serverProc) stop() {
	var r ctlResp
	_ = p.conn.SetDeadline(time.Now().Add(5 * time.Second))
	if p.ctl.Write(ctlReq{Kind: "quit"}) == nil {
		_ = p.ctl.Read(&r)
	}
	p.conn.Close()
	if p.cmd == nil {
		return
	}
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// call sends a request and reads the answer (bounded in time: a server
// that stopped answering fails the run instead of hanging it).
func (p *serverProc) call(req ctlReq) (ctlResp, error) {
	var r ctlResp
	_ = p.conn.SetDeadline(time.Now().Add(60 * time.Second))
	if err := p.ctl.Write(req); err != nil {
		return r, fmt.Errorf("server control: %w", err)
	}
	if err := p.ctl.Read(&r); err != nil {
		return r, fmt.Errorf("server control: %w", err)
	}
	if r.Err != "" {
		return r, fmt.Errorf("server: %s", r.Err)
	}
	return r, nil
}

func (p *serverProc) stats() (ctlResp, error) { return p.call(ctlReq{Kind: "stats"}) }
func (p *serverProc) mem() (ctlResp, error)   { return p.call(ctlReq{Kind: "mem"}) }

func (p *serverProc) profile(start bool, name string) error {
	if start {
		_, err := p.call(ctlReq{Kind: "profile-start", File: name})
		return err
	}
	_, err := p.call(ctlReq{Kind: "profile-stop"})
	return err
}

// waitAccepted waits until the server has accepted n connections of mode
// since before (bounded: 60 s).
func (p *serverProc) waitAccepted(mode string, before ctlResp, n int) (ctlResp, error) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		s, err := p.stats()
		if err != nil {
			return s, err
		}
		got := 0
		for _, v := range serverDelta(before, s, mode) {
			got += v
		}
		if got >= n || time.Now().After(deadline) {
			return s, nil
		}
		time.Sleep(5 * time.Millisecond) // polling another process: nothing to wait on
	}
}

var loadProf *os.File

// startProfile starts the load generator's CPU profile into dir/name.
func startProfile(dir, name string) error {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	loadProf = f
	return nil
}

func stopProfile() {
	if loadProf != nil {
		pprof.StopCPUProfile()
		loadProf.Close()
		loadProf = nil
	}
}
