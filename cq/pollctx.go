package cq

// PollContext says who polls a CQ and calls the Done of its entries
// (enum ib_poll_context).
type PollContext uint8

//go:generate stringer -type PollContext -linecomment

const (
	// PollSoftIRQ: one poller goroutine per completion vector runs the CQs
	// of that vector, PollBatch completions at a time and at most BudgetIRQ per
	// run, then re-arms (irq_poll).
	PollSoftIRQ PollContext = 0 // softirq
	// PollWorkqueue: a bounded pool of worker goroutines runs scheduled
	// CQs with BudgetWorkqueue per run (ib_comp_wq).
	PollWorkqueue PollContext = 1 // workqueue
	// PollDirect: nobody is woken; the caller drives Managed.Process with
	// its own budget (ib_process_cq_direct). Not allowed for pooled CQs.
	PollDirect PollContext = 3 // direct
)

// The kernel's processing constants (drivers/infiniband/core/cq.c).
const (
	PollBatch       = 16    // IB_POLL_BATCH: completions per poll
	PollBatchDirect = 8     // IB_POLL_BATCH_DIRECT
	BudgetIRQ       = 256   // IB_POLL_BUDGET_IRQ: completions per softirq run
	BudgetWorkqueue = 65536 // IB_POLL_BUDGET_WORKQUEUE
	SharedCQSize    = 4096  // IB_MAX_SHARED_CQ_SZ: the least entries of a pooled CQ

	// RxBudget bounds the completions that the CQs fired by one receive
	// batch may handle on the device's receive goroutine (run to
	// completion, PoolConfig.Devices) before the rest goes to the poller
	// goroutines: four softirq budgets.
	RxBudget = 4 * BudgetIRQ
)

// budget returns the completions one scheduled run may handle.
func (p PollContext) budget() int {
	if p == PollWorkqueue {
		return BudgetWorkqueue
	}
	return BudgetIRQ
}
