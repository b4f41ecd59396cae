package backend_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2/backend"
)

type plain struct{}

func (plain) Send([]backend.Outgoing) error           { return nil }
func (plain) Receive([]backend.Incoming) (int, error) { return 0, backend.ErrBackendClosed }
func (plain) LocalAddr() netip.AddrPort               { return netip.AddrPort{} }
func (plain) BatchSize() int                          { return 1 }
func (plain) LinkMTU() int                            { return 1500 }
func (plain) Close() error                            { return nil }

type poller struct{ plain }

func (poller) TryReceive(p []backend.Incoming) (int, error) {
	p[0] = backend.Incoming{Buf: []byte{1}}
	return 1, nil
}
func (poller) Serve(func() bool) error { return backend.ErrBackendClosed }

type busyPoller struct {
	poller
	calls *[]string
}

func (b busyPoller) BeginBusyPoll()    { *b.calls = append(*b.calls, "begin") }
func (b busyPoller) EndBusyPoll() bool { *b.calls = append(*b.calls, "end"); return true }

type lendable struct {
	poller
	calls *[]string
}

func (l lendable) ServeUntil(func() bool, func() bool) error {
	*l.calls = append(*l.calls, "serve until")
	return nil
}
func (l lendable) Interrupt() { *l.calls = append(*l.calls, "interrupt") }

type busyLendable struct{ lendable }

func (b busyLendable) BeginBusyPoll()    { *b.calls = append(*b.calls, "begin") }
func (b busyLendable) EndBusyPoll() bool { *b.calls = append(*b.calls, "end"); return true }

// nic is a decorator that owns an interface, as afpacket does.
type nic struct{ plain }

func (nic) HardwareAddr() [6]byte { return [6]byte{2, 0, 0, 0, 0, 1} }

// A decorator polls as its inner backend does, no more and no less: it is
// a Poller only over one, a BusyPoller only over one, and what it
// receives by polling passes through its received hook. It is Lendable
// only over a Lendable, and whatever it is, HardwareAddrOf sees through it.
func TestKeepPolling(t *testing.T) {
	var calls []string
	cases := []struct {
		name             string
		inner            backend.Backend
		poll, busy, lend bool
	}{
		{"plain", plain{}, false, false, false},
		{"poller", poller{}, true, false, false},
		{"busy poller", busyPoller{calls: &calls}, true, true, false},
		{"lendable", lendable{calls: &calls}, true, false, true},
		{"busy and lendable", busyLendable{lendable{calls: &calls}}, true, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls = nil
			outer := struct{ backend.Backend }{plain{}}
			got := 0
			b := backend.KeepPolling(outer, tc.inner, func(p []backend.Incoming) { got += len(p) })
			p, ok := b.(backend.Poller)
			require.Equal(t, tc.poll, ok, "a Poller")
			bp, ok := b.(backend.BusyPoller)
			require.Equal(t, tc.busy, ok, "a BusyPoller")
			lp, ok := b.(backend.Lendable)
			require.Equal(t, tc.lend, ok, "a Lendable")
			mac, ok := backend.HardwareAddrOf(backend.KeepPolling(nic{}, tc.inner, func([]backend.Incoming) {}))
			require.True(t, ok, "HardwareAddrOf sees through the decorator")
			require.Equal(t, nic{}.HardwareAddr(), mac)
			if !tc.poll {
				require.Equal(t, backend.Backend(outer), b, "returned as it is")
				return
			}
			n, err := p.TryReceive(make([]backend.Incoming, 1))
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.Equal(t, 1, got, "the received hook saw it")
			if tc.busy {
				bp.BeginBusyPoll()
				require.True(t, bp.EndBusyPoll())
				require.Equal(t, []string{"begin", "end"}, calls, "forwarded to inner")
			}
			if tc.lend {
				calls = nil
				require.NoError(t, lp.ServeUntil(func() bool { return false }, nil))
				lp.Interrupt()
				require.Equal(t, []string{"serve until", "interrupt"}, calls, "forwarded to inner")
			}
		})
	}
}
