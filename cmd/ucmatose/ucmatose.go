package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/goroce/goroce/cmd/internal/cmtool"
	"github.com/goroce/goroce/cmd/internal/getopt"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rdmacm"
	"github.com/goroce/goroce/rdmacm/cmwire"
	"github.com/goroce/goroce/rocev2/device"
)

type config struct {
	server, bind netip.Addr // -s, -b
	conns        int
	count, size  int
	port         uint16
	ps           cmwire.PortSpace
	goroce       cmtool.Options
}

var opts = append([]getopt.Opt{
	{Short: 's', HasArg: true}, {Short: 'b', HasArg: true}, {Short: 'f', HasArg: true}, {Short: 'P', HasArg: true},
	{Short: 'c', HasArg: true}, {Short: 'C', HasArg: true}, {Short: 'S', HasArg: true}, {Short: 't', HasArg: true},
	{Short: 'p', HasArg: true}, {Short: 'a', HasArg: true}, {Short: 'm'},
}, cmtool.Opts...)

func usage(w io.Writer) {
	fmt.Fprint(w, "usage: ucmatose\n\t[-s server_address]\n\t[-b bind_address]\n\t[-f address_format]\n\t    name, ip, ipv6, or gid\n"+
		"\t[-P port_space]\n\t    tcp or ib\n\t[-c connections]\n\t[-C message_count]\n\t[-S message_size]\n"+
		"\t[-t type_of_service]\n\t[-p port_number]\n\t[-m(igrate)]\n\t[-a ack_timeout]\n")
	fmt.Fprint(w, cmtool.Usage)
}

func parse(args []string, stdout, stderr io.Writer) (*config, bool) {
	cfg := &config{conns: 1, count: 10, size: 100, port: 7471, ps: cmwire.PortSpaceTCP}
	p := getopt.Parser{Prog: "ucmatose", Opts: opts}
	_, err := p.Parse(args, func(i int, val string) error {
		o := opts[i]
		if o.Short == 0 {
			return cfg.goroce.Set(i-(len(opts)-len(cmtool.Opts)), val)
		}
		var err error
		switch o.Short {
		case 's':
			cfg.server, err = netip.ParseAddr(val)
		case 'b':
			cfg.bind, err = netip.ParseAddr(val)
		case 'P':
			if strings.HasPrefix(strings.ToLower(val), "ib") {
				cfg.ps = cmwire.PortSpaceIB
			} else if !strings.HasPrefix(strings.ToLower(val), "tcp") {
				fmt.Fprintln(stderr, "Warning: unknown port space format")
			}
		case 'f':
			if !strings.HasPrefix(strings.ToLower(val), "ip") && !strings.HasPrefix(strings.ToLower(val), "name") {
				fmt.Fprintln(stderr, "Warning: unknown address format")
			}
		case 'c':
			cfg.conns, _ = strconv.Atoi(val)
		case 'C':
			cfg.count, _ = strconv.Atoi(val)
		case 'S':
			cfg.size, _ = strconv.Atoi(val)
		case 'p':
			n, _ := strconv.Atoi(val)
			cfg.port = uint16(n)
		case 't', 'a', 'm':
			// type of service, ACK timeout, channel migration: nothing
			// goroce's connections change for them.
		}
		if err != nil {
			return fmt.Errorf("-%c %s: %w (goroce takes numeric addresses)", o.Short, val, err)
		}
		return nil
	}, io.Discard)
	if err != nil {
		if !errors.Is(err, getopt.ErrBadOption) && !errors.Is(err, getopt.ErrUsage) {
			fmt.Fprintln(stderr, "ucmatose:", err)
		}
		usage(stdout)
		return nil, false
	}
	if cfg.size == 0 {
		cfg.count = 0
	}
	cfg.conns = max(cfg.conns, 0)
	return cfg, true
}

// node is one connection (struct cmatest_node).
type node struct {
	conn *rdmacm.Conn
	mr   *device.MR
	send *cq.CQ
	recv *cq.CQ
}

func (c *config) qpConfig() (rdmacm.QPConfig, int, error) {
	cqe := max(c.count, 1)
	send, err := cq.New(cqe, cq.Config{})
	if err != nil {
		return rdmacm.QPConfig{}, 0, err
	}
	recv, err := cq.New(cqe, cq.Config{})
	if err != nil {
		return rdmacm.QPConfig{}, 0, err
	}
	return rdmacm.QPConfig{Cap: qp.Cap{MaxSendWR: cqe, MaxRecvWR: cqe, MaxSendSGE: 1, MaxRecvSGE: 1}, SigAll: true,
		SendCQ: send, RecvCQ: recv}, cqe, nil
}

// prepare registers the message buffer and posts the receives
// (init_node's create_message and post_recvs).
func (c *config) prepare(n *node) func(*rdmacm.Conn) error {
	return func(conn *rdmacm.Conn) error {
		n.conn, n.send, n.recv = conn, conn.SendCQ(), conn.RecvCQ()
		if c.count == 0 {
			return nil
		}
		var err error
		if n.mr, err = conn.PD().RegisterMR(make([]byte, c.size), device.AccessLocalWrite); err != nil {
			return err
		}
		for range c.count {
			if _, err := conn.QP().PostRecv([]qp.RecvWR{{SGL: []qp.SGE{{Addr: n.mr.VA(), Length: uint32(c.size), LKey: n.mr.LKey()}}}}); err != nil {
				return fmt.Errorf("failed to post receives: %w", err)
			}
		}
		return nil
	}
}

func (c *config) postSends(n *node) error {
	if n.conn == nil || c.count == 0 {
		return nil
	}
	for range c.count {
		if _, err := n.conn.QP().PostSend([]qp.SendWR{{Opcode: qp.WRSend,
			SGL: []qp.SGE{{Addr: n.mr.VA(), Length: uint32(c.size), LKey: n.mr.LKey()}}}}); err != nil {
			return fmt.Errorf("failed to post sends: %w", err)
		}
	}
	return nil
}

// pollAll takes count completions of every connected node's CQ (poll_cqs).
func (c *config) pollAll(ctx context.Context, nodes []*node, recv bool) error {
	for _, n := range nodes {
		if n.conn == nil {
			continue
		}
		q := n.send
		if recv {
			q = n.recv
		}
		if err := cmtool.PollN(ctx, q, c.count, nil); err != nil {
			return fmt.Errorf("cmatose: failed polling CQ: %w", err)
		}
	}
	return nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, ok := parse(args, stdout, stderr)
	if !ok {
		return 1
	}
	nodes := make([]*node, cfg.conns)
	for i := range nodes {
		nodes[i] = &node{}
	}
	return cmtool.Example(ctx, "cmatose", "ucmatose", &cfg.goroce, cfg.bind, cfg.server, stdout, stderr,
		func(ctx context.Context, st *cmtool.Stack) int {
			if cfg.server.IsValid() {
				return runClient(ctx, cfg, st, nodes, stdout)
			}
			return runServer(ctx, cfg, st, nodes, stdout, stderr)
		},
		func() {
			for _, n := range nodes {
				if n.conn != nil {
					n.conn.Close()
				}
			}
		})
}

func runClient(ctx context.Context, cfg *config, st *cmtool.Stack, nodes []*node, stdout io.Writer) int {
	fmt.Fprintln(stdout, "cmatose: starting client")
	fmt.Fprintln(stdout, "cmatose: connecting")
	// Every connection at once, as the original resolves them all and
	// then handles the CM's events as they come.
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		qpc, _, err := cfg.qpConfig()
		if err != nil {
			errs[i] = err
			continue
		}
		d := rdmacm.Dialer{CM: st.CM, PortSpace: cfg.ps, Source: netip.AddrPortFrom(cfg.bind, 0),
			RoCEPort: cfg.goroce.PeerPort(), QP: qpc, Prepare: cfg.prepare(n),
			Param: &rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 5}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if conn, err := d.Dial(ctx, netip.AddrPortFrom(cfg.server, cfg.port)); err != nil {
				errs[i], n.conn = err, nil
			} else {
				n.conn = conn
			}
		}()
	}
	wg.Wait()
	ret := 0
	for _, err := range errs {
		if err != nil && ret == 0 {
			ret = cmtool.PrintEvent(stdout, "cmatose", err)
		}
	}
	if ret == 0 && cfg.count > 0 {
		fmt.Fprintln(stdout, "receiving data transfers")
		if err := cfg.pollAll(ctx, nodes, true); err != nil {
			fmt.Fprintln(stdout, err)
			return -1
		}
		fmt.Fprintln(stdout, "sending replies")
		for _, n := range nodes {
			if err := cfg.postSends(n); err != nil {
				fmt.Fprintln(stdout, err)
				return -1
			}
		}
		fmt.Fprintln(stdout, "data transfers complete")
	}
	// disconnect_events: the server ends every connection.
	for _, n := range nodes {
		if n.conn != nil {
			select {
			case <-n.conn.Done():
			case <-ctx.Done():
				return -1
			}
		}
	}
	return ret
}

func runServer(ctx context.Context, cfg *config, st *cmtool.Stack, nodes []*node, stdout, stderr io.Writer) int {
	l, err := st.CM.Listen(rdmacm.ListenConfig{Addr: netip.AddrPortFrom(cfg.bind, cfg.port), PortSpace: cfg.ps})
	// The original says it starts before it listens; goroce's says it once
	// it listens, so that whoever waits for the line may connect at once.
	fmt.Fprintln(stdout, "cmatose: starting server")
	if err != nil {
		fmt.Fprintf(stderr, "cmatose: bind address failed: %v\n", err)
		return -1
	}
	defer l.Close()
	if listening != nil {
		listening()
	}
	// connect_events: accept requests as they come until -c are
	// established; one beyond them is refused.
	type done struct {
		i   int
		err error
	}
	results := make(chan done, len(nodes))
	accepted, left := 0, len(nodes)
	reqs := make(chan *rdmacm.Request)
	go func() {
		for {
			r, err := l.Accept(ctx)
			if err != nil {
				close(reqs)
				return
			}
			select {
			case reqs <- r:
			case <-ctx.Done():
				r.Reject(nil)
				close(reqs)
				return
			}
		}
	}()
	ret := 0
	for left > 0 {
		select {
		case r, ok := <-reqs:
			if !ok {
				return -1
			}
			if accepted == len(nodes) {
				fmt.Fprintln(stdout, "cmatose: failing connection request")
				r.Reject(nil)
				continue
			}
			i := accepted
			accepted++
			qpc, _, err := cfg.qpConfig()
			if err != nil {
				results <- done{i, err}
				continue
			}
			go func() {
				conn, err := r.Accept(ctx, rdmacm.AcceptConfig{QP: qpc, Prepare: cfg.prepare(nodes[i])})
				if err != nil {
					nodes[i].conn = nil
				} else {
					nodes[i].conn = conn
				}
				results <- done{i, err}
			}()
		case d := <-results:
			left--
			if d.err != nil {
				ret = cmtool.PrintEvent(stdout, "cmatose", d.err)
			}
		case <-ctx.Done():
			return -1
		}
	}
	if cfg.count > 0 {
		fmt.Fprintln(stdout, "initiating data transfers")
		for _, n := range nodes {
			if err := cfg.postSends(n); err != nil {
				fmt.Fprintln(stdout, err)
				return -1
			}
		}
		fmt.Fprintln(stdout, "completing sends")
		if err := cfg.pollAll(ctx, nodes, false); err != nil {
			fmt.Fprintln(stdout, err)
			return -1
		}
		fmt.Fprintln(stdout, "receiving data transfers")
		if err := cfg.pollAll(ctx, nodes, true); err != nil {
			fmt.Fprintln(stdout, err)
			return -1
		}
		fmt.Fprintln(stdout, "data transfers complete")
	}
	fmt.Fprintln(stdout, "cmatose: disconnecting")
	for _, n := range nodes {
		if n.conn != nil {
			n.conn.Disconnect()
		}
	}
	for _, n := range nodes {
		if n.conn != nil {
			select {
			case <-n.conn.Done():
			case <-ctx.Done():
				return -1
			}
		}
	}
	fmt.Fprintln(stdout, "disconnected")
	return ret
}

// listening, if set (by tests), is called once the server listens.
var listening func()
