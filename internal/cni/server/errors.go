package server

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
)

// cniError is a types.Error with the given code whose message is formatted; %w in format keeps the cause.
type cniError struct {
	code uint
	err  error
}

func newError(code uint, format string, args ...any) error {
	return &cniError{code: code, err: fmt.Errorf(format, args...)}
}

func (e *cniError) Error() string { return e.err.Error() }
func (e *cniError) Unwrap() error { return e.err }

// As lets errors.As find a *types.Error in a chain that holds a cniError.
func (e *cniError) As(target any) bool {
	if t, ok := target.(**types.Error); ok {
		*t = types.NewError(e.code, e.err.Error(), "")
		return true
	}
	return false
}
