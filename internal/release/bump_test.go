package main

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestBump(t *testing.T) {
	repo := newRepo(t, map[string]string{
		"go.mod": gomod("example.com/r", "require example.org/dep v1.4.0"),
		"a/go.mod": gomod("example.com/r/a",
			"require (",
			"\texample.com/r v0.0.0",
			"\texample.org/dep v1.4.0 // for the test",
			")",
			"",
			"replace example.com/r => ../"),
		"b/go.mod": gomod("example.com/r/b", "require example.org/dep v1.4.0"),
		"examples/go.mod": gomod("example.com/r/examples",
			"require (",
			"\texample.com/r v0.0.0-00010101000000-000000000000",
			"\texample.com/r/a v0.0.0 // indirect",
			")",
			"",
			"replace (",
			"\texample.com/r => ../",
			"\texample.com/r/a => ../a",
			")"),
	})
	mods, err := Modules(repo)
	if err != nil {
		t.Fatal(err)
	}
	changed, err := Bump(repo, mods, "v0.3.0")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a/go.mod", "examples/go.mod"}; !reflect.DeepEqual(changed, want) {
		t.Errorf("Bump(v0.3.0) changed %q, want %q", changed, want)
	}
	wantFiles := map[string]string{
		"go.mod": gomod("example.com/r", "require example.org/dep v1.4.0"),
		"a/go.mod": gomod("example.com/r/a",
			"require (",
			"\texample.com/r v0.3.0",
			"\texample.org/dep v1.4.0 // for the test",
			")",
			"",
			"replace example.com/r => ../"),
		"b/go.mod": gomod("example.com/r/b", "require example.org/dep v1.4.0"),
		"examples/go.mod": gomod("example.com/r/examples",
			"require (",
			"\texample.com/r v0.3.0",
			"\texample.com/r/a v0.3.0 // indirect",
			")",
			"",
			"replace (",
			"\texample.com/r => ../",
			"\texample.com/r/a => ../a",
			")"),
	}
	for name, want := range wantFiles {
		t.Run("after the bump "+name+" requires v0.3.0 of the repository's modules and keeps the rest", func(t *testing.T) {
			got, err := os.ReadFile(filepath.Join(repo, filepath.FromSlash(name)))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				t.Errorf("%s after Bump(v0.3.0) =\n%s\nwant\n%s", name, got, want)
			}
		})
	}

	t.Run("a second bump to the same version changes nothing", func(t *testing.T) {
		changed, err := Bump(repo, mods, "v0.3.0")
		if err != nil || len(changed) != 0 {
			t.Errorf("Bump(v0.3.0) again = %q, %v, want no change", changed, err)
		}
	})
}

func TestBumpRejectsReleasedModulesRequiringUnreleasedOnes(t *testing.T) {
	files := map[string]string{
		"go.mod":            gomod("example.com/r"),
		"a/go.mod":          gomod("example.com/r/a", "require example.com/r v0.0.0", "replace example.com/r => ../"),
		"b/go.mod":          gomod("example.com/r/b", "require example.com/r/internal/x v0.0.0", "replace example.com/r/internal/x => ../internal/x"),
		"internal/x/go.mod": gomod("example.com/r/internal/x"),
	}
	repo := newRepo(t, files)
	mods, err := Modules(repo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Bump(repo, mods, "v0.3.0"); !errors.Is(err, errLayout) {
		t.Errorf("Bump(v0.3.0) error = %v, want %v", err, errLayout)
	}
	got, err := os.ReadFile(filepath.Join(repo, "a", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != files["a/go.mod"] {
		t.Errorf("a/go.mod after a failed Bump =\n%s\nwant it unchanged:\n%s", got, files["a/go.mod"])
	}
}
