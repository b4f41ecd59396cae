package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// procCPU is what /proc says about one process: CPU time in user and
// system mode and the context switches of all its threads.
type procCPU struct {
	UserS, SysS  float64
	Vol, Nonvol  uint64 // voluntary and involuntary context switches
	RSSKiB       uint64
	Threads, FDs int
}

// clockTick is USER_HZ, the unit of /proc/PID/stat's times (100 on every
// Linux architecture Go runs on).
const clockTick = 100

// readProc reads pid's CPU times (/proc/PID/stat), and sums the context
// switches of its threads (/proc/PID/task/*/status: the process's own
// status counts its main thread only).
func readProc(pid int) (procCPU, error) {
	var p procCPU
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return p, err
	}
	// The command name may hold spaces and parentheses: fields start after
	// the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return p, fmt.Errorf("/proc/%d/stat: no ')' in %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): utime is field 14, stime 15, num_threads 20.
	if len(f) < 18 {
		return p, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	p.UserS, p.SysS = float64(ut)/clockTick, float64(st)/clockTick
	p.Threads, _ = strconv.Atoi(f[17])
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	for _, t := range tasks {
		s, err := os.ReadFile(t)
		if err != nil {
			continue // the thread exited
		}
		p.Vol += statusField(s, "voluntary_ctxt_switches:")
		p.Nonvol += statusField(s, "nonvoluntary_ctxt_switches:")
	}
	if s, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		p.RSSKiB = statusField(s, "VmRSS:")
	}
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		p.FDs = len(ents)
	}
	return p, nil
}

// statusField returns the number after name in a /proc status file.
func statusField(s []byte, name string) uint64 {
	i := bytes.Index(s, []byte(name))
	if i < 0 {
		return 0
	}
	rest := s[i+len(name):]
	if j := bytes.IndexByte(rest, '\n'); j >= 0 {
		rest = rest[:j]
	}
	f := strings.Fields(string(rest))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseUint(f[0], 10, 64)
	return n
}

// sub returns the CPU and context switches between two readings.
func (p procCPU) sub(q procCPU) procCPU {
	return procCPU{UserS: p.UserS - q.UserS, SysS: p.SysS - q.SysS, Vol: p.Vol - q.Vol, Nonvol: p.Nonvol - q.Nonvol}
}

func (p procCPU) add(q procCPU) procCPU {
	return procCPU{UserS: p.UserS + q.UserS, SysS: p.SysS + q.SysS, Vol: p.Vol + q.Vol, Nonvol: p.Nonvol + q.Nonvol}
}

// runtimeStack is runtime.Stack of every goroutine.
func runtimeStack(buf []byte) int { return runtime.Stack(buf, true) }
