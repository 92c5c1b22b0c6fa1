module github.com/tollgate/tollgate

go 1.25
