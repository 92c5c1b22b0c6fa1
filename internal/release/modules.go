package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

var (
	// errVersion reports a VERSION that cannot be released.
	errVersion = errors.New("release: invalid version")
	// errLayout reports modules that Go could not find by their tags.
	errLayout = errors.New("release: module layout")
	// errTag reports a missing tag, or a tag that disagrees with its module.
	errTag = errors.New("release: tag")
)

// A Module is one go.mod file of the repository.
type Module struct {
	Dir      string // slash-separated, relative to the repository root: "." for the root module
	Path     string // the module path, from the go.mod file
	Released bool   // tagged by a release and put in its proxy
}

// Tag returns the tag under which Go looks for version v of m: v for the
// root module, Dir/v for the others.
func (m Module) Tag(v string) string {
	if m.Dir == "." {
		return v
	}
	return m.Dir + "/" + v
}

// released reports whether the module in dir (slash-separated, relative to
// the repository root) is released: every module but those in examples/,
// bench/ or under an internal/ directory.
func released(dir string) bool {
	for i, elem := range strings.Split(dir, "/") {
		if elem == "internal" || i == 0 && (elem == "examples" || elem == "bench") {
			return false
		}
	}
	return true
}

// Modules returns the modules of the git repository at repo: one per go.mod
// file git tracks outside testdata and vendor directories, the root module
// first and the others by directory. It checks that there is a root module
// and that each released module's path is the root's path followed by its
// directory, as Go's tag lookup requires.
func Modules(repo string) ([]Module, error) {
	out, err := git(repo, "ls-files", "-z")
	if err != nil {
		return nil, err
	}
	var mods []Module
	for _, name := range strings.Split(string(out), "\x00") {
		if path.Base(name) != "go.mod" || skippedDir(path.Dir(name)) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(repo, filepath.FromSlash(name)))
		if err != nil {
			return nil, err
		}
		p := modfile.ModulePath(data)
		if p == "" {
			return nil, fmt.Errorf("%w: %s has no module line", errLayout, name)
		}
		dir := path.Dir(name)
		mods = append(mods, Module{Dir: dir, Path: p, Released: released(dir)})
	}
	sort.Slice(mods, func(i, j int) bool {
		if (mods[i].Dir == ".") != (mods[j].Dir == ".") {
			return mods[i].Dir == "."
		}
		return mods[i].Dir < mods[j].Dir
	})
	if len(mods) == 0 || mods[0].Dir != "." {
		return nil, fmt.Errorf("%w: no go.mod at the root of %s", errLayout, repo)
	}
	root := mods[0].Path
	for _, m := range mods[1:] {
		if want := root + "/" + m.Dir; m.Released && m.Path != want {
			return nil, fmt.Errorf("%w: %s/go.mod declares module %s; Go finds the tag %s only for module %s",
				errLayout, m.Dir, m.Path, m.Tag("vX.Y.Z"), want)
		}
	}
	return mods, nil
}

// skippedDir reports whether a go.mod in dir is not a module of the
// repository: it lies in a testdata or vendor directory.
func skippedDir(dir string) bool {
	for _, elem := range strings.Split(dir, "/") {
		if elem == "testdata" || elem == "vendor" {
			return true
		}
	}
	return false
}

// CheckVersion reports whether v can be released as a version of every
// released module of mods.
func CheckVersion(mods []Module, v string) error {
	switch {
	case !semver.IsValid(v):
		return fmt.Errorf("%w: %q is not a semantic version vMAJOR.MINOR.PATCH[-PRERELEASE], e.g. v0.1.0", errVersion, v)
	case semver.Build(v) != "":
		return fmt.Errorf("%w: %q has build metadata (%s), which module versions cannot carry", errVersion, v, semver.Build(v))
	case semver.Canonical(v) != v:
		return fmt.Errorf("%w: %q is not canonical: write %s", errVersion, v, semver.Canonical(v))
	case module.IsPseudoVersion(v):
		return fmt.Errorf("%w: %q has the form of a pseudo-version, which Go reserves for untagged commits", errVersion, v)
	}
	for _, m := range mods {
		if !m.Released {
			continue
		}
		if err := module.Check(m.Path, v); err != nil {
			return fmt.Errorf("%w: %w", errVersion, err)
		}
	}
	return nil
}

// git runs git with args in dir and returns its standard output; its
// standard error is in the error.
func git(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}
