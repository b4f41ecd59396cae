package main

import (
	"fmt"
	"os"
	"sync"

	"github.com/goroce/goroce/pcap"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/smcr"
)

// capture records what the goroce device sends and receives (pcap.Tap)
// into a pcapng file.
type capture struct {
	path string
	f    *os.File
	w    *pcap.Writer

	mu   sync.Mutex
	taps []*pcap.Tap // one per device this process opens
}

// openCapture creates the file and has cfg's devices tapped into it.
func openCapture(path string, cfg *smcr.Config) (*capture, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-capture: %w", err)
	}
	w, err := pcap.NewWriter(f, pcap.WriterOptions{InterfaceName: "goroce0", Description: "goroce RoCEv2 device of smcat (SMC-R)"})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("-capture %s: %w", path, err)
	}
	c := &capture{path: path, f: f, w: w}
	cfg.WrapBackend = func(b backend.Backend) backend.Backend {
		t := pcap.NewTap(b, w)
		c.mu.Lock()
		c.taps = append(c.taps, t)
		c.mu.Unlock()
		return t.Backend()
	}
	return c, nil
}

// close completes the file. A device still open (a link group lingering)
// records nothing after this.
func (c *capture) close() error {
	err := c.w.Close()
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	c.mu.Lock()
	for _, t := range c.taps {
		if terr := t.Err(); err == nil {
			err = terr
		}
	}
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("-capture %s: %w", c.path, err)
	}
	return nil
}
