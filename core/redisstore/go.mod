module github.com/tollgate/tollgate/core/redisstore

go 1.25

require (
	github.com/redis/go-redis/v9 v9.22.0
	github.com/tollgate/tollgate v0.0.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/stretchr/testify v1.8.3 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.30.0 // indirect
)

replace github.com/tollgate/tollgate => ../../
