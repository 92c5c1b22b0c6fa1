package topk

import "errors"

// ErrInvalidOption reports an option that New cannot accept: a capacity
// or key length out of range, a negative window, a nil clock. Its errors
// wrap it and name the option.
var ErrInvalidOption = errors.New("topk: invalid option")
