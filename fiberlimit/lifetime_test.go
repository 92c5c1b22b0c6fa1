package fiberlimit_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/fiberlimit"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
)

// keepingStore is a core.Store that keeps every key it is handed, as
// handed, as a store that batches operations or logs keys would.
type keepingStore struct {
	core.Store
	mu   sync.Mutex
	keys []string
}

func (s *keepingStore) Apply(ctx context.Context, op engine.Op) (engine.Result, error) {
	s.mu.Lock()
	s.keys = append(s.keys, op.Key)
	s.mu.Unlock()
	return s.Store.Apply(ctx, op)
}

// TestKeysOutliveTheRequestBuffer sends many requests through one reused
// fasthttp.RequestCtx, as fasthttp's server does on a keep-alive
// connection, so that each request's header, URI and path bytes overwrite
// the previous one's in place. Every key the store was handed, every
// Denial.Key a hook or denied handler kept, and every key a goroutine still
// reads after the handler returned must still read as it did: nothing the
// middleware hands out may point into the request buffer. Run with -race:
// the goroutines read the keys while later requests are written.
func TestKeysOutliveTheRequestBuffer(t *testing.T) {
	const n = 200
	queryKey := fiberlimit.KeyFunc(func(c *fiber.Ctx) (string, error) { return c.Query("q"), nil })
	tests := []struct {
		name string
		key  keyfuncs.Func
		rule bool   // as a second rule, after one that admits everything
		want string // format of request i's key
	}{
		{"keyfuncs.Header", keyfuncs.Header("X-Api-Key"), false, "api-%04d"},
		{"keyfuncs.Query", keyfuncs.Query("q"), false, "q-%04d"},
		{"keyfuncs.Path", keyfuncs.Path(), false, "/items/%04d"},
		{"keyfuncs.Method of a custom method", keyfuncs.Method(), false, "M%04d"},
		{"Locals set from a header", fiberlimit.Locals("tenant"), false, "ten-%04d"},
		{"KeyFunc returning c.Params", fiberlimit.KeyFunc(func(c *fiber.Ctx) (string, error) { return c.Params("id"), nil }), false, "%04d"},
		{"KeyFunc returning c.Get", fiberlimit.KeyFunc(func(c *fiber.Ctx) (string, error) { return c.Get("X-Api-Key"), nil }), false, "api-%04d"},
		{"KeyFunc in a rule", queryKey, true, "q-%04d"},
	}
	methods := append([]string(nil), fiber.DefaultMethods...)
	for i := range n {
		methods = append(methods, fmt.Sprintf("M%04d", i))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &keepingStore{Store: newMemstore(t)}
			lim := newLimiter(t, st, fixed(1, "m"))
			opts := []fiberlimit.Option{fiberlimit.WithKey(tt.key)}
			if tt.rule {
				lim = newLimiter(t, st, fixed(1<<30, "all"))
				opts = []fiberlimit.Option{fiberlimit.WithKey(keyfuncs.Static("all")), fiberlimit.WithRule(newLimiter(t, st, fixed(1, "m")), tt.key)}
			}

			var (
				mu      sync.Mutex
				kept    []string // Denial.Key from OnDenied, then from the denied handler, per denial
				wg      sync.WaitGroup
				done    = make(chan struct{})
				lateBad = make(chan string, 2*n)
				raw     string // an uncopied c.Get of request 0: the control
			)
			keep := func(k string) {
				mu.Lock()
				kept = append(kept, k)
				mu.Unlock()
			}
			app := fiber.New(fiber.Config{RequestMethods: methods})
			app.Use(func(c *fiber.Ctx) error {
				c.Locals("tenant", c.Get("X-Tenant")) // points into the request buffer
				return c.Next()
			})
			mw := fiberlimit.New(lim, append(opts,
				fiberlimit.WithOnDenied(func(c *fiber.Ctx, d *guard.Denial) {
					keep(d.Key)
					want := strings.Clone(d.Key)
					wg.Add(1)
					go func(k string) { // reads the key during, and after, the next requests
						defer wg.Done()
						var sum byte
						for range 20 {
							for i := 0; i < len(k); i++ {
								sum += k[i]
							}
							runtime.Gosched()
						}
						<-done
						if k != want {
							lateBad <- fmt.Sprintf("%q, was %q (byte sum %d)", k, want, sum)
						}
					}(d.Key)
				}),
				fiberlimit.WithDeniedHandler(func(c *fiber.Ctx, d *guard.Denial) error {
					keep(d.Key)
					return c.SendStatus(fiber.StatusTooManyRequests)
				}),
			)...)
			app.All("/items/:id", mw, func(c *fiber.Ctx) error {
				if raw == "" {
					raw = c.Get("X-Api-Key")
				}
				return nil
			})

			h := app.Handler()
			fctx := new(fasthttp.RequestCtx)
			fctx.Init(new(fasthttp.Request), peer, nil)
			statuses := map[int]int{}
			for i := range n {
				for range 2 { // the second request with the same values is denied
					fctx.Request.Reset()
					fctx.Response.Reset()
					fctx.ResetUserValues()
					fctx.Request.Header.SetMethod(fmt.Sprintf("M%04d", i))
					fctx.Request.SetRequestURI(fmt.Sprintf("/items/%04d?q=q-%04d", i, i))
					fctx.Request.Header.Set("X-Api-Key", fmt.Sprintf("api-%04d", i))
					fctx.Request.Header.Set("X-Tenant", fmt.Sprintf("ten-%04d", i))
					h(fctx)
					statuses[fctx.Response.StatusCode()]++
				}
			}
			close(done)
			wg.Wait()
			close(lateBad)

			if raw == "api-0000" || raw == "" {
				t.Fatalf("control: an uncopied c.Get of request 0 reads %q after %d requests; the harness does not reuse the request buffer", raw, 2*n)
			}
			if statuses[200] != n || statuses[429] != n {
				t.Fatalf("statuses = %v, want %d × 200 and %d × 429", statuses, n, n)
			}
			want := func(i int) string { return fmt.Sprintf(tt.want, i) }
			var stored []string
			st.mu.Lock()
			for _, k := range st.keys {
				if k != "all" {
					stored = append(stored, k)
				}
			}
			st.mu.Unlock()
			check := func(what string, keys []string) {
				t.Helper()
				if len(keys) != 2*n {
					t.Fatalf("%d %s, want %d", len(keys), what, 2*n)
				}
				for j, k := range keys {
					if w := want(j / 2); k != w {
						t.Fatalf("%s %d = %q, want %q: a later request overwrote it", what, j, k, w)
					}
				}
			}
			check("keys handed to the store", stored)
			check("denial keys kept", kept)
			for bad := range lateBad {
				t.Errorf("a goroutine's key changed under it: %s", bad)
			}
		})
	}
}
