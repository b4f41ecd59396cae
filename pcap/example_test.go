package pcap_test

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/google/gopacket"

	"github.com/goroce/goroce/pcap"
)

// Reading a capture of a kernel rxe peer (ibv_rc_pingpong -s 1024) with the
// gopacket layers this package registers: every RoCEv2 packet decodes to
// its BTH, and its ICRC verifies against the IP and UDP headers it came in.
func Example_readCapture() {
	f, err := os.Open("../conformance/testdata/rxe/rc_pingpong_s1024.pcap")
	if err != nil {
		panic(err)
	}
	defer f.Close()
	r, err := pcap.NewReader(f)
	if err != nil {
		panic(err)
	}
	ops := map[string]int{}
	verified := 0
	for {
		data, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			panic(err)
		}
		p := gopacket.NewPacket(data, r.LinkType(), gopacket.Default)
		bth, ok := p.Layer(pcap.LayerTypeBTH).(*pcap.BTH)
		if !ok {
			continue // the TCP exchange of QP numbers
		}
		ops[bth.Opcode.String()]++
		if ok, _ := pcap.VerifyICRC(p); ok {
			verified++
		}
	}
	fmt.Println(ops)
	fmt.Println("ICRCs verified:", verified)
	// Output:
	// map[RC ACKNOWLEDGE:10 RC SEND_ONLY:10]
	// ICRCs verified: 20
}
