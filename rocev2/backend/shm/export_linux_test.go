package shm

// What the external tests (package shm_test) share with these.
var (
	NewRunDir  = runDir
	Eventually = eventually
)
