module github.com/tollgate/tollgate/echolimit

go 1.25.0

require (
	github.com/labstack/echo/v4 v4.16.0
	github.com/tollgate/tollgate v0.0.0
	golang.org/x/time v0.15.0
)

require (
	github.com/labstack/gommon v0.5.0 // indirect
	github.com/mattn/go-colorable v0.1.15 // indirect
	github.com/mattn/go-isatty v0.0.22 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	github.com/valyala/fasttemplate v1.2.2 // indirect
	golang.org/x/crypto v0.53.0 // indirect
	golang.org/x/net v0.56.0 // indirect
	golang.org/x/sys v0.46.0 // indirect
	golang.org/x/text v0.40.0 // indirect
)

replace github.com/tollgate/tollgate => ../
