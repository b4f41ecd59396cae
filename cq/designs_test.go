package cq_test

import (
	"testing"
	"time"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/cq/cqtest"
)

// The pool in each poll context runs the checks every completion design
// runs (the legacy design runs them in internal/cqlegacy).
func TestPoolDesigns(t *testing.T) {
	pool := func(cfg cq.PoolConfig) func([]cq.Device) cq.Allocator {
		return func(d []cq.Device) cq.Allocator { cfg.Devices = d; return cq.NewPool(cfg) }
	}
	in := func(pc cq.PollContext) func(cq.Allocator, int) (cq.Reservation, error) {
		return func(a cq.Allocator, n int) (cq.Reservation, error) { return a.(*cq.Pool).Get(n, -1, pc) }
	}
	moderate := func(r cq.Reservation, comps int, period time.Duration) {
		r.(*cq.Lease).Managed().SetModeration(comps, period)
	}
	for _, d := range []cqtest.Design{
		{Name: "softirq", New: pool(cq.PoolConfig{Vectors: 2, NoDIM: true}), Reserve: in(cq.PollSoftIRQ), Moderate: moderate},
		{Name: "softirq DIM", New: pool(cq.PoolConfig{Vectors: 2}), Reserve: in(cq.PollSoftIRQ), Moderate: moderate},
		{Name: "workqueue", New: pool(cq.PoolConfig{Vectors: 2, Workers: 3, NoDIM: true}), Reserve: in(cq.PollWorkqueue), Moderate: moderate},
	} {
		d.Goroutines = []string{"cq.(*runQueue).work"}
		t.Run(d.Name, func(t *testing.T) { cqtest.Run(t, d) })
	}
}
