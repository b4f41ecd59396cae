package perftest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/rocev2/device"
)

// comm is perftest's out-of-band channel (perftest_comm over a TCP
// socket). Every exchange is symmetric and of a fixed size: the client
// writes its part and then reads the server's, the server reads and then
// writes. Every byte read is checked before it is used: the peer is hostile
// until proven otherwise.
type comm struct {
	conn    net.Conn
	cm      *cmLink // instead of conn: the channel over the RDMA CM (-z, -R)
	client  bool
	timeout time.Duration
	withGID bool // records carry a GID (gid_index set): 108 bytes, else 59
}

// Record sizes: perftest's KEY_MSG_SIZE and KEY_MSG_SIZE_GID.
const (
	recordLen    = 59
	recordLenGID = 108
)

// dest is a QP's address record (struct pingpong_dest).
type dest struct {
	lid      uint16
	outReads int
	qpn      uint32
	psn      uint32
	rkey     uint32
	vaddr    uint64
	gid      device.GID
	srqn     uint32
}

// marshal formats d as perftest's KEY_PRINT_FMT(_GID), NUL-terminated, of
// exactly recordLen(GID) bytes.
func (d *dest) marshal(withGID bool) []byte {
	var s string
	if withGID {
		g := d.gid
		s = fmt.Sprintf("%04x:%04x:%06x:%06x:%08x:%016x:", d.lid, d.outReads, d.qpn, d.psn, d.rkey, d.vaddr)
		for _, b := range g {
			s += fmt.Sprintf("%02x:", b)
		}
		s += fmt.Sprintf("%08x:", d.srqn)
	} else {
		s = fmt.Sprintf("%04x:%04x:%06x:%06x:%08x:%016x:%08x", d.lid, d.outReads, d.qpn, d.psn, d.rkey, d.vaddr, d.srqn)
	}
	n := recordLen
	if withGID {
		n = recordLenGID
	}
	b := make([]byte, n)
	copy(b, s) // every field fits its width, so the NUL lands at n-1
	return b
}

// errRecord says a peer's record is not perftest's format.
var errRecord = errors.New("malformed address record from the peer")

// parseDest reads a record as ethernet_read_keys does, but refuses what
// that would silently misread: every field must be hex of its width.
func parseDest(b []byte, withGID bool) (dest, error) {
	s, _, _ := strings.Cut(string(b), "\x00")
	f := strings.Split(s, ":")
	want := 7
	if withGID {
		want = 24 // 6 fields, 16 GID bytes, the SRQ number, and the empty rest after the last colon
	}
	if len(f) != want || (withGID && f[23] != "") {
		return dest{}, fmt.Errorf("%w: %q", errRecord, s)
	}
	hex := func(i, bits int) (uint64, error) {
		v, err := strconv.ParseUint(f[i], 16, bits)
		if err != nil {
			return 0, fmt.Errorf("%w: field %d of %q", errRecord, i+1, s)
		}
		return v, nil
	}
	var d dest
	var vals [6]uint64
	for i, bits := range []int{16, 16, 24, 24, 32, 64} {
		v, err := hex(i, bits)
		if err != nil {
			return dest{}, err
		}
		vals[i] = v
	}
	d.lid, d.outReads, d.qpn, d.psn, d.rkey, d.vaddr = uint16(vals[0]), int(vals[1]), uint32(vals[2]), uint32(vals[3]), uint32(vals[4]), vals[5]
	srq := 6
	if withGID {
		for i := range d.gid {
			v, err := hex(6+i, 8)
			if err != nil {
				return dest{}, err
			}
			d.gid[i] = byte(v)
		}
		srq = 22
	}
	v, err := hex(srq, 32)
	if err != nil {
		return dest{}, err
	}
	d.srqn = uint32(v)
	return d, nil
}

// dial is ethernet_client_connect.
func dial(server string, port int, timeout time.Duration) (*comm, error) {
	addr := net.JoinHostPort(server, strconv.Itoa(port))
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, fmt.Errorf("Couldn't connect to %s:%d: %w", server, port, err)
	}
	return &comm{conn: conn, client: true, timeout: timeout}, nil
}

// accept is ethernet_server_connect on a bound listener: one client.
func accept(ln net.Listener, timeout time.Duration) (*comm, error) {
	if tl, ok := ln.(*net.TCPListener); ok && timeout > 0 {
		tl.SetDeadline(time.Now().Add(timeout))
	}
	conn, err := ln.Accept()
	ln.Close()
	if err != nil {
		return nil, fmt.Errorf("server accept: %w\naccept() failed", err)
	}
	return &comm{conn: conn, timeout: timeout}, nil
}

func (c *comm) close() error {
	if c.cm != nil {
		return c.cm.close()
	}
	return c.conn.Close()
}

// done is the end of ctx_close_connection: "done" and its NUL, written
// and never read.
func (c *comm) done() error {
	if c.cm != nil {
		return nil // ctx_close_connection writes "done" to a socket only
	}
	if c.timeout > 0 {
		c.conn.SetDeadline(time.Now().Add(c.timeout))
	}
	if _, err := c.conn.Write([]byte("done\x00")); err != nil {
		return fmt.Errorf(" Client write: %w\nCouldn't write to socket", err)
	}
	return nil
}

// xchg is ctx_xchg_data: mine goes, len(mine) bytes of the peer's come
// back, in the order of the side.
func (c *comm) xchg(mine []byte) ([]byte, error) {
	if c.cm != nil {
		return c.xchgCM(mine)
	}
	if c.timeout > 0 {
		c.conn.SetDeadline(time.Now().Add(c.timeout))
	}
	theirs := make([]byte, len(mine))
	write := func() error {
		if _, err := c.conn.Write(mine); err != nil {
			return fmt.Errorf("client write: %w\nCouldn't send reports", err)
		}
		return nil
	}
	read := func() error {
		if _, err := io.ReadFull(c.conn, theirs); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("ethernet_read_data: Couldn't read reports: the peer closed the connection (did it fail? see its output)")
			}
			return fmt.Errorf("ethernet_read_data: Couldn't read reports: %w", err)
		}
		return nil
	}
	first, second := read, write
	if c.client {
		first, second = write, read
	}
	if err := first(); err != nil {
		return nil, err
	}
	if err := second(); err != nil {
		return nil, err
	}
	return theirs, nil
}

// handshake is ctx_hand_shake: our record for the peer's.
func (c *comm) handshake(my *dest) (dest, error) {
	mine := my.marshal(c.withGID)
	if c.cm != nil {
		mine = my.marshalCM()
	}
	b, err := c.xchg(mine)
	if err != nil {
		return dest{}, fmt.Errorf("%w\n Failed to exchange data between server and clients", err)
	}
	if c.cm != nil {
		return parseDestCM(b)
	}
	return parseDest(b, c.withGID)
}

// xchgCM is ctx_xchg_data_rdma: the client sends, then receives; the
// server receives, then sends.
func (c *comm) xchgCM(mine []byte) ([]byte, error) {
	if c.client {
		if err := c.cm.write(mine); err != nil {
			return nil, fmt.Errorf("%w\n Unable to write to socket/rdma_cm", err)
		}
		theirs, err := c.cm.read(len(mine))
		if err != nil {
			return nil, fmt.Errorf("%w\n Unable to read from socket/rdma_cm", err)
		}
		return theirs, nil
	}
	theirs, err := c.cm.read(len(mine))
	if err != nil {
		return nil, fmt.Errorf("%w\n Unable to read to socket/rdma_cm", err)
	}
	if err := c.cm.write(mine); err != nil {
		return nil, fmt.Errorf("%w\n Unable to write from socket/rdma_cm", err)
	}
	return theirs, nil
}

// versions is exchange_versions: 16 bytes, NUL padded, each way.
func (c *comm) versions(mine string) (string, error) {
	b := make([]byte, maxVersion)
	copy(b, mine)
	theirs, err := c.xchg(b)
	if err != nil {
		return "", fmt.Errorf("%w\n Failed to exchange data between server and clients", err)
	}
	s, _, _ := strings.Cut(string(theirs), "\x00")
	return s, nil
}

// atof is C's atof on a version string: the longest prefix that is a
// number, 0 if none.
func atof(s string) float64 {
	end := 0
	dot := false
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || s[end] == '.' && !dot) {
		if s[end] == '.' {
			dot = true
		}
		end++
	}
	v, err := strconv.ParseFloat(strings.TrimSuffix(s[:end], "."), 64)
	if err != nil {
		return 0
	}
	return v
}

// sysData is check_sys_data: the cycle buffer and cache line size, 4
// bytes big-endian each; both sides take the larger of each.
func (c *comm) sysData(cycleBuffer, cacheLine int) (int, int, error) {
	out := make([]int, 2)
	for i, v := range []int{cycleBuffer, cacheLine} {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(v))
		theirs, err := c.xchg(b[:])
		if err != nil {
			return 0, 0, fmt.Errorf("%w\n Failed to exchange Page Size data between server and client", err)
		}
		out[i] = max(v, int(int32(binary.BigEndian.Uint32(theirs))))
	}
	return out[0], out[1], nil
}

// mtu is check_mtu's exchange: our IB MTU enum as decimal ASCII and its
// NUL (2 bytes, or 4 for a peer older than 5.31); the smaller valid one
// wins.
func (c *comm) mtu(mine int, remVersion float64) (int, error) {
	n := 2
	if remVersion < 5.31 {
		n = 4
	}
	b := make([]byte, n)
	copy(b, strconv.Itoa(mine))
	theirs, err := c.xchg(b)
	if err != nil {
		return 0, fmt.Errorf("%w\n Failed to exchange data between server and clients", err)
	}
	s, _, _ := strings.Cut(string(theirs), "\x00")
	rem, err := strconv.Atoi(s)
	if err == nil && rem >= 1 && rem <= 5 && rem < mine {
		return rem, nil
	}
	return mine, nil
}

// bwReport is struct bw_report_data, the part that crosses the wire.
type bwReport struct {
	size      uint64
	iters     uint64
	bwPeak    float64
	bwAvg     float64
	msgRate   float64
	perPortBW [2]float64
}

// bwReports is xchg_bw_reports: size (8 bytes), iterations (8, or 4 for a
// peer older than 5.33), peak, average and message rate (doubles), each
// big-endian and each its own exchange.
func (c *comm) bwReports(my *bwReport, remVersion float64) (bwReport, error) {
	var rem bwReport
	u64 := func(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
	fields := []struct {
		mine []byte
		put  func([]byte)
	}{
		{u64(my.size), func(b []byte) { rem.size = binary.BigEndian.Uint64(b) }},
		{nil, nil}, // iterations: below
		{u64(math.Float64bits(my.bwPeak)), func(b []byte) { rem.bwPeak = math.Float64frombits(binary.BigEndian.Uint64(b)) }},
		{u64(math.Float64bits(my.bwAvg)), func(b []byte) { rem.bwAvg = math.Float64frombits(binary.BigEndian.Uint64(b)) }},
		{u64(math.Float64bits(my.msgRate)), func(b []byte) { rem.msgRate = math.Float64frombits(binary.BigEndian.Uint64(b)) }},
	}
	if remVersion >= 5.33 {
		fields[1] = struct {
			mine []byte
			put  func([]byte)
		}{u64(my.iters), func(b []byte) { rem.iters = binary.BigEndian.Uint64(b) }}
	} else {
		fields[1] = struct {
			mine []byte
			put  func([]byte)
		}{binary.BigEndian.AppendUint32(nil, uint32(my.iters)), func(b []byte) { rem.iters = uint64(binary.BigEndian.Uint32(b)) }}
	}
	for _, f := range fields {
		b, err := c.xchg(f.mine)
		if err != nil {
			return rem, fmt.Errorf("%w\n Failed to exchange data between server and clients", err)
		}
		f.put(b)
	}
	return rem, nil
}
