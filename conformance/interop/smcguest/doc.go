// Command smcguest is, for the interop guest, what smc-tools and an
// AF_SMC echo program are (Debian ships neither): it manages the SMC
// UEID and pnet tables, prints the SMC statistics and link groups as
// key=value lines, and runs an AF_SMC (or plain TCP) echo server and
// client whose data is checked byte for byte.
//
//	smcguest ueid add NAME | ueid del NAME | ueid list
//	smcguest pnet add PNETID ETHDEV IBDEV PORT | pnet del PNETID | pnet list
//	smcguest server PORT [-n CONNS] [-shut|-close|-abort] [-peer-abort] [-tcp] [-addr A] [-timeout D]
//	smcguest client ADDR PORT [-conns N] [-parallel] [-sizes 1,1k,64k,1m,16m]
//	                [-end shut|close|abort] [-idle D] [-peer-abort] [-tcp] [-timeout D]
//	smcguest stats [-raw] | lgr [-raw] | info | genl FAMILY
//
// It is static and pure Go (generic netlink through golang.org/x/sys/unix)
// so that it runs in the guest's initramfs, built by the interop harness
// with CGO_ENABLED=0 GOOS=linux GOARCH=amd64. Exit status: 0 done, 1 an
// error (printed with its errno's name), 2 a usage error.
package main
