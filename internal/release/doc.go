// Command release is the Go half of scripts/release.sh: it reads and edits
// the repository's go.mod files with golang.org/x/mod, as the go command
// does, and builds a file-based module proxy from release tags, so that the
// shell script only drives git.
//
//	release [-repo DIR] list VERSION             the released modules: "PATH TAG" per line, root first
//	release [-repo DIR] bump VERSION             require VERSION of the repository's modules in every go.mod
//	release [-repo DIR] proxy -out DIR VERSION   write a GOPROXY=file://DIR tree from the tags of VERSION
//
// # Modules
//
// The repository's modules are the go.mod files git tracks, wherever they
// are (outside testdata and vendor directories), so a module added later is
// released without editing a list. A module is released (tagged, and put in
// the proxy) unless it lives in examples/, bench/ or under an internal/
// directory: those are run inside the repository, nothing outside it can
// import them, and their go.mod files keep replace directives, which
// `go install pkg@version` refuses anyway.
//
// Go finds version v of the module in directory dir of the repository at
// the tag dir/v (v itself for the root module), provided the module path is
// the root module's path followed by /dir: list and proxy check that every
// released module follows it.
//
// # Versions
//
// VERSION is a canonical semantic version (v0.1.0, v1.2.3-rc.1): no build
// metadata, no pseudo-version, and a major version that the module paths
// allow (v0 or v1, since they have no /vN suffix); every command rejects
// any other, naming what is wrong.
//
// # Proxy
//
// proxy writes, for each released module, the files a module proxy serves
// (the GOPROXY protocol of `go help goproxy`): @v/list, and VERSION's .info
// (the tagged commit's time), .mod (go.mod at the tag) and .zip (made from
// the tag with golang.org/x/mod/zip.CreateFromVCS, which follows the go
// command's own rules: nested modules, vendor directories and files git
// ignores are left out).
package main
