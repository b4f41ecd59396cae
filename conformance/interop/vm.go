//go:build linux

package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// vmConfig is one guest.
type vmConfig struct {
	name        string // for messages
	kernel      string
	initrd      string
	dir         string // console log
	sockDir     string // job socket (short path: unix sockets have 108 bytes)
	tap         string
	mac         string
	kvm         bool
	memMB       int
	cpus        int
	bootTimeout time.Duration
	boot        int // the how-manyth boot: names the console log
}

// vm is a running guest and its job channel (the second serial port).
type vm struct {
	cfg     vmConfig
	proc    *proc
	conn    net.Conn
	rd      *bufio.Reader
	console string
	seq     int
	broken  error // set when the job channel can no longer be trusted
	bootDur time.Duration
	garbled int // command lines the guest got garbled (and the host sent again)
}

// kvmUsable reports whether QEMU can use KVM for a stock kernel: /dev/kvm
// opens and the CPU has hardware virtualization (vmx or svm). A /dev/kvm
// without either (PVM, say, as in some nested sandboxes) runs only guest
// kernels built for it: a Debian kernel hangs in its decompressor.
func kvmUsable() (bool, string) {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false, "no usable /dev/kvm"
	}
	f.Close()
	info, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(info), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "flags" {
			for _, f := range strings.Fields(v) {
				if f == "vmx" || f == "svm" {
					return true, "KVM"
				}
			}
			break
		}
	}
	if _, err := os.Stat("/sys/module/kvm_pvm"); err == nil {
		return false, "/dev/kvm is PVM (kvm_pvm), which boots no stock kernel"
	}
	return false, "/dev/kvm exists but the CPU shows no vmx/svm"
}

// bootVM starts QEMU in the namespace and waits for the guest's init to
// report on the job channel.
func bootVM(ctx context.Context, ns *netns, ps *procs, cfg vmConfig) (*vm, error) {
	v := &vm{cfg: cfg, console: filepath.Join(cfg.dir, fmt.Sprintf("%s-console.%d.log", cfg.name, cfg.boot))}
	sock := filepath.Join(cfg.sockDir, cfg.name+".sock")
	os.Remove(sock)
	os.Remove(v.console)
	args := []string{
		"-name", "goroce-interop-" + cfg.name,
		"-nodefaults", "-no-user-config", "-display", "none", "-vga", "none", "-no-reboot",
		"-m", strconv.Itoa(cfg.memMB), "-smp", strconv.Itoa(cfg.cpus),
		"-kernel", cfg.kernel, "-initrd", cfg.initrd,
		// log_buf_len: room in the kernel log for dynamic debug traces
		// (-guest-prep) that the stall probe reads back.
		"-append", "console=ttyS0,115200 panic=-1 loglevel=6 log_buf_len=8M mitigations=off net.ifnames=0 rdinit=/init",
		"-serial", "file:" + v.console,
		// wait=on: QEMU starts the guest only once we are connected, so
		// nothing the guest says on the job channel is lost.
		"-chardev", "socket,id=job,path=" + sock + ",server=on,wait=on",
		"-serial", "chardev:job",
		"-netdev", "tap,id=n0,ifname=" + cfg.tap + ",script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac=" + cfg.mac + ",speed=10000,duplex=full",
	}
	if cfg.kvm {
		args = append(args, "-accel", "kvm", "-cpu", "host")
	} else {
		args = append(args, "-accel", "tcg", "-cpu", "max")
	}
	cmd := ns.command("qemu-system-x86_64", args...)
	qlog, err := os.Create(filepath.Join(cfg.dir, fmt.Sprintf("%s-qemu.%d.log", cfg.name, cfg.boot)))
	if err != nil {
		return nil, err
	}
	defer qlog.Close()
	cmd.Stdout, cmd.Stderr = qlog, qlog
	start := time.Now()
	p, err := ps.start("qemu "+cfg.name, cmd)
	if err != nil {
		return nil, err
	}
	v.proc = p
	fail := func(err error) (*vm, error) {
		v.stop()
		return nil, err
	}
	// Connect as soon as QEMU has made the socket.
	for {
		c, err := net.Dial("unix", sock)
		if err == nil {
			v.conn = c
			break
		}
		if p.exited() {
			return fail(fmt.Errorf("qemu exited at start (status %d): %s", p.exitCode(), tail(readFileString(qlog.Name()), 10)))
		}
		if time.Since(start) > 20*time.Second {
			return fail(fmt.Errorf("qemu made no job socket in 20 s: %v", err))
		}
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	v.rd = bufio.NewReaderSize(v.conn, 64<<10)
	stopWatch := context.AfterFunc(ctx, func() { v.conn.SetReadDeadline(time.Now()) })
	defer stopWatch()
	v.conn.SetReadDeadline(start.Add(cfg.bootTimeout))
	for {
		line, err := v.rd.ReadString('\n')
		if err != nil {
			if ctx.Err() != nil {
				return fail(ctx.Err())
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return fail(fmt.Errorf("%w: no word from the guest in %v", errBootTimeout, cfg.bootTimeout))
			}
			return fail(fmt.Errorf("guest job channel: %v (qemu exited: %v)", err, p.exited()))
		}
		if strings.HasPrefix(line, "GOROCE-READY") {
			break
		}
	}
	v.conn.SetReadDeadline(time.Time{})
	v.bootDur = time.Since(start)
	return v, nil
}

var errBootTimeout = errors.New("boot timed out")

func readFileString(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// consoleTail returns the last n lines of the guest's console.
func (v *vm) consoleTail(n int) string { return tail(readFileString(v.console), n) }

// run runs one shell command line in the guest (in init's shell, so that
// `cmd &` followed later by `wait` works) and returns its output (stdout
// and stderr) and exit status. The command should bound itself (busybox
// timeout); timeout is the backstop, after which the channel is broken.
func (v *vm) run(ctx context.Context, timeout time.Duration, cmd string) (string, int, error) {
	if v.broken != nil {
		return "", -1, fmt.Errorf("guest job channel unusable: %w", v.broken)
	}
	if strings.ContainsAny(cmd, "\n\r") {
		return "", -1, fmt.Errorf("guest command has a line break: %q", cmd)
	}
	v.seq++
	var rnd [4]byte
	rand.Read(rnd[:])
	id := fmt.Sprintf("j%d-%s", v.seq, hex.EncodeToString(rnd[:]))
	end := "GOROCE-END " + id + " "
	stopWatch := context.AfterFunc(ctx, func() { v.conn.SetReadDeadline(time.Now()) })
	defer stopWatch()
	send := func() error {
		v.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, err := fmt.Fprintf(v.conn, "J %s %d %s\n", id, len(cmd), cmd)
		return err
	}
	if err := send(); err != nil {
		v.broken = err
		return "", -1, fmt.Errorf("guest job channel: %w", err)
	}
	v.conn.SetReadDeadline(time.Now().Add(timeout))
	defer v.conn.SetReadDeadline(time.Time{})
	var lines []string
	resent := 0
	for {
		line, err := v.rd.ReadString('\n')
		if err != nil {
			out := strings.Join(lines, "\n")
			if ctx.Err() != nil {
				v.broken = ctx.Err()
				return out, -1, ctx.Err()
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				err = fmt.Errorf("guest command did not finish within %v: %s", timeout, cmd)
			}
			v.broken = err
			return out, -1, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "GOROCE-BAD" && len(lines) == 0 {
			// The guest got the line garbled and did not run it.
			if resent++; resent > 3 {
				v.broken = errors.New("the guest got the command garbled 4 times")
				return "", -1, v.broken
			}
			v.garbled++
			if err := send(); err != nil {
				v.broken = err
				return "", -1, fmt.Errorf("guest job channel: %w", err)
			}
			continue
		}
		if rest, ok := strings.CutPrefix(line, end); ok {
			if n := len(lines); n > 0 && lines[n-1] == "" {
				lines = lines[:n-1] // the newline init puts before the end line
			}
			rc, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil {
				rc = -1
			}
			return strings.Join(lines, "\n"), rc, nil
		}
		lines = append(lines, line)
	}
}

// mustRun is run that treats a non-zero status as an error.
func (v *vm) mustRun(ctx context.Context, timeout time.Duration, cmd string) (string, error) {
	out, rc, err := v.run(ctx, timeout, cmd)
	if err == nil && rc != 0 {
		err = fmt.Errorf("guest: %q exited with status %d:\n%s", cmd, rc, tail(out, 20))
	}
	return out, err
}

// stop powers the guest off (or stops QEMU by its PID).
func (v *vm) stop() {
	if v.conn != nil && v.broken == nil && !v.proc.exited() {
		v.conn.SetWriteDeadline(time.Now().Add(time.Second))
		fmt.Fprintf(v.conn, "J poweroff %d %s\n", len("poweroff -f"), "poweroff -f")
		select {
		case <-v.proc.done:
		case <-time.After(3 * time.Second):
		}
	}
	if v.conn != nil {
		v.conn.Close()
	}
	v.proc.stop(3 * time.Second)
}
