package rules

import (
	"errors"
	"fmt"
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrInvalidRules reports a rules file that Parse, Load or Reload
	// cannot use. Each problem is an *Error naming the file, the line and
	// the field; the error returned joins them.
	ErrInvalidRules = errors.New("rules: invalid rules")
	// ErrFrozen reports a reload that would change what an adapter's
	// middleware, built from Options, holds (see Set.Options). The running
	// rules stay.
	ErrFrozen = errors.New("rules: setting fixed while running")
	// ErrUnknownRoute reports a route name that the running rules do not
	// have, or one without limiters, given to Set.Options.
	ErrUnknownRoute = errors.New("rules: unknown route")
	// ErrNoFile reports a Reload, ReloadOn or Watch of rules that were not
	// loaded from a file (Parse rather than Load).
	ErrNoFile = errors.New("rules: not loaded from a file")
)

// An Error is one problem in a rules file, at a line: the field is a path
// such as "limiters.api.limits[1]" (empty for a syntax error), and Err
// says what is wrong. It matches ErrInvalidRules, and Err's own sentinels
// (core.ErrInvalidLimit for a limit, say).
type Error struct {
	File  string // the file's name, as given to Parse or Load
	Line  int    // from 1; 0 when the problem has no line (an empty file)
	Field string // e.g. "limiters.api.limits[1]"; empty for a syntax error
	Err   error
}

// Error returns e.g.
// "rules.yaml:14: limiters.api.limits[1]: quota 0 must be at least 1".
func (e *Error) Error() string {
	at := e.File
	if e.Line > 0 {
		at = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Field == "" {
		return at + ": " + e.Err.Error()
	}
	return at + ": " + e.Field + ": " + e.Err.Error()
}

// Unwrap returns ErrInvalidRules and Err.
func (e *Error) Unwrap() []error { return []error{ErrInvalidRules, e.Err} }
