package main

import (
	"errors"
	"reflect"
	"testing"
)

func TestModules(t *testing.T) {
	repo := newRepo(t, map[string]string{
		"go.mod":                      gomod("example.com/r"),
		"zadapter/go.mod":             gomod("example.com/r/zadapter"),
		"a/b/go.mod":                  gomod("example.com/r/a/b"),
		"examples/go.mod":             gomod("example.com/r/examples"),
		"bench/go.mod":                gomod("example.com/r/bench"),
		"internal/tool/go.mod":        gomod("example.com/r/internal/tool"),
		"a/internal/x/go.mod":         gomod("example.com/r/a/internal/x"),
		"examplesplus/go.mod":         gomod("example.com/r/examplesplus"),
		"a/testdata/mod/go.mod":       gomod("example.com/fixture"),
		"a/vendor/example.org/go.mod": gomod("example.org/vendored"),
	})
	writeFiles(t, repo, map[string]string{"untracked/go.mod": gomod("example.com/r/untracked")})

	got, err := Modules(repo)
	if err != nil {
		t.Fatal(err)
	}
	want := []Module{
		{Dir: ".", Path: "example.com/r", Released: true},
		{Dir: "a/b", Path: "example.com/r/a/b", Released: true},
		{Dir: "a/internal/x", Path: "example.com/r/a/internal/x", Released: false},
		{Dir: "bench", Path: "example.com/r/bench", Released: false},
		{Dir: "examples", Path: "example.com/r/examples", Released: false},
		{Dir: "examplesplus", Path: "example.com/r/examplesplus", Released: true},
		{Dir: "internal/tool", Path: "example.com/r/internal/tool", Released: false},
		{Dir: "zadapter", Path: "example.com/r/zadapter", Released: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Modules() =\n%+v\nwant\n%+v", got, want)
	}
}

func TestModulesRejectsLayoutsGoCannotFind(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
	}{
		{"a repository without a root module is rejected", map[string]string{
			"a/go.mod": gomod("example.com/r/a"),
		}},
		{"a released module whose path is not the root's plus its directory is rejected", map[string]string{
			"go.mod":          gomod("example.com/r"),
			"ginlimit/go.mod": gomod("example.com/r/gin"),
		}},
		{"a go.mod without a module line is rejected", map[string]string{
			"go.mod":   gomod("example.com/r"),
			"a/go.mod": "go 1.25\n",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := newRepo(t, tt.files)
			if _, err := Modules(repo); !errors.Is(err, errLayout) {
				t.Errorf("Modules() error = %v, want %v", err, errLayout)
			}
		})
	}
}

func TestModulesAllowsAnyPathForUnreleasedModules(t *testing.T) {
	repo := newRepo(t, map[string]string{
		"go.mod":               gomod("example.com/r"),
		"internal/tool/go.mod": gomod("tool"),
	})
	mods, err := Modules(repo)
	if err != nil {
		t.Fatalf("Modules() error = %v, want nil", err)
	}
	if len(mods) != 2 || mods[1].Path != "tool" || mods[1].Released {
		t.Errorf("Modules() = %+v, want the root and an unreleased module tool", mods)
	}
}

func TestTag(t *testing.T) {
	tests := []struct {
		dir, want string
	}{
		{".", "v1.2.3"},
		{"ginlimit", "ginlimit/v1.2.3"},
		{"core/redisstore", "core/redisstore/v1.2.3"},
	}
	for _, tt := range tests {
		t.Run("the module in "+tt.dir+" is tagged "+tt.want, func(t *testing.T) {
			if got := (Module{Dir: tt.dir}).Tag("v1.2.3"); got != tt.want {
				t.Errorf("Module{Dir: %q}.Tag(v1.2.3) = %q, want %q", tt.dir, got, tt.want)
			}
		})
	}
}

func TestCheckVersion(t *testing.T) {
	mods := []Module{
		{Dir: ".", Path: "example.com/r", Released: true},
		{Dir: "a", Path: "example.com/r/a", Released: true},
		{Dir: "internal/v3", Path: "example.com/r/internal/v3/v3", Released: false},
	}
	tests := []struct {
		name    string
		version string
		ok      bool
	}{
		{"a release is accepted", "v0.1.0", true},
		{"a v1 release is accepted", "v1.0.0", true},
		{"a pre-release is accepted", "v1.2.3-rc.1", true},
		{"a version without the v is rejected", "0.1.0", false},
		{"an empty version is rejected", "", false},
		{"a version without its patch number is rejected", "v0.1", false},
		{"build metadata is rejected", "v0.1.0+build.5", false},
		{"a leading zero is rejected", "v0.01.0", false},
		{"a major version the module paths lack is rejected", "v2.0.0", false},
		{"a pseudo-version is rejected", "v0.0.0-20240101120000-0123456789ab", false},
		{"a tag-like argument is rejected", "ginlimit/v0.1.0", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckVersion(mods, tt.version)
			if tt.ok && err != nil {
				t.Errorf("CheckVersion(%q) = %v, want nil", tt.version, err)
			}
			if !tt.ok && !errors.Is(err, errVersion) {
				t.Errorf("CheckVersion(%q) = %v, want %v", tt.version, err, errVersion)
			}
		})
	}
}
