package adaptive

import "errors"

// ErrInvalidOption reports an option New cannot accept; New's error wraps
// it and names the option.
var ErrInvalidOption = errors.New("adaptive: invalid option")
