package perftest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/goroce/goroce/cmd/internal/control"
	"github.com/goroce/goroce/internal/backendflag"
	"github.com/goroce/goroce/internal/devinfo"
	"github.com/goroce/goroce/rdmacm"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
)

// deviceName is what the tools call the device in their output.
const deviceName = "goroce0"

// hopLimit is the GRH hop limit (IP TTL) of the tests' address vectors:
// what the kernel puts in a user QP's (the route's default).
const hopLimit = 64

// Main is test t with its arguments and output streams; it returns the
// exit status. Like perftest, -h and -V exit with status 1.
func Main(t *Test, args []string, stdout, stderr io.Writer) int {
	p, err := t.parse(args, stderr)
	switch {
	case errors.Is(err, errHelp):
		t.usage(stdout)
		return 1
	case errors.Is(err, errVersion):
		fmt.Fprintf(stdout, "Version: %s\n", Version)
		return 1
	case errors.Is(err, errBadOption):
		fmt.Fprint(stderr, " Invalid Command or flag.\n Please check command line and run again.\n\n")
		t.usage(stdout)
		fmt.Fprint(stderr, " Parser function exited with Error\n")
		return 1
	case err != nil:
		fmt.Fprint(stderr, " Parser function exited with Error\n")
		return 1
	}
	if err := p.run(stdout, stderr); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// session is one run: the parameters, the device, the channel, the
// context, the address records.
type session struct {
	p    *params
	out  io.Writer
	errw io.Writer
	dev  *device.Device
	comm *comm
	cm   *rdmacm.CM // -z, -R: the device's connection manager
	// serverAddr is the client's server, resolved (the CM dials addresses).
	serverAddr netip.Addr
	c          *ctx
	remVer     float64
	my         []dest
	rem        []dest
}

func (p *params) run(stdout, stderr io.Writer) error {
	s := &session{p: p, out: stdout, errw: stderr}
	var err error
	if s.dev, err = p.openDevice(stderr); err != nil {
		return err
	}
	defer s.dev.Close()
	if p.stats {
		defer devinfo.WriteCounters(stdout, s.dev)
	}
	if err := s.checkLink(); err != nil {
		return err
	}
	if p.useCM {
		// The peer's device receives on -udp-port, as perftest's address
		// vectors say (ctx_connect), whatever port its MADs come from.
		cfg := rdmacm.Config{PeerRoCEPort: func(netip.AddrPort) uint16 { return p.udpPort }}
		if s.cm, err = rdmacm.New(s.dev, cfg); err != nil {
			return fmt.Errorf(" Unable to create RDMA_CM resources: %w", err)
		}
		defer s.cm.Close()
	}
	if err := s.establish(); err != nil {
		return err
	}
	defer s.comm.close()
	if err := s.exchangeParams(); err != nil {
		return err
	}
	p.printTestInfo(stdout, s.mtu())
	if s.c, err = newCtx(p, s.dev); err != nil {
		return err
	}
	defer s.c.close()
	s.c.curMTU = s.mtu()
	if p.workCM {
		if err := s.connectCM(); err != nil {
			return err
		}
	}
	n := 1
	if p.duration == 0 {
		n = p.iters * p.numQPs
	}
	s.c.tposted, s.c.tcompleted = make([]int64, n), make([]int64, n)
	gid, err := s.dev.GID(p.gidIndex)
	if err != nil {
		return fmt.Errorf(" Unable to set up my IB connection parameters: GID index %d: %w", p.gidIndex, err)
	}
	s.my = s.c.myDests(gid)
	s.rem = make([]dest, len(s.my))
	switch {
	case p.t.kind == BW && p.t.verb == Send:
		return s.sendBW()
	case p.t.kind == BW:
		return s.rdmaBW()
	case p.t.verb == Send:
		return s.sendLat()
	default:
		return s.rdmaLat()
	}
}

// curMTU is the MTU the exchange settled on.
func (s *session) mtu() rocev2.MTU { return rocev2.MTU(s.p.curMTU) }

// openDevice opens the goroce device on -d's address, or on the source
// address of the route to the server, or as a server on 127.0.0.1.
func (p *params) openDevice(stderr io.Writer) (*device.Device, error) {
	var addr netip.Addr
	switch {
	case p.dev != "" && p.dev != control.DeviceName:
		a, err := p.localAddr()
		if err != nil {
			return nil, fmt.Errorf("IB device %s not found\n%w\n Unable to find the Infiniband/RoCE device", p.dev, err)
		}
		addr = a
	case p.server != "":
		c, err := net.Dial("udp", net.JoinHostPort(p.server, strconv.Itoa(p.port)))
		if err != nil {
			return nil, fmt.Errorf(" Unable to find the Infiniband/RoCE device: no local address routes to %s (pass -d ADDR): %w", p.server, err)
		}
		addr = c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
		c.Close()
	default:
		addr = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	be, _, err := backendflag.Open(backendflag.Spec{Kind: backendflag.UDP, Port: p.udpPort}, addr)
	var dev *device.Device
	if err == nil {
		if dev, err = device.New(device.Config{Backend: be}); err != nil {
			be.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf(" Couldn't get context for the device: %w%s", err, control.OpenHint(err, addr, p.udpPort))
	}
	if err := dev.Publish(""); err != nil {
		fmt.Fprintln(os.Stderr, p.t.name+": warning:", err)
	}
	return dev, nil
}

// checkLink is check_link for a device perftest does not know (as rxe):
// the GID index (the RoCEv2 one unless -x), the MTU (-m no larger than the
// port's), outstanding reads (the device's maximum), and no inline data.
func (s *session) checkLink() error {
	p, port := s.p, s.dev.Port()
	if !p.gidUser {
		p.gidIndex = 1
	} else if _, err := s.dev.GID(p.gidIndex); err != nil {
		return fmt.Errorf(" Failed to query GID index %d: %w\n Couldn't get context for the device", p.gidIndex, err)
	}
	active := port.ActiveMTU
	p.curMTU = int(active)
	if p.mtu != 0 {
		m := rocev2.MTUFromBytes(p.mtu)
		if m.Bytes() != p.mtu {
			fmt.Fprintf(s.errw, " Invalid MTU - %d \n Please choose mtu from {256,512,1024,2048,4096}\n Will run with the port active mtu - %d\n", p.mtu, active)
			m = active
		}
		if m > active {
			fmt.Fprintf(s.out, "Requested mtu is higher than active mtu \nChanging to active mtu - %d\n", active)
			m = active
		}
		p.curMTU = int(m)
	}
	if p.t.verb == Read || p.t.verb == Atomic {
		max := s.dev.Attr().MaxQPRdAtom
		switch {
		case p.outReads > max:
			fmt.Fprint(s.out, resultLine)
			fmt.Fprintf(s.errw, " Number of outstanding reads is above max = %d\n Changing to that max value\n", max)
			p.outReads = max
		case p.outReads <= 0:
			p.outReads = max
		}
	} else {
		p.outReads = 1
	}
	if p.inline != -1 {
		fmt.Fprint(s.out, resultLine)
		fmt.Fprint(s.errw, "Device not recognized to implement inline feature. Disabling it\n")
	}
	p.inline = 0
	return nil
}

// establish is establish_connection: the server listens (then says it
// waits) and takes one client; the client connects.
func (s *session) establish() error {
	p := s.p
	var err error
	if p.useCM {
		return s.establishCM()
	}
	if p.isClient() {
		s.comm, err = dial(p.server, p.port, p.timeout)
	} else {
		var ln net.Listener
		// On the device's address: a server on another address of the
		// host has a control port of its own.
		if ln, err = control.Listen(s.dev.LocalAddr().Addr(), p.port); err != nil {
			return fmt.Errorf("Couldn't listen to port %d: %w\n Unable to init the socket connection", p.port, err)
		}
		fmt.Fprint(s.out, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
		s.comm, err = accept(ln, p.timeout)
	}
	if err != nil {
		return fmt.Errorf("%w\n Unable to init the socket connection", err)
	}
	s.comm.withGID = true
	return nil
}

// establishCM is establish_connection over the RDMA CM (-z, -R): the
// server listens on the port and takes one connection; the client makes
// it.
func (s *session) establishCM() error {
	p := s.p
	ctx, cancel := p.cmContext()
	defer cancel()
	var err error
	if p.isClient() {
		if s.serverAddr, err = resolve(ctx, p.server); err != nil {
			return fmt.Errorf("Problem in resolving basic address and port: %w\n Unable to init the socket connection", err)
		}
		s.comm, err = dialCM(ctx, s.cm, p, s.serverAddr)
	} else {
		var ln *rdmacm.Listener
		if ln, err = s.cm.Listen(rdmacm.ListenConfig{Addr: netip.AddrPortFrom(netip.Addr{}, uint16(p.port)), Backlog: 1}); err != nil {
			return fmt.Errorf(" rdma_listen failed on port %d: %w\n Unable to init the socket connection", p.port, err)
		}
		fmt.Fprint(s.out, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
		s.comm, err = acceptCM(ctx, ln, s.dev, p)
	}
	if err != nil {
		return fmt.Errorf("%w\n Unable to init the socket connection", err)
	}
	return nil
}

// resolve is getaddrinfo for AF_INET, as perftest's rdma_cm paths take it.
func resolve(ctx context.Context, host string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), nil
	}
	as, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
	if err != nil {
		return netip.Addr{}, err
	}
	if len(as) == 0 {
		return netip.Addr{}, fmt.Errorf("%s: no IPv4 address", host)
	}
	return as[0].Unmap(), nil
}

// exchangeParams is exchange_versions, check_version_compatibility,
// check_sys_data and check_mtu: what the two sides agree on before the
// test (all skipped with --dont_xchg_versions).
func (s *session) exchangeParams() error {
	p := s.p
	p.cycleBuffer, p.cacheLineSize = os.Getpagesize(), cacheLineSize()
	if p.noXchgVers {
		return s.checkUDSize()
	}
	rv, err := s.comm.versions(Version)
	if err != nil {
		return err
	}
	s.remVer = atof(rv)
	if s.remVer < 5.70 {
		return fmt.Errorf("Current implementation is not compatible with versions older than 5.70 (the peer is %q)", rv)
	}
	if s.remVer >= 5.32 {
		if p.cycleBuffer, p.cacheLineSize, err = s.comm.sysData(p.cycleBuffer, p.cacheLineSize); err != nil {
			return err
		}
		if p.cycleBuffer <= 0 || p.cycleBuffer > 1<<30 || p.cacheLineSize <= 0 || p.cacheLineSize > p.cycleBuffer {
			return fmt.Errorf(" Failed to exchange Page Size data between server and client: unusable cycle buffer %d or cache line %d from the peer", p.cycleBuffer, p.cacheLineSize)
		}
	}
	if s.remVer >= 5.1 {
		m, err := s.comm.mtu(p.curMTU, s.remVer)
		if err != nil {
			return err
		}
		p.curMTU = m
	}
	return s.checkUDSize()
}

// checkUDSize is check_mtu's last step: a UD message fits one packet.
func (s *session) checkUDSize() error {
	p := s.p
	mtu := s.mtu().Bytes()
	if p.conn != UD || p.size <= mtu {
		return nil
	}
	if p.all || !p.reqSize {
		fmt.Fprintf(s.errw, " Max msg size in UD is MTU %d\n Changing msg size to this MTU\n", mtu)
		p.size = mtu
		return nil
	}
	return errors.New(" Max message size in UD cannot be greater than MTU \n Couldn't get context for the device")
}

// cacheLineSize is get_cache_line_size: the L1 data cache's line.
func cacheLineSize() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
			return n
		}
	}
	return 64
}

// handshake is ctx_hand_shake of QP i's records.
func (s *session) handshake(i int) error {
	d, err := s.comm.handshake(&s.my[i])
	if err != nil {
		return err
	}
	s.rem[i] = d
	return nil
}

// barrier is a hand-shake of the first records, which only synchronizes.
func (s *session) barrier() error {
	_, err := s.comm.handshake(&s.my[0])
	return err
}

// closeConn is ctx_close_connection: a last barrier, then "done" and its
// NUL to the peer (which nobody reads) before the socket closes.
func (s *session) closeConn() error {
	if err := s.barrier(); err != nil {
		return fmt.Errorf("%w\nFailed to close connection between server and client", err)
	}
	if err := s.comm.done(); err != nil {
		return fmt.Errorf("%w\nFailed to close connection between server and client", err)
	}
	return nil
}

// exchangeAndConnect is the opening every test shares: each QP's record
// one way and the other, then the QPs connected to the peer's.
func (s *session) exchangeAndConnect() error {
	for i := range s.my {
		if err := s.handshake(i); err != nil {
			return err
		}
	}
	if s.p.workCM {
		return nil // the CM connected them (connectCM)
	}
	if err := s.c.connect(s.my, s.rem); err != nil {
		return fmt.Errorf("%w\n Unable to Connect the HCA's through the link", err)
	}
	return nil
}

// printAddresses prints the local records, and exchanges the records
// again, printing the peer's.
func (s *session) printAddresses() error {
	for i := range s.my {
		s.p.printDest(s.out, "local", &s.my[i])
	}
	for i := range s.my {
		if err := s.handshake(i); err != nil {
			return err
		}
		s.p.printDest(s.out, "remote", &s.rem[i])
	}
	return nil
}

// sizes are the message sizes of the run: with -a every power of two from
// 2 up to 2^23 (UD: up to the MTU), else -s.
func (s *session) sizes() []int {
	p := s.p
	if !p.all {
		return []int{p.size}
	}
	var out []int
	for sz := 2; sz <= maxSize; sz *= 2 {
		if p.conn == UD && sz > s.mtu().Bytes() {
			break
		}
		out = append(out, sz)
	}
	return out
}

func (s *session) warn(msg string) { fmt.Fprint(s.errw, msg) }

// sendBW is send_bw's main: the server counts receives, the client sends;
// each prints its own report.
func (s *session) sendBW() error {
	p, c := s.p, s.c
	if err := s.exchangeAndConnect(); err != nil {
		return err
	}
	if err := s.barrier(); err != nil {
		return err
	}
	if err := s.printAddresses(); err != nil {
		return err
	}
	p.printBWHeader(s.out)
	server := !p.isClient()
	if server {
		p.noPeak = true // the server times its receives as a whole
	}
	var snd *sender
	var rcv *receiver
	if server {
		rcv = c.newReceiver()
	} else {
		snd = c.newSender(s.rem)
	}
	for _, size := range s.sizes() {
		p.size = size
		if server {
			if err := rcv.postAll(); err != nil {
				return fmt.Errorf("%w\n Failed to post receive recv_wqes", err)
			}
		}
		if err := s.barrier(); err != nil {
			return err
		}
		var iters int
		var err error
		if server {
			iters, err = c.runBWServer(rcv, s.warn)
		} else {
			iters, err = c.runBW(snd)
		}
		if err != nil {
			return fmt.Errorf("%w\n Failed to complete run_iter_bw function successfully", err)
		}
		r := c.bwReport(iters)
		p.printBWReport(s.out, &r)
		if p.all {
			if err := s.barrier(); err != nil {
				return err
			}
		}
	}
	fmt.Fprint(s.out, resultLine)
	return s.closeConn()
}

// rdmaBW is write_bw's, read_bw's and atomic_bw's main: the client runs
// and reports, and sends its report to the server, which prints it.
func (s *session) rdmaBW() error {
	p, c := s.p, s.c
	if err := s.exchangeAndConnect(); err != nil {
		return err
	}
	if err := s.printAddresses(); err != nil {
		return err
	}
	if err := s.barrier(); err != nil {
		return err
	}
	p.printBWHeader(s.out)
	if !p.isClient() {
		if err := s.barrier(); err != nil {
			return err
		}
		rem, err := s.comm.bwReports(&bwReport{}, s.remVer)
		if err != nil {
			return err
		}
		p.printBWReport(s.out, &rem)
		if err := s.closeConn(); err != nil {
			return err
		}
		fmt.Fprint(s.out, resultLine)
		return nil
	}
	snd := c.newSender(s.rem)
	var last bwReport
	for _, size := range s.sizes() {
		p.size = size
		snd.setSize(size)
		iters, err := c.runBW(snd)
		if err != nil {
			return fmt.Errorf("%w\n Failed to complete run_iter_bw function successfully", err)
		}
		last = c.bwReport(iters)
		p.printBWReport(s.out, &last)
	}
	fmt.Fprint(s.out, resultLine)
	if err := s.barrier(); err != nil {
		return err
	}
	if _, err := s.comm.bwReports(&last, s.remVer); err != nil {
		return err
	}
	return s.closeConn()
}

// sendLat is send_lat's main: a ping-pong of SENDs, both sides timing
// theirs.
func (s *session) sendLat() error {
	p, c := s.p, s.c
	if err := s.exchangeAndConnect(); err != nil {
		return err
	}
	if err := s.barrier(); err != nil {
		return err
	}
	if err := s.printAddresses(); err != nil {
		return err
	}
	p.printLatHeader(s.out)
	snd, rcv := c.newSender(s.rem), c.newReceiver()
	for _, size := range s.sizes() {
		p.size = size
		snd.setSize(size)
		if err := rcv.postAll(); err != nil {
			return fmt.Errorf("%w\n Failed to post receive recv_wqes", err)
		}
		if err := s.barrier(); err != nil {
			return err
		}
		iters, err := c.runLatSend(snd, rcv)
		if err != nil {
			return err
		}
		s.latReport(iters)
	}
	fmt.Fprint(s.out, resultLine)
	return s.closeConn()
}

// rdmaLat is write_lat's and read_lat's main: write_lat's two sides
// ping-pong, read_lat's client reads from a server that only waits.
func (s *session) rdmaLat() error {
	p, c := s.p, s.c
	if err := s.barrier(); err != nil {
		return err
	}
	if err := s.exchangeAndConnect(); err != nil {
		return err
	}
	if err := s.printAddresses(); err != nil {
		return err
	}
	if err := s.barrier(); err != nil {
		return err
	}
	if p.t.verb == Read && !p.isClient() {
		// Only the client reads: read_lat's server waits for the end
		// and prints no table (what perftest's, on rxe, does).
		if err := s.closeConn(); err != nil {
			return err
		}
		fmt.Fprint(s.out, resultLine)
		return nil
	}
	p.printLatHeader(s.out)
	snd := c.newSender(s.rem)
	for _, size := range s.sizes() {
		p.size = size
		snd.setSize(size)
		var iters int
		var err error
		if p.t.verb == Write {
			iters, err = c.runLatWrite(snd)
		} else {
			iters, err = c.runLatRead(snd)
		}
		if err != nil {
			return err
		}
		s.latReport(iters)
	}
	fmt.Fprint(s.out, resultLine)
	if p.t.verb == Write {
		return nil // write_lat ends without a last hand-shake
	}
	return s.closeConn()
}

func (s *session) latReport(iters int) {
	if s.p.duration > 0 {
		s.c.printLatDurReport(s.out, iters)
	} else {
		s.c.printLatReport(s.out)
	}
}
