// Package perftest is perftest's seven RDMA benchmarks on a goroce device:
// ib_send_bw, ib_write_bw, ib_read_bw, ib_atomic_bw, ib_send_lat,
// ib_write_lat and ib_read_lat (cmd/ib_* are their mains). Each speaks
// perftest's TCP out-of-band protocol byte for byte (as perftest 6.06, the
// version it announces: versions, system data, MTU, the per-QP address
// records with GID, the hand-shakes that act as barriers, and the BW
// reports), runs the same traffic (the same opcodes, addresses, depths,
// completion moderation and message sizes) and prints perftest's test
// information and result tables, so that the real perftest and these run
// against each other.
//
// They behave as perftest does on a device it does not know, rxe say: the
// RoCEv2 IPv4 GID (index 1) unless -x, no inline data (-I, and READ and
// atomic tests, print perftest's "Device not recognized to implement
// inline feature" note), as many outstanding READs as the device allows
// (128). -h and -V exit with status 1, as perftest's do. A send_bw server
// that gets nothing for 120 seconds (-timeout if set) stops and reports
// what it got, as perftest's check_alive does.
//
// Differences, all because a goroce device is a UDP socket in this process:
//
//   - -d takes the IP address to bind the device to (default: the source
//     address of the route to the server; 127.0.0.1 for a server);
//   - goroce's own long options (one or two dashes): -udp-port (this
//     device's and the peer's RoCEv2 UDP port, default 4791), -stats (the
//     device's counters at exit), -timeout (bound every wait for the peer);
//   - -R and -z run through goroce's RDMA CM (package rdmacm) as
//     perftest's through librdmacm: the exchanges over an RC connection
//     on the test's port, the address records as the binary struct
//     pingpong_dest, and with -R the test's RC QPs connected through the
//     CM on that port too (UD with -R is refused);
//   - what perftest offers beyond the flags listed in the usage text
//     (bidirectional, post lists, dual port, multicast, SRQ, XRC, DC, rate
//     limits, CUDA...) is refused with "not supported by goroce";
//   - duration runs (-D) look at the clock in their loops where perftest
//     takes SIGALRM;
//   - busy polls sleep a microsecond after 64 empty polls, so that the Go
//     runtime polls the network when every CPU spins (see cmd/rc_pingpong).
//
// Times are taken with Go's monotonic clock in nanoseconds where perftest
// reads the CPU's cycle counter; the formulas are perftest's, down to its
// integer truncations.
package perftest

// Verb is what a test does: perftest's VerbType.
type Verb uint8

const (
	Send Verb = iota
	Write
	Read
	Atomic
)

var verbNames = [...]string{"Send", "RDMA_Write", "RDMA_Read", "Atomic"}

// Kind is bandwidth or latency: perftest's TestType.
type Kind uint8

const (
	Lat Kind = iota
	BW
)

// Test is one of the seven programs.
type Test struct {
	name string
	verb Verb
	kind Kind
}

// The seven programs.
var (
	SendBW   = &Test{"ib_send_bw", Send, BW}
	WriteBW  = &Test{"ib_write_bw", Write, BW}
	ReadBW   = &Test{"ib_read_bw", Read, BW}
	AtomicBW = &Test{"ib_atomic_bw", Atomic, BW}
	SendLat  = &Test{"ib_send_lat", Send, Lat}
	WriteLat = &Test{"ib_write_lat", Write, Lat}
	ReadLat  = &Test{"ib_read_lat", Read, Lat}
)

// Tests lists them by name.
var Tests = map[string]*Test{
	SendBW.name: SendBW, WriteBW.name: WriteBW, ReadBW.name: ReadBW, AtomicBW.name: AtomicBW,
	SendLat.name: SendLat, WriteLat.name: WriteLat, ReadLat.name: ReadLat,
}

// Name returns the program's name, e.g. "ib_send_bw".
func (t *Test) Name() string { return t.name }

// Version is the perftest version goroce's tools speak and announce.
const Version = "6.06"

// perftest's defaults and limits (perftest_parameters.h).
const (
	defPort        = 18515
	defSizeBW      = 65536
	defSizeLat     = 2
	defSizeAtomic  = 8
	defIters       = 1000
	defItersWriteB = 5000
	defTxBW        = 128
	defTxLat       = 1
	defRxSend      = 512
	defRxRDMA      = 1
	defCQMod       = 100
	defQPTimeout   = 14
	defQKey        = 0x11111111
	maxSize        = 8388608 // -a goes up to 2^23
	minIters       = 5
	maxIters       = 100000000
	maxTx          = 15000
	maxRx          = 16384
	ucMaxRx        = 16000
	maxCQMod       = 1024
	maxQPs         = 16384
	udAddition     = 40
	cqModSizeLimit = 8192 // MSG_SIZE_CQ_MOD_LIMIT: larger messages signal every one
	maxVersion     = 16   // the version string's field, NUL padded
	cachePoll      = 16   // CTX_POLL_BATCH
	atomicAddValue = 1    // ATOMIC_ADD_VALUE
	atomicSwapVal  = 0    // ATOMIC_SWAP_VALUE
)
