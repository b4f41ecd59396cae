package main

// knownFlake names, for the log line of a retry, a failure whose cause is
// known (see README.md, FLAKY).
func knownFlake(c *testCase, r *result) string {
	return ""
}
