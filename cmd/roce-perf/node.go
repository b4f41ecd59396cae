package main

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"syscall"

	"github.com/goroce/goroce/internal/backendflag"
	"github.com/goroce/goroce/pcap"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/afpacket"
	"github.com/goroce/goroce/rocev2/backend/shm"
	"github.com/goroce/goroce/rocev2/backend/udp"
	"github.com/goroce/goroce/rocev2/device"
)

// node is this process's RoCE device on its backend (UDP by default),
// optionally tapped into a capture file.
type node struct {
	dev *device.Device
	udp *udp.Backend // for its GSO/GRO features, which the baseline copies; nil on AF_PACKET
	shm bool         // the shared-memory link, no UDP of goroce's: the baseline uses all the kernel has

	tap  *pcap.Tap
	capW *pcap.Writer // buffers on its own
	capF *os.File
}

// openNode opens the device on local:port (port 0: any free port) with the
// chosen backend, with a capture tap when capture names a file.
func openNode(spec backendflag.Spec, local netip.Addr, port int, capture string) (*node, error) {
	addr := netip.AddrPortFrom(local, uint16(port))
	var be backend.Backend
	var err error
	switch spec.Kind {
	case backendflag.AFPacket:
		be, _, err = backendflag.Open(spec, local)
	case backendflag.Shm, backendflag.Auto:
		if port == 0 {
			return nil, fmt.Errorf("-backend %s needs a fixed -port: its peers find the device by its address and port", spec.Kind)
		}
		spec.Port = uint16(port)
		be, _, err = backendflag.Open(spec, local)
	default:
		be, err = udp.Open(udp.Config{Addr: addr})
	}
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("open the RoCE device on %v: %w: another roce-perf, a goroce program or the kernel's rdma_rxe module holds UDP port %d there; stop it or pass -port", addr, err, port)
		}
		if errors.Is(err, syscall.EADDRNOTAVAIL) {
			return nil, fmt.Errorf("open the RoCE device on %v: %w: no interface has that address (use 127.0.0.1 and 127.0.0.2 on one host)", addr, err)
		}
		return nil, fmt.Errorf("open the RoCE device on %v: %w", addr, err)
	}
	n := &node{}
	n.udp, _ = be.(*udp.Backend)
	if s, ok := be.(*shm.Backend); ok {
		n.udp, _ = s.Fallback().(*udp.Backend) // auto's
		n.shm = n.udp == nil
	}
	var dev backend.Backend = be
	if capture != "" {
		if n.capF, err = os.Create(capture); err != nil {
			be.Close()
			return nil, fmt.Errorf("-capture: %w", err)
		}
		n.capW, err = pcap.NewWriter(n.capF, pcap.WriterOptions{
			InterfaceName: "goroce0",
			Description:   "goroce RoCEv2 device on " + describe(be) + " (roce-perf)",
		})
		if err != nil {
			n.capF.Close()
			be.Close()
			return nil, fmt.Errorf("-capture %s: %w", capture, err)
		}
		n.tap = pcap.NewTap(be, n.capW)
		dev = n.tap.Backend()
	}
	n.dev, err = device.New(device.Config{Name: "goroce0", Backend: dev})
	if err != nil {
		n.closeCapture()
		be.Close()
		return nil, err
	}
	// Counters for other processes (roce-devinfo -counters -d ADDR); the
	// run works without them.
	if err := n.dev.Publish(""); err != nil {
		fmt.Fprintln(os.Stderr, "roce-perf: warning:", err)
	}
	return n, nil
}

// features reports whether goroce's UDP backend uses GSO and GRO (on the
// AF_PACKET backend it uses neither). Over the shared-memory link goroce
// uses no socket, and the baseline it is held against is raw UDP at its
// best: both.
func (n *node) features() (gso, gro bool) {
	if n.shm {
		return true, true
	}
	if n.udp == nil {
		return false, false
	}
	return n.udp.Features()
}

// describe names a backend for a capture's description.
func describe(b backend.Backend) string {
	if a, ok := b.(*afpacket.Backend); ok {
		name, _ := a.Interface()
		return "AF_PACKET " + name + " " + a.LocalAddr().Addr().String()
	}
	if s, ok := b.(*shm.Backend); ok {
		if s.Fallback() != nil {
			return "auto (shared memory, else udp) " + b.LocalAddr().String()
		}
		return "shared memory " + b.LocalAddr().String()
	}
	return "udp " + b.LocalAddr().String()
}

// close stops the device, then completes the capture: every packet the
// device sent or received is recorded once the device is closed.
func (n *node) close() error {
	err := n.dev.Close()
	if cerr := n.closeCapture(); err == nil {
		err = cerr
	}
	return err
}

func (n *node) closeCapture() error {
	if n.capF == nil {
		return nil
	}
	var err error
	if n.tap != nil {
		err = n.tap.Err()
	}
	for _, e := range []error{n.capW.Close(), n.capF.Close()} {
		if err == nil {
			err = e
		}
	}
	n.capF = nil
	if err != nil {
		return fmt.Errorf("-capture: %w", err)
	}
	return nil
}
