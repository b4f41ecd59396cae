package rundir

import (
	"context"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// A signal's default action ends a process without running its Close
// calls, and its sockets would stay in the run directory (readers remove
// them later as stale). Programs that publish call one of these two in
// main instead, once: the goroutine that waits for the signals belongs
// to the process and lasts as long as it.

// ExitOnSignal makes SIGINT and SIGTERM remove the sockets the process
// publishes and exit with status 128+signal, as a shell reports a program
// a signal ended: for programs with nothing else to finish.
func ExitOnSignal() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() { exitOn(<-sigs) }()
}

// NotifyContext returns a context that the first SIGINT or SIGTERM
// cancels, for programs that shut down themselves (closing their
// publishers), and status, which maps the program's exit status to
// 128+signal once a signal came. A second signal does what ExitOnSignal
// does.
func NotifyContext(parent context.Context) (ctx context.Context, status func(code int) int) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	var got atomic.Int32
	go func() {
		got.Store(int32(signum(<-sigs)))
		cancel()
		exitOn(<-sigs)
	}()
	return ctx, func(code int) int {
		if s := got.Load(); s != 0 {
			return 128 + int(s)
		}
		return code
	}
}

// exitOn removes the process's sockets and exits as signal s would.
func exitOn(s os.Signal) {
	removeLive()
	os.Exit(128 + signum(s))
}

func signum(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return int(syscall.SIGTERM)
}
