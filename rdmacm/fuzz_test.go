package rdmacm

import (
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/goroce/goroce/internal/rxevectors"
	"github.com/goroce/goroce/rdmacm/cmwire"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/memlink"
	"github.com/goroce/goroce/rocev2/device"
)

// FuzzQP1 feeds what the device's receive path hands to QP 1 (a packet
// from the BTH on, from a peer) through the GSI and the CM of a device with
// an RC and a UD listener, as the receive goroutine and the CM's would,
// but in one goroutine. Nothing may panic, and the CM's state stays
// within its bounds.
func FuzzQP1(f *testing.F) {
	frames, err := rxevectors.Frames(filepath.Join("..", "conformance", "testdata", "rxe", "rping.pcap"))
	if err != nil {
		f.Fatal(err)
	}
	for _, fr := range frames {
		if len(fr) > 42 && fr[42] == 0x64 {
			f.Add(fr[42 : len(fr)-4])
		}
	}
	network := memlink.NewNetwork()
	be, err := network.Attach(netip.MustParseAddrPort("127.0.0.1:4791"))
	if err != nil {
		f.Fatal(err)
	}
	dev, err := device.New(device.Config{Backend: be})
	if err != nil {
		f.Fatal(err)
	}
	defer dev.Close()
	cfg := testConfig
	cfg.MaxIDs = 64
	c, err := New(dev, cfg)
	if err != nil {
		f.Fatal(err)
	}
	defer func() {
		c.mu.Lock()
		c.closed = false // see below: Close must stop the real goroutine
		c.mu.Unlock()
		c.Close()
	}()
	for _, lc := range []ListenConfig{{Addr: netip.MustParseAddrPort("0.0.0.0:7174"), Backlog: 8},
		{Addr: netip.MustParseAddrPort("0.0.0.0:7174"), PortSpace: cmwire.PortSpaceUDP, Backlog: 8}} {
		if _, err := c.Listen(lc); err != nil {
			f.Fatal(err)
		}
	}
	// From here the fuzzer is the CM's goroutine: marked closed, the real
	// one takes nothing it queues.
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	g := gsi{c}
	src := netip.MustParseAddrPort("198.18.0.12:55410")
	f.Fuzz(func(t *testing.T, data []byte) {
		buf := append(make([]byte, 0, len(data)+rocev2.ICRCLen), data...)
		buf = append(buf, 0, 0, 0, 0) // the ICRC the backend verified
		var pkt rocev2.Packet
		if pkt.Parse(buf) != nil {
			return
		}
		g.HandlePacket(&pkt, &backend.Incoming{Buf: buf, Src: src})
		for {
			select {
			case m := <-c.rx:
				c.mu.Lock()
				c.receive(cmwire.MAD(m.mad[:]), m.from)
				c.expire()
				if len(c.ids) > c.cfg.MaxIDs {
					t.Fatalf("%d IDs, bound %d", len(c.ids), c.cfg.MaxIDs)
				}
				c.unlock()
				continue
			default:
			}
			break
		}
	})
}
