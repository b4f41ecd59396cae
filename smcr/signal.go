package smcr

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"

	"github.com/goroce/goroce/smcr/tcpopt"
)

// The process's SMC TCP option signaller (smcr/tcpopt): opened on the
// first listener or dialer that uses the option, and kept until the
// process exits (the BPF programs it attaches go with the process; it has
// no goroutines).
var signaller struct {
	sync.Mutex
	s   *tcpopt.Signaller
	err error
}

func openSignaller() (*tcpopt.Signaller, error) {
	signaller.Lock()
	defer signaller.Unlock()
	if signaller.s == nil && signaller.err == nil {
		signaller.s, signaller.err = tcpopt.Open()
	}
	return signaller.s, signaller.err
}

// signalling resolves cfg's Signalling: the signaller for SignalOption
// (an error if the process may not load it), nil for SignalConfigured, and
// for SignalAuto whichever the process can do.
func signalling(cfg *Config) (*tcpopt.Signaller, Signalling, error) {
	switch cfg.Signalling {
	case SignalConfigured:
		return nil, SignalConfigured, nil
	case SignalOption:
		s, err := openSignaller()
		if err != nil {
			return nil, 0, fmt.Errorf("smcr: the SMC TCP option needs a sock_ops BPF program (run as root, or use SignalConfigured with PeerSpeaksSMC on both sides): %w", err)
		}
		return s, SignalOption, nil
	}
	s, err := openSignaller()
	if err != nil {
		if errors.Is(err, tcpopt.ErrNotPermitted) || errors.Is(err, tcpopt.ErrUnsupported) {
			return nil, SignalConfigured, nil
		}
		return nil, 0, err
	}
	return s, SignalOption, nil
}

// control opts a socket in for the option and turns it into plain TCP
// (Go listens and dials with MPTCP by default; the option's program sees
// only TCP sockets).
func controlFor(s *tcpopt.Signaller) func(network, address string, c syscall.RawConn) error {
	if s == nil {
		return nil
	}
	return s.Control
}

// peerSignalled reports whether the TCP peer's handshake carried the SMC
// option; in configured mode whether the configuration says it speaks SMC.
func peerSignalled(s *tcpopt.Signaller, c *net.TCPConn, cfg *Config) (bool, error) {
	if s == nil {
		return cfg.PeerSpeaksSMC, nil
	}
	return s.PeerSignalled(c)
}
