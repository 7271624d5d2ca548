package mapping

import (
	"errors"
	"fmt"
)

// ErrInvalid marks a spec the broker can never carry downstream; the broker answers
// INVALID with the error's text.
var ErrInvalid = errors.New("invalid")

type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

func invalidf(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}
