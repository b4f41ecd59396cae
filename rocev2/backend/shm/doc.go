// Package shm is a backend.Backend for goroce devices on one host: it
// carries the same RoCEv2 datagrams as the UDP backend, byte for byte and
// with their ICRCs sealed for IPv4 ID 0 as the UDP backend seals a plain
// datagram (so a capture tap records valid packets), through shared memory
// instead of the kernel's network stack. Between two processes of one host
// this is what a hardware RNIC's DMA is to the UDP backend's system calls:
// each packet costs a copy into a ring, and a wake-up only when the
// receiver sleeps (Linux only; elsewhere Open fails).
//
// # Rendezvous (rendezvous_linux.go)
//
// A backend listens on a Unix socket named after its address and port in
// the run directory (SocketPath; a directory of this user, mode 0700). The
// first packet to a destination starts a rendezvous on a goroutine of the
// backend: it dials SocketPath(dir, destination), checks with SO_PEERCRED
// that the process there is of this user, and the two sides exchange a
// versioned hello (hello.go) with, by SCM_RIGHTS, each one's ring (a
// sealed memfd) and doorbell (an eventfd). The connection stays open: its
// end is the pairing's end. Meanwhile the packets wait in the peer's
// bounded private queue; a destination with no socket (a kernel rxe,
// another host, a process without this backend) is remembered for
// Config.RetryAfter, and its packets go to Config.Fallback (a UDP backend on
// the same address: one device, both links) or are dropped and counted.
// LinkTo tells which link a destination uses.
//
// # Rings (ring.go)
//
// One single-producer ring per direction per pairing, created and sealed
// (F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_SEAL) by its producer: a peer can
// reach only the two rings of its own pairing. Records are variable
// (8-byte header, payload padded to 8), because an ACK is ~32 bytes and a
// full packet ~4.1 KB. A Send writes a batch's records, publishes them with
// one store of the tail, and rings the consumer's doorbell at most once,
// only if the consumer flagged that it sleeps (a Dekker store/load on
// sequentially consistent atomics on both sides: no wake-up is lost).
//
// # Hostile memory
//
// The peer can write anything into a shared ring at any time. Every index,
// length and header read from it is copied once and checked (an index
// that goes backwards or beyond what can have been written, a length
// beyond the largest packet or the ring, a pad where none fits); a ring
// that breaks a rule is counted (Stats.CorruptRings) and its pairing torn
// down. Packets are copied out into the backend's own buffers before
// anything looks at them, and their ICRCs are verified there; nothing
// points into a ring once TryReceive returns. A peer's memfd must carry the
// shrink and grow seals and have the size its hello announced before it is
// mapped (a ring shrunk under our mapping would SIGBUS us), and its
// doorbell must be an eventfd. Our own doorbells are read with preadv2
// RWF_NOWAIT, which does not block even if the peer clears O_NONBLOCK on
// the description it shares. FuzzRing plays a malicious producer, also
// while a second goroutine scribbles over the ring as the consumer reads.
//
// # Back-pressure
//
// Send never blocks on a peer. What finds its ring full waits in the
// peer's private queue (Config.Backlog), in order; the producer flags that
// it waits for room, and the consumer, when it releases space, rings the
// producer's doorbell (the same Dekker handshake), whose receive path then
// moves the queue into the ring. Beyond the queue's bound packets are
// dropped and counted, and RC sends them again: two devices sending to each
// other with full rings never deadlock, and a dead or stuck peer costs its
// queue, not a hang.
//
// # Waiting (poll_linux.go)
//
// Each pairing has a doorbell of its own (a peer that fills its counter
// cannot silence another's); all of them, and the fallback bridge's, are in
// one level-triggered epoll set whose descriptor is registered with Go's
// netpoller, so one goroutine (the device's receive goroutine) waits for
// every link. The backend is a backend.Poller: a device's busy-polling CQ
// receives from the rings on its own goroutine without a system call.
//
// # Teardown
//
// A pairing ends when its rendezvous connection does (the peer closed or
// died), when a ring is found corrupt, or at Close. Only the goroutine that
// reads the connection tears it down: it takes the receiving ring out of
// the receive path under the receive lock, then the sending ring from the
// peer under the peer's lock, and only then unmaps and closes: no Send,
// Receive or WaitReadable can be inside a ring when it goes. Packets to the
// peer then go to the fallback or are dropped, so its QPs on our side end
// with the usual errors (retry exhausted) within their timeouts; a new
// process on the same address later pairs anew.
//
// # Measured (bench_linux_test.go)
//
// Two processes on a 2-vCPU VM that other jobs loaded (load average 2 to
// 6), 5 runs of 20000 round trips each, CPU time of both processes from
// getrusage; medians, with the range. A 64-byte ping-pong, at load 3 to 6:
// 27 µs (18–60) and 22 CPU-µs (19–29) per round trip over shm, 29 µs
// (28–35) and 36 CPU-µs (31–38) over the UDP backend, 39 µs (24–44) and
// 30 CPU-µs (29–41) over plain UDP sockets. Over shm the round trip is
// bimodal: about 17 µs, or 57–88 µs when the Go scheduler's threads and
// the other jobs contend for the two CPUs (an earlier run had three of
// five there). 4 KiB packets in batches of 64, at load 2 to 5: 1.24 µs
// (0.86–1.40) and 1.2 CPU-µs per packet over shm, 1.97 µs (1.65–2.15) and
// 2.1 CPU-µs over UDP (one later run over shm, at load 6, took 105 µs a
// packet while using 2.7 CPU-µs: waiting, not working). System calls
// (perf stat -e raw_syscalls:sys_enter, both processes): 8.5 per round
// trip over shm, 8.7 over the UDP backend, 8.5 over plain sockets; 0.15
// and 0.30 per bulk packet. What a shm round trip still pays is no longer
// the kernel's UDP stack but the doorbell (an eventfd write, the
// netpoller's and our epoll_wait, the eventfd read per direction) and the
// Go scheduler's handing of the woken goroutine to a thread.
//
// Config.Spin trades that wake-up for a bounded look: with 20 µs, at load
// 2, a round trip took 3.4 µs (3.0–4.1) and 5.9 CPU-µs; at load 4 to 6,
// where the peer waits for a CPU, 32 µs (7.6–39) and 34 CPU-µs, worse
// than sleeping. It is off by default for that reason.
//
// # Allocation
//
// Receive buffers, the epoll events and the callbacks are made by Open; a
// peer's queue grows by doubling a few times in its life. In steady state
// neither Send nor Receive allocates.
package shm
