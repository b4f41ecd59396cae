package cqtest

import (
	"sync"
	"sync/atomic"
)

// RxDevice is a cq.Device whose receive batches the test runs (Rx), as a
// device's receive goroutine does, and which counts its runs.
type RxDevice struct {
	mu    sync.Mutex
	hooks map[int][2]func()
	next  int

	Open  atomic.Int32 // BeginRun minus EndRun
	Ended atomic.Int64 // EndRun calls
}

// NewRxDevice returns a device with no hooks.
func NewRxDevice() *RxDevice { return &RxDevice{hooks: map[int][2]func(){}} }

// BeginRun implements cq.Device.
func (f *RxDevice) BeginRun() { f.Open.Add(1) }

// EndRun implements cq.Device.
func (f *RxDevice) EndRun() { f.Open.Add(-1); f.Ended.Add(1) }

// OnReceiveBatch implements cq.Device.
func (f *RxDevice) OnReceiveBatch(begin, end func()) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	id := f.next
	f.hooks[id] = [2]func(){begin, end}
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.hooks, id)
	}
}

// Registered returns how many hook pairs are registered.
func (f *RxDevice) Registered() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.hooks)
}

// Rx runs deliver as one receive batch, as the device does: inside a run,
// between the hooks' begin and end.
func (f *RxDevice) Rx(deliver func()) {
	f.mu.Lock()
	var hooks [][2]func()
	for _, h := range f.hooks {
		hooks = append(hooks, h)
	}
	f.mu.Unlock()
	f.BeginRun()
	defer f.EndRun()
	for _, h := range hooks {
		h[0]()
	}
	deliver()
	for _, h := range hooks {
		h[1]()
	}
}
