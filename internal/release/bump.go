package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"

	"golang.org/x/mod/modfile"
)

// Bump sets, in the go.mod file of every module of mods, the required
// version of each of the repository's modules to v, keeping everything
// else: comments, // indirect, and the replace directives that point them
// at their directories for development. It returns the go.mod files it
// changed (slash-separated, relative to repo). A released module that
// requires an unreleased one is an error, since its users could not get
// that version; on such an error no file has been written.
func Bump(repo string, mods []Module, v string) ([]string, error) {
	byPath := make(map[string]Module, len(mods))
	for _, m := range mods {
		byPath[m.Path] = m
	}
	type edit struct {
		name, file string
		data       []byte
	}
	var edits []edit // written once every go.mod is known to be fine
	for _, m := range mods {
		name := path.Join(m.Dir, "go.mod")
		file := filepath.Join(repo, filepath.FromSlash(name))
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		f, err := modfile.Parse(name, data, nil)
		if err != nil {
			return nil, err
		}
		var stale []string // the repository's modules required at another version
		for _, r := range f.Require {
			dep, ours := byPath[r.Mod.Path]
			if !ours {
				continue
			}
			if m.Released && !dep.Released {
				return nil, fmt.Errorf("%w: %s requires %s, which is not released", errLayout, name, dep.Path)
			}
			if r.Mod.Version != v {
				stale = append(stale, r.Mod.Path)
			}
		}
		if len(stale) == 0 {
			continue
		}
		for _, p := range stale {
			if err := f.AddRequire(p, v); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		f.Cleanup()
		out, err := f.Format()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		edits = append(edits, edit{name, file, out})
	}
	var changed []string
	for _, e := range edits {
		if err := os.WriteFile(e.file, e.data, 0o644); err != nil {
			return changed, err
		}
		changed = append(changed, e.name)
	}
	return changed, nil
}
