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
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
)

// port is udaddy's rdma_cm port.
const port = 7174

type config struct {
	server, bind netip.Addr
	conns        int
	count, size  int
	ps           cmwire.PortSpace
	goroce       cmtool.Options
}

var opts = append([]getopt.Opt{
	{Short: 's', HasArg: true}, {Short: 'b', HasArg: true}, {Short: 'c', HasArg: true}, {Short: 'C', HasArg: true},
	{Short: 'S', HasArg: true}, {Short: 't', HasArg: true}, {Short: 'p', HasArg: true}, {Short: 'P', HasArg: true},
	{Short: 'f', HasArg: true},
}, cmtool.Opts...)

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: udaddy\n\t[-s server_address]\n\t[-b bind_address]\n\t[-f address_format]\n\t    name, ip, ipv6, or gid\n"+
		"\t[-P port_space]\n\t    udp or ipoib\n\t[-c connections]\n\t[-C message_count]\n\t[-S message_size]\n"+
		"\t[-t type_of_service]\n\t[-p port_space - %#x for UDP (default), %#x for IPOIB]\n", uint16(cmwire.PortSpaceUDP), uint16(cmwire.PortSpaceIPoIB))
	fmt.Fprint(w, cmtool.Usage)
}

func parse(args []string, stdout, stderr io.Writer) (*config, bool) {
	cfg := &config{conns: 1, count: 10, size: 100, ps: cmwire.PortSpaceUDP}
	p := getopt.Parser{Prog: "udaddy", Opts: opts}
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
		case 'c':
			cfg.conns, _ = strconv.Atoi(val)
		case 'C':
			cfg.count, _ = strconv.Atoi(val)
		case 'S':
			cfg.size, _ = strconv.Atoi(val)
		case 'p':
			n, _ := strconv.ParseInt(val, 0, 32)
			cfg.ps = cmwire.PortSpace(n)
		case 'P':
			if strings.HasPrefix(strings.ToLower(val), "ipoib") {
				cfg.ps = cmwire.PortSpaceIPoIB
			} else if !strings.HasPrefix(strings.ToLower(val), "udp") {
				fmt.Fprintln(stderr, "Warning: unknown port space format")
			}
		case 'f':
			if !strings.HasPrefix(strings.ToLower(val), "ip") && !strings.HasPrefix(strings.ToLower(val), "name") {
				fmt.Fprintln(stderr, "Warning: unknown address format")
			}
		case 't':
		}
		if err != nil {
			return fmt.Errorf("-%c %s: %w (goroce takes numeric addresses)", o.Short, val, err)
		}
		return nil
	}, io.Discard)
	if err != nil {
		if !errors.Is(err, getopt.ErrBadOption) && !errors.Is(err, getopt.ErrUsage) {
			fmt.Fprintln(stderr, "udaddy:", err)
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

// node is one UD endpoint (struct cmatest_node).
type node struct {
	ep       *rdmacm.UDEndpoint
	mr       *device.MR
	ah       *qp.AddressHandle
	req      *rdmacm.Request // the server's: whom to answer
	qpn      uint32
	qkey     uint32
	resolved bool
}

// initNode makes the endpoint, registers the message buffer (with room for
// the GRH) and posts the receives (init_node, create_message, post_recvs).
func (c *config) initNode(cm *rdmacm.CM, n *node) error {
	depth := max(c.count, 1)
	if mtu := cm.Device().Port().ActiveMTU.Bytes(); c.count > 0 && c.size > mtu {
		return fmt.Errorf("udaddy: message_size %d is larger than active mtu %d", c.size, mtu)
	}
	var err error
	if n.ep, err = cm.NewUDEndpoint(rdmacm.QPConfig{Cap: qp.Cap{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return err
	}
	if c.count == 0 {
		return nil
	}
	if n.mr, err = n.ep.PD().RegisterMR(make([]byte, c.size+rocev2.GRHLen), device.AccessLocalWrite); err != nil {
		return err
	}
	for range c.count {
		if _, err := n.ep.QP().PostRecv([]qp.RecvWR{{SGL: []qp.SGE{{Addr: n.mr.VA(), Length: uint32(c.size + rocev2.GRHLen), LKey: n.mr.LKey()}}}}); err != nil {
			return fmt.Errorf("failed to post receives: %w", err)
		}
	}
	return nil
}

// postSends sends count datagrams with the endpoint's QP number as
// immediate data (post_sends).
func (c *config) postSends(n *node, signaled bool) error {
	if !n.resolved || c.count == 0 {
		return nil
	}
	var flags qp.SendFlags
	if signaled {
		flags = qp.SendSignaled
	}
	for range c.count {
		if _, err := n.ep.QP().PostSend([]qp.SendWR{{Opcode: qp.WRSendWithImm, Flags: flags, Imm: n.ep.QP().QPN(),
			SGL: []qp.SGE{{Addr: n.mr.VA(), Length: uint32(c.size), LKey: n.mr.LKey()}},
			AH:  n.ah, RemoteQPN: n.qpn, RemoteQKey: n.qkey}}); err != nil {
			return fmt.Errorf("failed to post sends: %w", err)
		}
	}
	return nil
}

// pollAll takes count completions of every resolved endpoint; the server
// makes its reply address from the first (poll_cqs, create_reply_ah).
func (c *config) pollAll(ctx context.Context, nodes []*node) error {
	for _, n := range nodes {
		if !n.resolved {
			continue
		}
		err := cmtool.PollN(ctx, n.ep.CQ(), c.count, func(wc *cq.WC) error {
			if n.ah != nil {
				return nil
			}
			ah, err := qp.CreateAH(n.ep.PD(), n.req.PeerAH())
			if err != nil {
				return fmt.Errorf("udaddy: failed to create reply AH: %w", err)
			}
			n.ah, n.qpn, n.qkey = ah, wc.Imm, n.ep.QP().Query().QKey
			return nil
		})
		if err != nil {
			return fmt.Errorf("udaddy: failed polling CQ: %w", err)
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
	return cmtool.Example(ctx, "udaddy", "udaddy", &cfg.goroce, cfg.bind, cfg.server, stdout, stderr,
		func(ctx context.Context, st *cmtool.Stack) int {
			if cfg.server.IsValid() {
				return runClient(ctx, cfg, st, nodes, stdout)
			}
			return runServer(ctx, cfg, st, nodes, stdout, stderr)
		},
		func() {
			for _, n := range nodes {
				if n.ep != nil {
					n.ep.Close()
				}
			}
		})
}

func runClient(ctx context.Context, cfg *config, st *cmtool.Stack, nodes []*node, stdout io.Writer) int {
	fmt.Fprintln(stdout, "udaddy: starting client")
	fmt.Fprintln(stdout, "udaddy: connecting")
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		if err := cfg.initNode(st.CM, n); err != nil {
			errs[i] = err
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := rdmacm.Dialer{CM: st.CM, PortSpace: cfg.ps, Source: netip.AddrPortFrom(cfg.bind, 0), RoCEPort: cfg.goroce.PeerPort()}
			peer, err := d.DialUD(ctx, netip.AddrPortFrom(cfg.server, port))
			if err == nil {
				n.ah, err = qp.CreateAH(n.ep.PD(), peer.AH)
			}
			if err != nil {
				errs[i] = err
				return
			}
			n.qpn, n.qkey, n.resolved = peer.QPN, peer.QKey, true
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return cmtool.PrintEvent(stdout, "udaddy", err)
		}
	}
	if cfg.count > 0 {
		fmt.Fprintln(stdout, "initiating data transfers")
		for _, n := range nodes {
			if err := cfg.postSends(n, false); err != nil {
				fmt.Fprintln(stdout, err)
				return -1
			}
		}
		fmt.Fprintln(stdout, "receiving data transfers")
		if err := cfg.pollAll(ctx, nodes); err != nil {
			fmt.Fprintln(stdout, err)
			return -1
		}
		fmt.Fprintln(stdout, "data transfers complete")
	}
	return 0
}

func runServer(ctx context.Context, cfg *config, st *cmtool.Stack, nodes []*node, stdout, stderr io.Writer) int {
	l, err := st.CM.Listen(rdmacm.ListenConfig{Addr: netip.AddrPortFrom(cfg.bind, port), PortSpace: cfg.ps})
	// Said once it listens (the original says it before): see ucmatose.
	fmt.Fprintln(stdout, "udaddy: starting server")
	if err != nil {
		fmt.Fprintf(stderr, "udaddy: bind address failed: %v\n", err)
		return -1
	}
	defer l.Close()
	if listening != nil {
		listening()
	}
	// connect_events: answer SIDR requests until -c endpoints exist.
	for i := 0; i < len(nodes); {
		r, err := l.Accept(ctx)
		if err != nil {
			return -1
		}
		n := nodes[i]
		if err := cfg.initNode(st.CM, n); err != nil {
			fmt.Fprintln(stdout, err)
			fmt.Fprintln(stdout, "udaddy: failing connection request")
			r.Reject(nil)
			i++
			continue
		}
		if err := r.AcceptUD(n.ep.QP().QPN(), 0, nil); err != nil {
			fmt.Fprintf(stderr, "udaddy: failure accepting: %v\n", err)
			r.Reject(nil)
		} else {
			n.req, n.resolved = r, true
		}
		i++
	}
	if cfg.count > 0 {
		fmt.Fprintln(stdout, "receiving data transfers")
		if err := cfg.pollAll(ctx, nodes); err != nil {
			fmt.Fprintln(stdout, err)
			return -1
		}
		fmt.Fprintln(stdout, "sending replies")
		for _, n := range nodes {
			if err := cfg.postSends(n, true); err != nil {
				fmt.Fprintln(stdout, err)
				return -1
			}
		}
		if err := cfg.pollAll(ctx, nodes); err != nil {
			fmt.Fprintln(stdout, err)
			return -1
		}
		fmt.Fprintln(stdout, "data transfers complete")
	}
	return 0
}

// listening, if set (by tests), is called once the server listens.
var listening func()
