module github.com/tollgate/tollgate/bench

go 1.25

require (
	github.com/go-chi/httprate v0.16.1
	github.com/go-redis/redis_rate/v10 v10.0.1
	github.com/platinummonkey/go-concurrency-limits v0.8.0
	github.com/redis/go-redis/v9 v9.22.0
	github.com/sethvargo/go-limiter v0.7.1
	github.com/throttled/throttled/v2 v2.15.0
	github.com/tollgate/tollgate v0.0.0
	github.com/tollgate/tollgate/core/redisstore v0.0.0-00010101000000-000000000000
	github.com/ulule/limiter/v3 v3.11.2
	golang.org/x/time v0.14.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/hashicorp/golang-lru v0.5.4 // indirect
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.30.0 // indirect
)

replace github.com/tollgate/tollgate => ../

replace github.com/tollgate/tollgate/core/redisstore => ../core/redisstore
