package core_test

import (
	"fmt"

	"github.com/tollgate/tollgate/core"
)

// Limits from a string: a flag, an environment variable, a config file.
func ExampleParseLimits() {
	limits, err := core.ParseLimits("10/s, 100/m gcra burst 20 name api, 1000 per 2 hours")
	if err != nil {
		panic(err)
	}
	for _, l := range limits {
		fmt.Printf("%d per %v, %v, burst %d, policy %q\n", l.Quota, l.Period, l.Algorithm, l.Capacity(), l.PolicyName())
	}
	fmt.Println(core.FormatLimits(limits...))

	_, err = core.ParseLimits("10/s, 0/m")
	fmt.Println(err)
	// Output:
	// 10 per 1s, sliding-window, burst 10, policy "10-per-1s"
	// 100 per 1m0s, gcra, burst 20, policy "api"
	// 1000 per 2h0m0s, sliding-window, burst 1000, policy "1000-per-2h"
	// 10/s, 100/m gcra burst 20 name api, 1000/2h
	// item 1 "0/m" at byte 6: quota 0 must be at least 1
}
