package main

import (
	"archive/zip"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// proxyRepo returns a repository with a root module (whose path has an
// upper-case letter, which the proxy's paths escape), a released module in
// sub, and an unreleased one in internal/tool, with v0.1.0 tagged.
func proxyRepo(t *testing.T) string {
	t.Helper()
	repo := newRepo(t, map[string]string{
		"go.mod":               gomod("example.com/Root"),
		"root.go":              "package root\n",
		"notes/readme.txt":     "notes\n",
		".gitignore":           "*.log\n",
		"sub/go.mod":           gomod("example.com/Root/sub", "require example.com/Root v0.1.0"),
		"sub/sub.go":           "package sub\n\nimport _ \"example.com/Root\"\n",
		"internal/tool/go.mod": gomod("example.com/Root/internal/tool"),
		"internal/tool/t.go":   "package main\n",
	})
	writeFiles(t, repo, map[string]string{"ignored.log": "not committed\n", "untracked.go": "package root\n"})
	runGit(t, repo, "tag", "-a", "-m", "v0.1.0", "v0.1.0")
	runGit(t, repo, "tag", "-a", "-m", "sub v0.1.0", "sub/v0.1.0")
	return repo
}

// zipNames returns the names of the files in the zip file, sorted.
func zipNames(t *testing.T, file string) []string {
	t.Helper()
	z, err := zip.OpenReader(file)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	var names []string
	for _, f := range z.File {
		names = append(names, f.Name)
	}
	sort.Strings(names)
	return names
}

func readFile(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestProxy(t *testing.T) {
	repo := proxyRepo(t)
	mods, err := Modules(repo)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := Proxy(repo, mods, "v0.1.0", out); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(out, "example.com", "!root", "@v")
	sub := filepath.Join(out, "example.com", "!root", "sub", "@v")

	t.Run("each released module lists the version", func(t *testing.T) {
		for _, dir := range []string{root, sub} {
			if got := readFile(t, filepath.Join(dir, "list")); got != "v0.1.0\n" {
				t.Errorf("%s/list = %q, want %q", dir, got, "v0.1.0\n")
			}
		}
	})
	t.Run("the .mod file is go.mod at the tag", func(t *testing.T) {
		if got, want := readFile(t, filepath.Join(sub, "v0.1.0.mod")), gomod("example.com/Root/sub", "require example.com/Root v0.1.0"); got != want {
			t.Errorf("sub v0.1.0.mod = %q, want %q", got, want)
		}
	})
	t.Run("the .info file gives the version and the tagged commit's time", func(t *testing.T) {
		var got info
		if err := json.Unmarshal([]byte(readFile(t, filepath.Join(root, "v0.1.0.info"))), &got); err != nil {
			t.Fatal(err)
		}
		when, err := time.Parse(time.RFC3339, strings.TrimSpace(runGit(t, repo, "log", "-1", "--format=%cI", "v0.1.0")))
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != "v0.1.0" || !got.Time.Equal(when) {
			t.Errorf("v0.1.0.info = %+v, want Version v0.1.0, Time %v", got, when)
		}
	})
	t.Run("the root's zip holds its committed files under the unescaped path, not the nested modules'", func(t *testing.T) {
		want := []string{"example.com/Root@v0.1.0/.gitignore", "example.com/Root@v0.1.0/go.mod",
			"example.com/Root@v0.1.0/notes/readme.txt", "example.com/Root@v0.1.0/root.go"}
		if got := zipNames(t, filepath.Join(root, "v0.1.0.zip")); !reflect.DeepEqual(got, want) {
			t.Errorf("root v0.1.0.zip holds %q, want %q", got, want)
		}
	})
	t.Run("a nested module's zip holds its directory's files", func(t *testing.T) {
		want := []string{"example.com/Root/sub@v0.1.0/go.mod", "example.com/Root/sub@v0.1.0/sub.go"}
		if got := zipNames(t, filepath.Join(sub, "v0.1.0.zip")); !reflect.DeepEqual(got, want) {
			t.Errorf("sub v0.1.0.zip holds %q, want %q", got, want)
		}
	})
	t.Run("an unreleased module is not in the proxy", func(t *testing.T) {
		if _, err := os.Stat(filepath.Join(out, "example.com", "!root", "internal")); !os.IsNotExist(err) {
			t.Errorf("Stat(internal) error = %v, want it not to exist", err)
		}
	})
	t.Run("a second version joins the list in semver order", func(t *testing.T) {
		writeFiles(t, repo, map[string]string{"root.go": "package root\n\n// V is new.\nconst V = 2\n"})
		commit(t, repo, "second")
		for _, tag := range []string{"v0.10.0", "sub/v0.10.0"} {
			runGit(t, repo, "tag", tag)
		}
		if err := Proxy(repo, mods, "v0.10.0", out); err != nil {
			t.Fatal(err)
		}
		if got, want := readFile(t, filepath.Join(root, "list")), "v0.1.0\nv0.10.0\n"; got != want {
			t.Errorf("list = %q, want %q", got, want)
		}
	})
}

func TestProxyRejectsMissingOrWrongTags(t *testing.T) {
	tests := []struct {
		name string
		tags []string
	}{
		{"a missing root tag is an error", []string{"sub/v0.2.0"}},
		{"a missing nested module tag is an error", []string{"v0.2.0"}},
		{"a nested module's tag on a commit without its go.mod is an error", []string{"v0.2.0", "sub/v0.2.0@HEAD~1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := newRepo(t, map[string]string{"go.mod": gomod("example.com/r")})
			writeFiles(t, repo, map[string]string{"sub/go.mod": gomod("example.com/r/sub")})
			commit(t, repo, "add sub")
			for _, tag := range tt.tags {
				name, rev, _ := strings.Cut(tag, "@")
				if rev == "" {
					rev = "HEAD"
				}
				runGit(t, repo, "tag", name, rev)
			}
			mods, err := Modules(repo)
			if err != nil {
				t.Fatal(err)
			}
			if err := Proxy(repo, mods, "v0.2.0", t.TempDir()); !errors.Is(err, errTag) {
				t.Errorf("Proxy(v0.2.0) error = %v, want %v", err, errTag)
			}
		})
	}
}

// TestGoDownloadsFromTheProxy checks the proxy with its real reader: the go
// command downloads and verifies both modules from it, in a module cache of
// its own, without a checksum database.
func TestGoDownloadsFromTheProxy(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	repo := proxyRepo(t)
	mods, err := Modules(repo)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := Proxy(repo, mods, "v0.1.0", out); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gobin, "mod", "download", "-json", "example.com/Root@v0.1.0", "example.com/Root/sub@v0.1.0")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOPROXY=file://"+filepath.ToSlash(out), "GONOSUMDB=example.com",
		"GOMODCACHE="+t.TempDir(), "GOFLAGS=-modcacherw", "GOWORK=off", "GOPRIVATE=", "GONOPROXY=")
	stdout, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go mod download: %v\n%s%s", err, stdout, stderr)
	}
	dec := json.NewDecoder(strings.NewReader(string(stdout)))
	for _, want := range []struct{ path, file string }{{"example.com/Root", "root.go"}, {"example.com/Root/sub", "sub.go"}} {
		var got struct{ Path, Version, Dir, Error string }
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("go mod download -json: %v\n%s", err, stdout)
		}
		if got.Path != want.path || got.Version != "v0.1.0" || got.Error != "" {
			t.Errorf("go mod download gave %+v, want %s@v0.1.0", got, want.path)
			continue
		}
		if _, err := os.Stat(filepath.Join(got.Dir, want.file)); err != nil {
			t.Errorf("%s@v0.1.0 downloaded without %s: %v", want.path, want.file, err)
		}
	}
}
