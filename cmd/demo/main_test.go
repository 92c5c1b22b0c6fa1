package main

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestDemo runs the demo and checks the status of every request: they do
// not depend on timing, however the run falls within a second or minute.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo sleeps 2s")
	}
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	text := out.String()
	var got []string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		if _, err := strconv.Atoi(f[0]); err == nil {
			got = append(got, f[4])
		}
	}
	want := "200 200 200 200 200 429 200 200 200 429 200 200 429 200 200 200 429"
	if g := strings.Join(got, " "); g != want {
		t.Errorf("statuses:\n got %s\nwant %s\noutput:\n%s", g, want, text)
	}
	for _, line := range strings.Split(text, "\n") {
		if n := utf8.RuneCountInString(line); n > Width {
			t.Errorf("a line of %d columns, want at most %d:\n%s", n, Width, line)
		}
	}
	for _, s := range []string{`"violated-policies": [`, "server shut down"} {
		if !strings.Contains(text, s) {
			t.Errorf("output lacks %q:\n%s", s, text)
		}
	}
}
