package topk

import "errors"

// ErrInvalidOption reports an option that New or NewHandler cannot accept:
// a capacity, key length or default k out of range, a negative window, a
// nil clock or tracker, a hash secret shorter than MinSecretLen, or raw
// keys with a secret. Their errors wrap it and name the option.
var ErrInvalidOption = errors.New("topk: invalid option")
