package storetest_test

import (
	"testing"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/core/storetest"
)

// A store's conformance test: every decision of the suite's traces must
// equal core.Step's. Put this in the store's own _test.go file.
func ExampleRun() {
	_ = func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) core.Store {
			return memstore.New(memstore.WithSweepInterval(0)) // your store here
		})
	}
}
