// Package cq is goroce's completion queues: rings of ibv_wc-shaped work
// completions (CQ, WC), and what the kernel's RDMA core builds on them for
// its upper layers.
//
//   - CQ: a bounded ring with arm/notify (ibv_req_notify_cq) and an event
//     callback; queue pairs Push completions, applications Poll them into
//     their own slices, and an overflow puts the CQ in error instead of
//     losing a completion.
//   - Entry: the kernel's ib_cqe, a completion that knows its handler, so a
//     consumer needs no wr_id lookup.
//   - Pool: the kernel's CQ pool (ib_cq_pool_get/put): shared CQs per
//     completion vector, polled in softirq, workqueue or direct context
//     with the kernel's batches and budgets, DIM moderating wake-ups, and
//     runs to completion on a device's receive goroutine (PoolConfig.Devices
//     and the small Device interface; the package knows no device).
//   - Allocator and Reservation: how an upper layer (smcr) gets a QP's CQs
//     and turns a handler into a work request's wr_id and Entry, whatever
//     design allocates them.
package cq
