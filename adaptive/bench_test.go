package adaptive_test

import (
	"testing"

	"github.com/tollgate/tollgate/adaptive"
)

func BenchmarkAcquireRelease(b *testing.B) {
	lim, err := adaptive.New(adaptive.WithInitialLimit(1000))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		t, ok := lim.Acquire(adaptive.Critical)
		if !ok {
			b.Fatal("shed below the limit")
		}
		lim.Release(t, adaptive.Served)
	}
}

func BenchmarkAcquireReleaseParallel(b *testing.B) {
	lim, err := adaptive.New(adaptive.WithInitialLimit(1000), adaptive.WithMaxLimit(1000))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if t, ok := lim.Acquire(adaptive.Critical); ok {
				lim.Release(t, adaptive.Served)
			}
		}
	})
}
