package examples_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// buildFlags are the flags of the go commands these tests run: those the
// test command (scripts/test.sh) builds the tests with, -trimpath and,
// under it, -race, so that the dependencies come from the build cache
// entries the tests' own build made instead of compiling again.
func buildFlags() []string {
	if raceEnabled {
		return []string{"-race", "-trimpath"}
	}
	return []string{"-trimpath"}
}

// programs are the directories of the example programs.
var programs = []string{
	"quickstart/nethttp",
	"quickstart/chi",
	"quickstart/gin",
	"quickstart/echo",
	"quickstart/fiber",
	"grpc",
	"redis",
	"redisgin",
	"redisecho",
	"tiers",
	"weighted",
	"posthoc",
	"rulesfile",
	"metrics",
}

// onRedis are the programs whose -selftest needs a Redis (-redis).
var onRedis = map[string]bool{"redis": true, "redisgin": true, "redisecho": true}

// TestPrograms builds every program and runs it with -selftest, as a user
// would: it checks what the in-process tests of each directory do not,
// that each builds into a binary whose -selftest flag works and exits 0.
func TestPrograms(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every program")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	bin := t.TempDir()
	build := exec.Command(gobin, append(append([]string{"build"}, buildFlags()...), "-o", bin+string(filepath.Separator), "./...")...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./...: %v\n%s", err, out)
	}
	for _, dir := range programs {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			args := []string{"-selftest"}
			if onRedis[dir] {
				addr := os.Getenv("TOLLGATE_REDIS_ADDR")
				if addr == "" {
					if os.Getenv("TOLLGATE_REQUIRE_REDIS") == "1" {
						t.Fatal("TOLLGATE_REQUIRE_REDIS=1 but TOLLGATE_REDIS_ADDR is not set")
					}
					t.Skip("TOLLGATE_REDIS_ADDR is not set")
				}
				args = append(args, "-redis", addr)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(bin, filepath.Base(dir)), args...)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "selftest: ok") {
				t.Fatalf("%s %s: %v\n%s", dir, strings.Join(args, " "), err, out)
			}
		})
	}
}

// TestProgramsListed checks that programs lists every program directory.
func TestProgramsListed(t *testing.T) {
	var found []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "main.go" {
			return err
		}
		found = append(found, filepath.ToSlash(filepath.Dir(path)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, p := range programs {
		listed[p] = true
	}
	for _, f := range found {
		if !listed[f] {
			t.Errorf("program %s is not in programs", f)
		}
	}
	if len(found) != len(programs) {
		t.Errorf("found %d programs %v, programs lists %d", len(found), found, len(programs))
	}
}
