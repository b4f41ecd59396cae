// Package pcap writes and reads capture files of what a goroce device sends
// and receives, and registers gopacket layers for RoCEv2 (BTH, every extended
// header, the ICRC as a trailer) and for SMC (CLC over TCP; LLC and CDC in RC
// SEND payloads; the SMC TCP option), so that standard gopacket tooling
// decodes goroce's captures and those of kernel rxe peers.
//
// Importing the package registers the layers (RoCEv2 types 1700-1719) and
// binds UDP port 4791 to LayerTypeBTH, so gopacket.NewPacket decodes
// Ethernet/IP/UDP/BTH/extended headers/payload; VerifyICRC checks a decoded
// packet's ICRC against its IP and UDP headers. NewDecodingLayers gives the
// allocation-free gopacket.DecodingLayerParser path.
//
// Writer records frames (or RoCEv2 packets of a UDP socket backend, framed
// in synthesised Ethernet/IP/UDP headers) as pcapng with per-packet
// direction and comments, or as classic pcap; Reader reads either back.
// Tap wraps any backend.Backend and records every packet it sends and
// receives through a Writer, so that a device is captured without hooks in
// the device or its queue pairs (gVisor's sniffer endpoint works the same
// way).
//
// gopacket stays out of the data path: only this package (and tests) import
// it. The layers reuse the rocev2 header views rather than parsing again.
package pcap
