package smcr

import "syscall"

// errnoError is an error a Linux AF_SMC socket reports as an errno:
// errors.Is matches it with that errno (syscall.ECONNRESET, EPIPE), as it
// matches the same condition on a fallback connection's TCP socket.
type errnoError struct {
	msg   string
	errno syscall.Errno
}

func (e *errnoError) Error() string        { return e.msg }
func (e *errnoError) Is(target error) bool { return target == e.errno }
