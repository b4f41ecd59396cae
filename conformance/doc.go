// Package conformance holds goroce's conformance and interop suites and the
// golden vectors they use: real captures from Linux kernel rxe peers in
// testdata/rxe (see testdata/rxe/CATALOG.md for the commands that made them).
// Nothing imports this package; its tests are the product.
package conformance
