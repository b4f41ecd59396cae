package smcr_test

import (
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/goroce/goroce/smcr"
)

// An SMC-R echo between a listener and a dialer of one process, each on its
// own goroce device (127.0.0.1 and 127.0.0.2): the bytes travel as RDMA
// WRITEs into the peer's buffer, the TCP connection carried only the
// handshake. Without privileges neither side can put the SMC option into
// the TCP handshake, so both are told the peer speaks SMC; a UEID makes it
// SMC-Rv2, whose peers need no common IP subnet.
func Example_echo() {
	cfg := smcr.Config{
		Signalling: smcr.SignalConfigured, PeerSpeaksSMC: true,
		UEIDs:           []string{"GOROCE-EXAMPLE"},
		LinkGroupLinger: time.Second, // end the link group soon after the last connection
	}
	ln, err := smcr.Listen("tcp", "127.0.0.1:0", &cfg)
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c) // echo until the client shuts down its side
	}()

	d := smcr.Dialer{Config: cfg, LocalAddr: netip.MustParseAddr("127.0.0.2")}
	c, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello over SMC-R")); err != nil {
		panic(err)
	}
	c.(interface{ CloseWrite() error }).CloseWrite()
	echo, err := io.ReadAll(c)
	if err != nil {
		panic(err)
	}
	info, _ := smcr.Info(c)
	fmt.Printf("%s: %s\n", info.Mode, echo)
	// Output:
	// SMC-R v2: hello over SMC-R
}
