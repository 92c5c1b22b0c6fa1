package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxNodes bounds the nodes a file may hold, aliases expanded, so that a
// file of nested aliases cannot make parsing explode.
const maxNodes = 100_000

// maxProblems bounds the problems an error lists.
const maxProblems = 20

// maxDepth bounds the nesting of a JSON file.
const maxDepth = 64

// parseTree parses data, JSON when json is set and YAML otherwise, into a
// tree of nodes with their lines.
func parseTree(name string, data []byte, isJSON bool) (*yaml.Node, error) {
	var root *yaml.Node
	var err error
	if isJSON {
		root, err = jsonTree(data)
	} else {
		root, err = yamlTree(data)
	}
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.File = name
		}
		return nil, err
	}
	if root == nil {
		return nil, &Error{File: name, Err: errors.New("no rules: the file is empty")}
	}
	return root, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func yamlTree(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, nil
		}
		return nil, syntaxError(err)
	}
	var more yaml.Node
	switch err := dec.Decode(&more); {
	case err == nil:
		return nil, &Error{Line: more.Line, Err: errors.New("a second YAML document: a rules file holds one")}
	case err != io.EOF:
		return nil, syntaxError(err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, nil
	}
	return root, nil
}

// syntaxError turns the YAML library's "yaml: line 3: ..." into an Error
// at line 3.
func syntaxError(err error) error {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{Line: line, Err: errors.New(m[2])}
	}
	return &Error{Err: fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "yaml: "))}
}

// jsonTree parses JSON with encoding/json, strictly, into the same tree
// of nodes as YAML, with each node's line.
func jsonTree(data []byte) (*yaml.Node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	lines := lineStarts(data)
	lineAt := func(off int64) int {
		return 1 + sort.Search(len(lines), func(i int) bool { return lines[i] > int(off) })
	}
	fail := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return &Error{Line: lineAt(se.Offset), Err: fmt.Errorf("JSON: %v", se)}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF { // inside a value
			return &Error{Line: lineAt(int64(len(data))), Err: errors.New("JSON: unexpected end of file")}
		}
		return &Error{Err: fmt.Errorf("JSON: %v", err)}
	}
	var value func(depth int) (*yaml.Node, error)
	value = func(depth int) (*yaml.Node, error) {
		tok, err := dec.Token()
		if err != nil {
			return nil, fail(err)
		}
		line := lineAt(dec.InputOffset() - 1)
		switch t := tok.(type) {
		case json.Delim:
			if depth >= maxDepth {
				return nil, &Error{Line: line, Err: fmt.Errorf("JSON nested more than %d deep", maxDepth)}
			}
			n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: line}
			if t == '[' {
				n.Kind, n.Tag = yaml.SequenceNode, "!!seq"
			}
			for dec.More() {
				if n.Kind == yaml.MappingNode {
					k, err := dec.Token()
					if err != nil {
						return nil, fail(err)
					}
					ks, _ := k.(string) // encoding/json reports a key that is not a string
					n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: ks, Line: lineAt(dec.InputOffset() - 1)})
				}
				v, err := value(depth + 1)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, v)
			}
			if _, err := dec.Token(); err != nil { // the closing delimiter
				return nil, fail(err)
			}
			return n, nil
		case string:
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t, Line: line}, nil
		case json.Number:
			tag := "!!int"
			if strings.ContainsAny(string(t), ".eE") {
				tag = "!!float"
			}
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(t), Line: line}, nil
		case bool:
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(t), Line: line}, nil
		default: // nil
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null", Line: line}, nil
		}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	root, err := value(0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			return nil, &Error{Line: lineAt(dec.InputOffset() - 1), Err: errors.New("JSON: data after the top-level value")}
		}
		return nil, fail(err)
	}
	return root, nil
}

// lineStarts returns the offset at which each line after the first
// starts, so that the line of an offset is 1 + the number of them at or
// before it.
func lineStarts(data []byte) []int {
	var starts []int
	for i, c := range data {
		if c == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// A decoder walks a tree of nodes and collects the problems it finds.
type decoder struct {
	file   string
	errs   []*Error
	budget int
}

func (d *decoder) fail(n *yaml.Node, field, format string, args ...any) {
	d.failErr(n, field, fmt.Errorf(format, args...))
}

func (d *decoder) failErr(n *yaml.Node, field string, err error) {
	line := 0
	if n != nil {
		line = n.Line
	}
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Field: field, Err: err})
}

// err returns the problems found, each an *Error, in the order of their
// lines, joined; nil when there are none.
func (d *decoder) err() error {
	if len(d.errs) == 0 {
		return nil
	}
	sort.SliceStable(d.errs, func(i, j int) bool { return d.errs[i].Line < d.errs[j].Line })
	if len(d.errs) == 1 {
		return d.errs[0]
	}
	if n := len(d.errs) - maxProblems; n > 0 {
		d.errs = append(d.errs[:maxProblems], &Error{File: d.file, Err: fmt.Errorf("%d more problems", n)})
	}
	errs := make([]error, len(d.errs))
	for i, e := range d.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// resolve follows an alias to its node, and counts the node against the
// budget; it returns nil once the budget is spent.
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if d.budget--; d.budget == -1 {
		d.fail(n, "", "more than %d values, aliases expanded", maxNodes)
	}
	if d.budget < 0 {
		return nil
	}
	return n
}

// describe names the kind of a node for messages: "a mapping", "a list",
// "null", "the number 5", "the string \"x\"".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.Tag {
	case "!!null":
		return "nothing"
	case "!!str":
		return strconv.Quote(n.Value)
	}
	return n.Value
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// A field is a known key of a mapping and what to do with its value.
type field struct {
	name string
	fn   func(val *yaml.Node, path string)
}

// fields walks the mapping n at path: every key must be one of fields,
// given once. It reports whether n is a mapping.
func (d *decoder) fields(n *yaml.Node, path string, fields ...field) bool {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	return d.mapping(n, path, func(key string, k, v *yaml.Node) {
		for _, f := range fields {
			if f.name == key {
				f.fn(v, join(path, key))
				return
			}
		}
		d.fail(k, join(path, key), "unknown field (want %s)", orList(names))
	}, names...)
}

// mapping walks the mapping n, calling fn for each key, given once.
func (d *decoder) mapping(n *yaml.Node, path string, fn func(key string, k, v *yaml.Node), want ...string) bool {
	if n = d.resolve(n); n == nil {
		return false
	}
	if n.Kind != yaml.MappingNode {
		if len(want) > 0 {
			d.fail(n, path, "want a mapping of %s, not %s", andList(want), describe(n))
		} else {
			d.fail(n, path, "want a mapping, not %s", describe(n))
		}
		return false
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := d.resolve(n.Content[i])
		if k == nil {
			return false
		}
		switch {
		case k.Kind != yaml.ScalarNode:
			d.fail(k, path, "want a name as a key, not %s", describe(k))
		case k.Tag == "!!merge":
			d.fail(k, path, "merge keys (<<) are not supported")
		case seen[k.Value]:
			d.fail(k, join(path, k.Value), "given twice")
		default:
			seen[k.Value] = true
			fn(k.Value, k, n.Content[i+1])
		}
	}
	return true
}

// list walks the sequence n; a single scalar is a list of one when one is
// set.
func (d *decoder) list(n *yaml.Node, path string, one bool, fn func(i int, elem *yaml.Node, path string)) {
	if n = d.resolve(n); n == nil {
		return
	}
	if n.Kind == yaml.ScalarNode && one && n.Tag != "!!null" {
		fn(0, n, path)
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.fail(n, path, "want a list, not %s", describe(n))
		return
	}
	for i, e := range n.Content {
		fn(i, e, index(path, i))
	}
}

// scalar returns the resolved scalar n, or reports what it is instead.
func (d *decoder) scalar(n *yaml.Node, path, want string) (*yaml.Node, bool) {
	if n = d.resolve(n); n == nil {
		return nil, false
	}
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		d.fail(n, path, "want %s, not %s", want, describe(n))
		return n, false
	}
	return n, true
}

// str returns the text of a scalar: a string, or a number or boolean
// written without quotes.
func (d *decoder) str(n *yaml.Node, path string) (string, bool) {
	s, ok := d.scalar(n, path, "a string")
	if !ok {
		return "", false
	}
	return s.Value, true
}

// integer returns a whole number in [lo, hi].
func (d *decoder) integer(n *yaml.Node, path string, lo, hi int64) (int64, bool) {
	s, ok := d.scalar(n, path, "a whole number")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(s.Value, "_", ""), 10, 64)
	switch {
	case s.Tag != "!!int" || err != nil:
		d.fail(s, path, "want a whole number, not %s", describe(s))
	case v < lo:
		d.fail(s, path, "%d must be at least %d", v, lo)
	case v > hi:
		d.fail(s, path, "%d must be at most %d", v, hi)
	default:
		return v, true
	}
	return 0, false
}

func (d *decoder) boolean(n *yaml.Node, path string) (bool, bool) {
	s, ok := d.scalar(n, path, "true or false")
	if !ok {
		return false, false
	}
	v, err := strconv.ParseBool(s.Value)
	if s.Tag != "!!bool" || err != nil {
		d.fail(s, path, "want true or false, not %s", describe(s))
		return false, false
	}
	return v, true
}

// oneOf returns a string that must be one of choices, compared ignoring
// case.
func (d *decoder) oneOf(n *yaml.Node, path string, choices ...string) (string, bool) {
	s, ok := d.str(n, path)
	if !ok {
		return "", false
	}
	for _, c := range choices {
		if strings.EqualFold(s, c) {
			return c, true
		}
	}
	d.fail(n, path, "%q is not %s", s, orList(choices))
	return "", false
}

// orList returns "a, b or c".
func orList(s []string) string  { return list(s, " or ") }
func andList(s []string) string { return list(s, " and ") }

func list(s []string, last string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + last + s[len(s)-1]
}
