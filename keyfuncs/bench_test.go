package keyfuncs

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func benchRequest(remote string, nameValues ...string) *http.Request {
	r := httptest.NewRequest("GET", "/users/42?token=abc", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(nameValues); i += 2 {
		r.Header.Add(nameValues[i], nameValues[i+1])
	}
	return r
}

func BenchmarkIP(b *testing.B) {
	benchmarks := []struct {
		name string
		fn   Func
		r    *http.Request
	}{
		{"untrusted IPv4 peer", IP(), benchRequest("203.0.113.7:5678")},
		{"untrusted IPv6 peer", IP(), benchRequest("[2001:db8:1:2::7]:5678")},
		{"untrusted peer with trusted proxies configured", IP(TrustPrivate()), benchRequest("203.0.113.7:5678", "X-Forwarded-For", "6.6.6.6")},
		{"trusted proxy with X-Forwarded-For of 3 hops", IP(TrustPrivate()), benchRequest("10.0.0.1:443", "X-Forwarded-For", "6.6.6.6, 198.51.100.1, 10.0.0.2")},
		{"trusted proxy with Forwarded of 2 elements", IP(TrustPrivate(), FromForwarded()), benchRequest("10.0.0.1:443", "Forwarded", `for="[2001:db8:cafe::17]:4711";proto=https, for=10.0.0.2`)},
		{"trusted proxy with X-Real-IP", IP(TrustPrivate(), FromHeader("X-Real-IP")), benchRequest("10.0.0.1:443", "X-Real-IP", "198.51.100.1")},
		{"trusted proxy with a 1 MB X-Forwarded-For", IP(TrustPrivate()), benchRequest("10.0.0.1:443", "X-Forwarded-For", strings.Repeat("1", 1<<20))},
		{"trusted proxy with 1000 trusted X-Forwarded-For hops", IP(TrustPrivate()), benchRequest("10.0.0.1:443", "X-Forwarded-For", "198.51.100.1"+strings.Repeat(", 10.0.0.9", 1000))},
		{"trusted proxy with a 1 MB Forwarded quoted string", IP(TrustPrivate(), FromForwarded()), benchRequest("10.0.0.1:443", "Forwarded", `for=198.51.100.1;host="`+strings.Repeat(`\"`, 1<<19)+`"`)},
	}
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bm.fn(FromHTTP(bm.r)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkIPParallel(b *testing.B) {
	fn := IP(TrustPrivate())
	r := benchRequest("10.0.0.1:443", "X-Forwarded-For", "198.51.100.1, 10.0.0.2")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := fn(FromHTTP(r)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkIPDistinctKeys keys requests from 100k distinct peers, IPv4 and
// IPv6 in separate /64s, and checks that the keys really are distinct.
func BenchmarkIPDistinctKeys(b *testing.B) {
	const n = 100_000
	fn := IP()
	reqs := make([]*http.Request, n)
	seen := make(map[string]bool, n)
	for i := range reqs {
		var remote string
		if i%2 == 0 {
			remote = netip.AddrPortFrom(netip.AddrFrom4([4]byte{100, byte(i >> 16), byte(i >> 8), byte(i)}), 1234).String()
		} else {
			remote = fmt.Sprintf("[2001:db8:%x:%x::1]:443", i>>16, i&0xffff)
		}
		reqs[i] = benchRequest(remote)
		key, err := fn(FromHTTP(reqs[i]))
		if err != nil {
			b.Fatal(err)
		}
		seen[key] = true
	}
	if len(seen) != n {
		b.Fatalf("%d distinct keys for %d distinct peers", len(seen), n)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := fn(FromHTTP(reqs[i%n])); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkKeys(b *testing.B) {
	r := benchRequest("203.0.113.7:5678", "X-Api-Key", "secret")
	r.Pattern = "GET /users/{id}"
	benchmarks := []struct {
		name string
		fn   Func
	}{
		{"Header", Header("X-API-Key")},
		{"missing Header", Header("Authorization")},
		{"Query", Query("token")},
		{"Route", Route()},
		{"Join of IP and Route", Join("|", IP(), Route())},
	}
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bm.fn(FromHTTP(r))
			}
		})
	}
}
