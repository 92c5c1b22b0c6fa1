package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	modzip "golang.org/x/mod/zip"
)

// Proxy writes under out the files a module proxy serves for version v of
// every released module of mods, made from the module's tag in the git
// repository at repo (an absolute path to a work tree): @v/list (v added to
// the versions already listed there), and v's .info, .mod and .zip. The tag
// must exist and hold the module's go.mod, with the module's path.
func Proxy(repo string, mods []Module, v, out string) error {
	for _, m := range mods {
		if !m.Released {
			continue
		}
		if err := proxyModule(repo, m, v, out); err != nil {
			return fmt.Errorf("%s@%s: %w", m.Path, v, err)
		}
	}
	return nil
}

// info is the JSON of a proxy's .info file.
type info struct {
	Version string
	Time    time.Time
}

func proxyModule(repo string, m Module, v, out string) error {
	tag := m.Tag(v)
	if _, err := git(repo, "rev-parse", "--verify", "--quiet", "refs/tags/"+tag+"^{commit}"); err != nil {
		return fmt.Errorf("%w %s: not in %s", errTag, tag, repo)
	}
	gomod := "go.mod"
	subdir := ""
	if m.Dir != "." {
		gomod = m.Dir + "/go.mod"
		subdir = m.Dir
	}
	modData, err := git(repo, "show", tag+":"+gomod)
	if err != nil {
		return fmt.Errorf("%w %s has no %s: %w", errTag, tag, gomod, err)
	}
	if p := modfile.ModulePath(modData); p != m.Path {
		return fmt.Errorf("%w %s: %s declares module %q", errTag, tag, gomod, p)
	}
	when, err := git(repo, "log", "-1", "--format=%cI", tag)
	if err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(string(when)))
	if err != nil {
		return fmt.Errorf("%w %s: commit time: %w", errTag, tag, err)
	}
	infoData, err := json.Marshal(info{Version: v, Time: t.UTC()})
	if err != nil {
		return err
	}

	escPath, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	escVersion, err := module.EscapeVersion(v)
	if err != nil {
		return err
	}
	dir := filepath.Join(out, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := filepath.Join(dir, escVersion)
	if err := writeZip(repo, m, v, tag, subdir, base+".zip"); err != nil {
		return err
	}
	if err := os.WriteFile(base+".mod", modData, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(base+".info", infoData, 0o644); err != nil {
		return err
	}
	return addToList(filepath.Join(dir, "list"), v)
}

// writeZip writes the module zip of m at v, from tag, to file, and checks it
// as the go command will.
func writeZip(repo string, m Module, v, tag, subdir, file string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	mv := module.Version{Path: m.Path, Version: v}
	if err := modzip.CreateFromVCS(f, mv, repo, tag, subdir); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	_, err = modzip.CheckZip(mv, file)
	return err
}

// addToList adds v to the proxy's version list in file, one version per
// line, sorted.
func addToList(file string, v string) error {
	data, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	versions := []string{v}
	for _, line := range strings.Fields(string(data)) {
		if line != v {
			versions = append(versions, line)
		}
	}
	semver.Sort(versions)
	return os.WriteFile(file, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}
