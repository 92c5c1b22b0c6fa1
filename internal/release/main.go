package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

const usage = `usage:
  release [-repo DIR] list VERSION
  release [-repo DIR] bump VERSION
  release [-repo DIR] proxy -out DIR VERSION
`

// errUsage reports a command line that names no known command or lacks an
// argument.
var errUsage = errors.New("release: bad command line")

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if errors.Is(err, errUsage) {
			fmt.Fprint(os.Stderr, usage)
		}
		os.Exit(1)
	}
}

// run runs the command line args (without the program name), writing its
// output to w.
func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	repo := fs.String("repo", ".", "the repository's work tree")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	args = fs.Args()
	if len(args) == 0 {
		return fmt.Errorf("%w: no command", errUsage)
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "list", "bump", "proxy":
	default:
		return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
	out := ""
	if cmd == "proxy" {
		pf := flag.NewFlagSet("proxy", flag.ContinueOnError)
		pf.SetOutput(io.Discard)
		pf.StringVar(&out, "out", "", "the directory to write the proxy's files to")
		if err := pf.Parse(args); err != nil {
			return fmt.Errorf("%w: proxy: %w", errUsage, err)
		}
		if out == "" {
			return fmt.Errorf("%w: proxy needs -out DIR", errUsage)
		}
		args = pf.Args()
	}
	if len(args) != 1 {
		return fmt.Errorf("%w: %s takes one VERSION, got %d arguments", errUsage, cmd, len(args))
	}
	v := args[0]

	root, err := filepath.Abs(*repo)
	if err != nil {
		return err
	}
	mods, err := Modules(root)
	if err != nil {
		return err
	}
	if err := CheckVersion(mods, v); err != nil {
		return err
	}
	switch cmd {
	case "list":
		for _, m := range mods {
			if m.Released {
				fmt.Fprintln(w, m.Path, m.Tag(v))
			}
		}
	case "bump":
		changed, err := Bump(root, mods, v)
		if err != nil {
			return err
		}
		for _, name := range changed {
			fmt.Fprintln(w, name)
		}
	case "proxy":
		return Proxy(root, mods, v, out)
	}
	return nil
}
