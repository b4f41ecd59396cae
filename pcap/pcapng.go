package pcap

// pcapng block and option codes (draft-ietf-opsawg-pcapng) that the writer
// emits and the reader understands. gopacket's pcapgo keeps its own copies
// unexported, and its NgWriter cannot write Enhanced Packet Block options.
const (
	ngBlockSHB = 0x0A0D0D0A // Section Header Block (same value in either byte order)
	ngBlockIDB = 1          // Interface Description Block
	ngBlockPB  = 2          // Packet Block (obsolete, still read)
	ngBlockSPB = 3          // Simple Packet Block
	ngBlockEPB = 6          // Enhanced Packet Block

	ngByteOrderMagic = 0x1A2B3C4D

	ngOptEnd     = 0 // opt_endofopt
	ngOptComment = 1 // opt_comment, UTF-8

	ngOptSHBUserAppl = 4 // shb_userappl

	ngOptIfName     = 2  // if_name
	ngOptIfDesc     = 3  // if_description
	ngOptIfTSResol  = 9  // if_tsresol: 10^-n, or 2^-n with the top bit set
	ngOptIfTSOffset = 14 // if_tsoffset: seconds added to every timestamp

	ngOptEPBFlags = 2 // epb_flags: bits 0-1 direction (1 inbound, 2 outbound)

	// ngTSResolNanos is the if_tsresol the writer uses: nanoseconds.
	ngTSResolNanos = 9
	// ngMaxBlock bounds the blocks the reader decodes, and so allocates:
	// a packet block with a frame of MaxRecordLen bytes and 64 KiB of
	// options (as much as one option can hold).
	ngMaxBlock = 32 + MaxRecordLen + 64<<10
	// ngMaxIfaces bounds the interfaces of a section (the reader keeps
	// each), so that a file of empty interface blocks cannot cost more
	// than a few MiB.
	ngMaxIfaces = 1 << 16
)

// pad4 returns n rounded up to a multiple of 4, as pcapng aligns every
// block body and option value.
func pad4(n int) int { return (n + 3) &^ 3 }
