// Command interop runs rdma-core's own programs on a Linux kernel rxe
// device against goroce's versions of them: `make interop`.
//
// It builds a small bootable image from Debian's packages (kernel with
// rdma_rxe, busybox, rdma-core's userland), boots it under QEMU (KVM when
// /dev/kvm is usable, TCG otherwise) on a bridge in a network namespace of
// its own, and runs each case of cases() with one side in the guest and
// goroce's program on the bridge's address, capturing every case on the
// bridge and checking the capture with rocedump: every RoCE packet, the
// kernel's and goroce's, has a valid ICRC, and loss-free cases have no
// PSN-sequence NAKs. It prints a table and exits 1 on any failure.
//
// Must run as root (namespaces, taps, apt-get). Everything it starts is
// stopped by PID at the end, on failure and on Ctrl-C; the namespace is
// deleted. See README.md beside this file.
package main
