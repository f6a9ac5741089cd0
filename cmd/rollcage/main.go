// Command rollcage runs agent episodes in sandboxes behind an online
// anti-cheating monitor. This file is wiring only: each subcommand lives in
// its own file and registers itself.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// command is one subcommand. Run parses its own flags from args (with a
// flag.FlagSet whose output is stderr) and returns an error for the
// one-line message rollcage prints; errUsage or flag.ErrHelp print no more.
type command struct {
	Name    string
	Summary string
	Run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.Name]; dup {
		panic("rollcage: command registered twice: " + c.Name)
	}
	commands[c.Name] = c
}

// exitError carries a specific exit code (e.g. 1 for "a check failed",
// as opposed to 2 for usage or 3 for infrastructure).
type exitError struct {
	Code int
	Err  error
}

func (e *exitError) Error() string { return e.Err.Error() }
func (e *exitError) Unwrap() error { return e.Err }

// errUsage: the message was already printed with the usage.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "rollcage: unknown command %q; run 'rollcage --help' for the list\n", args[0])
		return 2
	}
	err := c.Run(ctx, args[1:], stdout, stderr)
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.As(err, &ee):
		if ee.Err != nil && !errors.Is(ee.Err, errUsage) {
			fmt.Fprintf(stderr, "rollcage %s: %v\n", c.Name, ee.Err)
		}
		return ee.Code
	default:
		fmt.Fprintf(stderr, "rollcage %s: %v\n", c.Name, err)
		return 3
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "rollcage: sandboxed agent rollouts behind an online anti-cheating monitor")
	fmt.Fprintln(w, "\nusage: rollcage <command> [flags]   (rollcage <command> --help for its flags)")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].Summary)
	}
	fmt.Fprintln(w, "\nexit codes: 0 ok, 1 a check failed (hacks found, wrong demo row), 2 usage, 3 error")
}

// newFlags returns a FlagSet for a subcommand whose usage names it.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("rollcage "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: rollcage %s %s\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags, turning a bad flag into errUsage (the FlagSet has
// already said what is wrong).
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	return nil
}

// subcommand refuses args that do not start with the only subcommand
// sub, printing usage to stderr.
func subcommand(args []string, sub, usage string, stderr io.Writer) error {
	if len(args) == 0 || args[0] != sub {
		fmt.Fprintln(stderr, usage)
		return errUsage
	}
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
