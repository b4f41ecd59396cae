package smcr_test

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/smcr"
)

// 200 connections at once from one client to one server share one link
// group (the first builds it, the others CONFIRM_RKEY their RMBs on it and
// DELETE_RKEY them when they end), and each carries its own data.
func TestManyConnectionsShareALinkGroup(t *testing.T) { testManyConnectionsShareALinkGroup(t, nil) }

func testManyConnectionsShareALinkGroup(t *testing.T, mod func(*smcr.Config)) {
	noLeaks(t)
	p := newPair(t, mod)
	const conns = 200
	var wg sync.WaitGroup
	type pairc struct{ c, s net.Conn }
	got := make([]pairc, conns)
	accepted := make(chan net.Conn, conns)
	go func() {
		for range conns {
			c, err := p.ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errs := make(chan error, conns)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := p.d.DialContext(ctx, "tcp", p.ln.Addr().String())
			if err != nil {
				errs <- err
				return
			}
			got[i].c = c
		}()
	}
	wait(t, &wg, 60*time.Second)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	groups := map[uint32]int{}
	first := 0
	for i := range got {
		i := requireMode(t, got[i].c, smcr.ModeSMCRv2)
		groups[i.LinkGroup]++
		if i.FirstContact {
			first++
		}
	}
	require.Len(t, groups, 1, "one link group: %v", groups)
	require.Equal(t, 1, first, "one first contact")
	// Each connection echoes its own pattern through its server side.
	servers := make([]net.Conn, 0, conns)
	for range conns {
		select {
		case s := <-accepted:
			servers = append(servers, s)
		case <-ctx.Done():
			t.Fatal("accept: hang")
		}
	}
	for _, s := range servers {
		go func() {
			io.Copy(s, s)
			s.(*smcr.Conn).CloseWrite()
		}()
	}
	bad := make(chan int, conns)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := got[i].c
			msg := make([]byte, 1000+i)
			pattern(msg, i)
			go func() { c.Write(msg); c.(*smcr.Conn).CloseWrite() }()
			b, err := io.ReadAll(c)
			if err != nil || string(b) != string(msg) {
				bad <- i
			}
		}()
	}
	wait(t, &wg, 60*time.Second)
	close(bad)
	for i := range bad {
		t.Errorf("connection %d did not echo its own bytes", i)
	}
	clientStats, serverStats := smcr.StatsFunc(got[0].c.(*smcr.Conn)), smcr.StatsFunc(servers[0].(*smcr.Conn))
	for i := range got {
		require.NoError(t, got[i].c.Close())
	}
	for _, s := range servers {
		require.NoError(t, s.Close())
	}
	// Every RMB leaves by a confirmed DELETE_RKEY before the group ends
	// (it lingers only after its last flow).
	waitFor(t, 30*time.Second, func() bool {
		return clientStats().RKeysDeleted+clientStats().RKeysUnconfirmed == conns &&
			serverStats().RKeysDeleted+serverStats().RKeysUnconfirmed == conns
	})
	require.Zero(t, clientStats().RKeysUnconfirmed)
	require.Zero(t, serverStats().RKeysUnconfirmed)
}

// A Linux client drops a CONFIRM_LINK that arrives before it waits for one
// (it sends its CLC Confirm first): the server sends it again while it
// waits, and the connection is SMC-R, not a fallback after the wait.
func TestConfirmLinkDroppedByTheClient(t *testing.T) {
	for _, drop := range []int32{1, 2} {
		p := newPair(t, func(c *smcr.Config) { smcr.DropConfirmLinks(c, drop) })
		c, s := p.dial(t)
		requireMode(t, c, smcr.ModeSMCRv2)
		requireMode(t, s, smcr.ModeSMCRv2)
		c.Close()
		s.Close()
	}
}
