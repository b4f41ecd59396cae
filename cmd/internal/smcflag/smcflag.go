// Package smcflag is what smcat and smc-relay share about how they speak
// SMC-R: the smcr configuration of their signalling flags (-peer-speaks-smc,
// -ueid, --linger, -buffer) and what to say when the SMC TCP option cannot
// be sent.
package smcflag

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/goroce/goroce/smcr"
	"github.com/goroce/goroce/smcr/tcpopt"
)

// Flags are the signalling settings.
type Flags struct {
	SpeaksSMC bool          // -peer-speaks-smc: no TCP option, both sides configured
	UEIDs     []string      // -ueid, repeatable: SMC-Rv2 with these EIDs
	Linger    time.Duration // --linger: 0 keeps Linux's 10 minutes
	BufSize   int           // -buffer: RMB and send buffer bytes (0: 64 KiB)
}

// Config is the smcr configuration of f: as root the SMC TCP option
// signals SMC (a peer that does not send it gets TCP); with SpeaksSMC
// both sides are configured to speak it.
func (f *Flags) Config() smcr.Config {
	cfg := smcr.Config{Signalling: smcr.SignalOption, UEIDs: f.UEIDs, LinkGroupLinger: f.Linger,
		SendBufSize: f.BufSize, RecvBufSize: f.BufSize}
	if f.Linger == 0 {
		cfg.LinkGroupLinger = smcr.LinuxLinkGroupLinger // Linux's, and no wait at exit
	}
	if f.SpeaksSMC {
		cfg.Signalling, cfg.PeerSpeaksSMC = smcr.SignalConfigured, true
	}
	return cfg
}

// SetupError explains an error of Listen or Dial that comes before any
// connection (the TCP option cannot be sent), or returns "": what is
// wrong, and the two ways out, in prog's terms.
func SetupError(err error, prog string) string {
	var why string
	switch {
	case errors.Is(err, tcpopt.ErrNotPermitted):
		why = "this process may not load the sock_ops BPF program that sets it (needs CAP_BPF and CAP_NET_ADMIN)"
	case errors.Is(err, tcpopt.ErrUnsupported):
		why = "this system cannot put it into TCP handshakes (needs Linux 5.10+ with cgroup v2 and BPF sock_ops)"
	default:
		return ""
	}
	return "cannot send the SMC TCP option, which tells a peer that this side speaks SMC: " + why + ".\n" +
		"Run " + prog + " as root, or pass -peer-speaks-smc on both sides (SMC without the option; a Linux peer then falls back to TCP)."
}

// StringList is a repeatable flag (-ueid).
type StringList []string

func (s *StringList) String() string     { return strings.Join(*s, ",") }
func (s *StringList) Set(v string) error { *s = append(*s, v); return nil }

// Logger writes a program's messages to its stderr, one line at a time.
type Logger struct {
	mu      sync.Mutex
	Prog    string
	W       io.Writer
	Verbose bool
}

// Errorf always prints.
func (l *Logger) Errorf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.W, l.Prog+": "+format+"\n", args...)
}

// Infof prints with -v.
func (l *Logger) Infof(format string, args ...any) {
	if l.Verbose {
		l.Errorf(format, args...)
	}
}

// Lines prints each line with -v.
func (l *Logger) Lines(ls []string) {
	if !l.Verbose {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range ls {
		fmt.Fprintf(l.W, "%s: %s\n", l.Prog, s)
	}
}

// Addr is an IP address flag.
type Addr struct{ A *netip.Addr }

func (f Addr) String() string {
	if f.A == nil || !f.A.IsValid() {
		return ""
	}
	return f.A.String()
}

func (f Addr) Set(v string) error {
	a, err := netip.ParseAddr(v)
	if err != nil {
		return fmt.Errorf("not an IP address: %q", v)
	}
	*f.A = a.Unmap()
	return nil
}
