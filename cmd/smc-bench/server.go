package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"

	"github.com/tidwall/redcon"

	"github.com/goroce/goroce/internal/ctlmsg"
	"github.com/goroce/goroce/smcr"
)

// The server process: a RESP server (redcon) and a uperf responder for each
// mode, all on 127.0.0.2, and a control connection from the load generator
// over which it reports what it accepted, its counters and its memory, and
// starts and stops CPU profiles.

// hello is the server's first line on stdout: where to reach it.
type hello struct {
	Ctl   string         `json:"ctl"`
	Redis map[string]int `json:"redis"` // mode -> port
	Uperf map[string]int `json:"uperf"`
	Err   string         `json:"err,omitempty"`
}

// ctlReq is a request from the load generator.
type ctlReq struct {
	Kind string `json:"kind"` // stats, mem, heap, profile-start, profile-stop, quit
	// File is a profile's file name, in the directory the server was
	// started with (-profile-dir): a name, not a path.
	File string `json:"file,omitempty"`
}

// ctlResp is the server's answer.
type ctlResp struct {
	Err string `json:"err,omitempty"`
	// Accepted counts connections accepted since the process started, by
	// mode of the listener (tcp, smc-original, smc-pool), by what they
	// speak; Open is how many are open now.
	Accepted map[string]*modeCounts `json:"accepted,omitempty"`
	Open     map[string]int         `json:"open,omitempty"`
	// CQ holds each SMC-R mode's device counters (absent: no device).
	CQ  map[string]smcr.DeviceStats `json:"cq,omitempty"`
	Mem *memInfo                    `json:"mem,omitempty"`
}

// memInfo is a process's memory and resources after a garbage collection.
type memInfo struct {
	HeapInuse  uint64 `json:"heap_inuse"`
	Sys        uint64 `json:"sys"`
	RSSKiB     uint64 `json:"rss_kib"`
	Goroutines int    `json:"goroutines"`
	FDs        int    `json:"fds"`
}

func readMem() memInfo {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := memInfo{HeapInuse: ms.HeapInuse, Sys: ms.Sys, Goroutines: runtime.NumGoroutine()}
	if p, err := readProc(os.Getpid()); err == nil {
		m.RSSKiB, m.FDs = p.RSSKiB, p.FDs
	}
	return m
}

// server is the server process's state.
type server struct {
	set   smcSettings
	store *store

	mu       sync.Mutex
	accepted map[string]*modeCounts
	open     map[string]int
	lns      []net.Listener
	wg       sync.WaitGroup
}

func newServer(set smcSettings) *server {
	return &server{set: set, store: newStore(), accepted: map[string]*modeCounts{}, open: map[string]int{}}
}

// track counts a new connection of a mode's listener; the returned func
// counts it closed.
func (s *server) track(mode string, c net.Conn) func() {
	s.mu.Lock()
	m := s.accepted[mode]
	if m == nil {
		m = &modeCounts{}
		s.accepted[mode] = m
	}
	m.add(c)
	s.open[mode]++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.open[mode]--
		s.mu.Unlock()
	}
}

// start opens every listener and serves them until close.
func (s *server) start(modes []string) (hello, error) {
	h := hello{Redis: map[string]int{}, Uperf: map[string]int{}}
	for _, mode := range modes {
		for _, kind := range []string{"redis", "uperf"} {
			ln, err := s.set.listen(mode)
			if err != nil {
				s.close()
				return h, fmt.Errorf("%s listener: %w", mode, err)
			}
			s.lns = append(s.lns, ln)
			port := ln.Addr().(*net.TCPAddr).Port
			s.wg.Add(1)
			if kind == "redis" {
				h.Redis[mode] = port
				go func() { defer s.wg.Done(); s.serveRedis(mode, ln) }()
			} else {
				h.Uperf[mode] = port
				go func() { defer s.wg.Done(); s.serveUperf(mode, ln) }()
			}
		}
	}
	return h, nil
}

// close closes the listeners (and with them every connection) and waits.
func (s *server) close() {
	for _, ln := range s.lns {
		ln.Close()
	}
	s.wg.Wait()
}

func (s *server) serveRedis(mode string, ln net.Listener) {
	done := map[redcon.Conn]func(){}
	var mu sync.Mutex
	_ = redcon.Serve(ln, s.store.handle,
		func(c redcon.Conn) bool {
			f := s.track(mode, c.NetConn())
			mu.Lock()
			done[c] = f
			mu.Unlock()
			return true
		},
		func(c redcon.Conn, err error) {
			mu.Lock()
			f := done[c]
			delete(done, c)
			mu.Unlock()
			if f != nil {
				f()
			}
		})
}

// serveUperf answers each connection's 200-byte requests with 1000 bytes
// (uperf's rr1c-200x1000 profile) until it closes.
func (s *server) serveUperf(mode string, ln net.Listener) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	defer func() {
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		untrack := s.track(mode, c)
		mu.Lock()
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			uperfRespond(c)
			c.Close()
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
			untrack()
		}()
	}
}

func uperfRespond(c net.Conn) {
	req := make([]byte, uperfReq)
	resp := make([]byte, uperfResp)
	for {
		if _, err := io.ReadFull(c, req); err != nil {
			return
		}
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}

// stats answers a stats request.
func (s *server) stats() ctlResp {
	r := ctlResp{Accepted: map[string]*modeCounts{}, Open: map[string]int{}, CQ: map[string]smcr.DeviceStats{}}
	s.mu.Lock()
	for k, v := range s.accepted {
		cp := &modeCounts{ByMode: map[string]int{}, LinkGroups: append([]uint32(nil), v.LinkGroups...)}
		for m, n := range v.ByMode {
			cp.ByMode[m] = n
		}
		r.Accepted[k] = cp
	}
	for k, v := range s.open {
		r.Open[k] = v
	}
	s.mu.Unlock()
	for _, mode := range smcModes {
		if st, ok := smcr.StatsOfDevice(serverAddr, s.set.devPort(mode)); ok {
			r.CQ[mode] = st
		}
	}
	return r
}

// errNoHello marks a server that failed before it said where it listens.
var errNoHello = errors.New("server start")

// runServer is the server process's main: it listens, says where on
// stdout, and serves the one control connection of its parent until quit
// or until the connection ends (the parent died).
func runServer(set smcSettings, modes []string, profileDir string) error {
	s := newServer(set)
	h, err := s.start(modes)
	if err != nil {
		return fmt.Errorf("%w: %w", errNoHello, err)
	}
	defer s.close()
	cl, err := net.Listen("tcp", net.JoinHostPort(serverAddr.String(), "0"))
	if err != nil {
		return fmt.Errorf("%w: %w", errNoHello, err)
	}
	h.Ctl = cl.Addr().String()
	if err := ctlmsg.New(os.Stdout).Write(h); err != nil {
		return err
	}
	// The parent connects at once; one that died never does.
	cl.(*net.TCPListener).SetDeadline(timeNow().Add(ctlAcceptWait))
	conn, err := cl.Accept()
	cl.Close()
	if err != nil {
		return err
	}
	defer conn.Close()
	return s.serveCtl(conn, profileDir)
}

// serveCtl answers the load generator's requests on conn until quit or
// until the connection ends.
func (s *server) serveCtl(conn net.Conn, profileDir string) error {
	c := ctlmsg.New(conn)
	var prof *os.File
	defer func() {
		if prof != nil {
			pprof.StopCPUProfile()
			prof.Close()
		}
	}()
	for {
		var req ctlReq
		if err := c.Read(&req); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		var resp ctlResp
		switch req.Kind {
		case "quit":
			return c.Write(resp)
		case "stats":
			resp = s.stats()
		case "mem":
			resp = s.stats()
			m := readMem()
			resp.Mem = &m
		case "heap":
			runtime.GC()
			f, err := createProfile(profileDir, req.File)
			if err == nil {
				err = pprof.WriteHeapProfile(f)
				f.Close()
			}
			if err != nil {
				resp.Err = err.Error()
			}
		case "profile-start":
			if prof != nil {
				resp.Err = "a profile is running"
				break
			}
			f, err := createProfile(profileDir, req.File)
			if err == nil {
				err = pprof.StartCPUProfile(f)
				if err != nil {
					f.Close()
				}
			}
			if err != nil {
				resp.Err = err.Error()
				break
			}
			prof = f
		case "profile-stop":
			if prof != nil {
				pprof.StopCPUProfile()
				if err := prof.Close(); err != nil {
					resp.Err = err.Error()
				}
				prof = nil
			}
		default:
			resp.Err = "unknown request " + strconv.Quote(req.Kind)
		}
		if err := c.Write(resp); err != nil {
			return err
		}
	}
}

// createProfile creates a profile file named name in dir. The control
// peer names it: only a plain name is taken, never a path.
func createProfile(dir, name string) (*os.File, error) {
	if dir == "" {
		return nil, errors.New("the server was started without -profile-dir")
	}
	if !profileName.MatchString(name) {
		return nil, fmt.Errorf("bad profile name %q", name)
	}
	return os.Create(filepath.Join(dir, name))
}

var profileName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
