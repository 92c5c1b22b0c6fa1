module github.com/tollgate/tollgate/internal/release

go 1.25.0

require golang.org/x/mod v0.37.0
