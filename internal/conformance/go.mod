module github.com/tollgate/tollgate/internal/conformance

go 1.25

replace github.com/tollgate/tollgate => ../../

require (
	github.com/dunglas/httpsfv v1.1.2
	github.com/go-chi/chi/v5 v5.2.3
	github.com/tollgate/tollgate v0.0.0-00010101000000-000000000000
)
