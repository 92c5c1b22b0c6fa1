package adaptive

import "strconv"

// A Priority is the class of a request: Critical requests are refused only
// when the whole limit is in use, Sheddable ones once the units in flight
// reach a share of it (WithSheddableShare). The zero value is Critical.
type Priority uint8

// Priorities, named by String.
const (
	Critical  Priority = iota // "critical"
	Sheddable                 // "sheddable"
	numPriorities
)

var priorityNames = [numPriorities]string{"critical", "sheddable"}

// String returns "critical" or "sheddable".
func (p Priority) String() string {
	if p < numPriorities {
		return priorityNames[p]
	}
	return "Priority(" + strconv.Itoa(int(p)) + ")"
}
