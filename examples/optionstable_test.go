package examples_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// adapterDirs maps the columns of the README's options table to the
// directories of the adapters they name.
var adapterDirs = map[string]string{
	"net/http": "../nethttp",
	"gin":      "../ginlimit",
	"echo":     "../echolimit",
	"fiber":    "../fiberlimit",
	"gRPC":     "../grpclimit",
}

// TestREADMEOptionsTableNamesEachAdaptersIdentifiers checks the README's
// options table against the adapters' source: every name in a column is
// an exported identifier of that adapter (a function, a type, or a field
// written Type.Field), or of package guard or keyfuncs when qualified so;
// and every With... option an adapter exports stands in its column.
func TestREADMEOptionsTableNamesEachAdaptersIdentifiers(t *testing.T) {
	guide, err := os.ReadFile("../docs/adapters.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(guide), "\n## Options in every adapter\n")
	if !ok {
		t.Fatal(`docs/adapters.md has no "Options in every adapter" section`)
	}
	section, _, _ = strings.Cut(section, "\n#")
	var rows [][]string
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "|") && !strings.HasPrefix(line, "|---") {
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			rows = append(rows, cells)
		}
	}
	if len(rows) < 2 {
		t.Fatalf("the options table has %d rows, want a header and options", len(rows))
	}
	qualified := map[string]map[string]bool{
		"guard":    exportedNames(t, "../guard"),
		"keyfuncs": exportedNames(t, "../keyfuncs"),
	}
	name := regexp.MustCompile("`([^`]+)`")
	header := rows[0]
	for col, title := range header[1:] {
		dir, ok := adapterDirs[title]
		if !ok {
			t.Errorf("the options table has a column %q, which names no adapter", title)
			continue
		}
		names := exportedNames(t, dir)
		listed := map[string]bool{}
		for _, row := range rows[1:] {
			if len(row) != len(header) {
				t.Fatalf("row %q has %d cells, want %d", row[0], len(row), len(header))
			}
			ms := name.FindAllStringSubmatch(row[col+1], -1)
			if len(ms) == 0 {
				t.Errorf("%s, %s: no name", title, row[0])
			}
			for _, m := range ms {
				id := m[1]
				listed[id] = true
				set := names
				if pkg, rest, ok := strings.Cut(id, "."); ok && qualified[pkg] != nil {
					set, id = qualified[pkg], rest
				}
				if !set[id] {
					t.Errorf("%s, %s: %s names no exported identifier of %s", title, row[0], m[1], dir)
				}
			}
		}
		for n := range names {
			if strings.HasPrefix(n, "With") && !listed[n] {
				t.Errorf("%s exports %s, which the options table does not list", dir, n)
			}
		}
	}
}

// exportedNames returns the exported top-level identifiers of the package
// in dir (test files aside), and the exported fields of its struct types
// as Type.Field.
func exportedNames(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						names[s.Name.Name] = true
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, fld := range st.Fields.List {
								for _, n := range fld.Names {
									if n.IsExported() {
										names[s.Name.Name+"."+n.Name] = true
									}
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	return names
}
