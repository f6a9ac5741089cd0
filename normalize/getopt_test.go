package normalize

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGetopt(t *testing.T) {
	curl := opts("-o --output -H -d")
	xxd := opts("-l -s -c -len -cols")
	sed := opts("-e -f -i? --expression")
	xargs := posixOpts("-I -n")
	tests := []struct {
		name  string
		spec  optSpec
		argv  string
		ops   []string
		flags []flagArg
		rest  []string
	}{
		{"bundle ends in a value flag", curl, "-sLo out.txt http://x", []string{"http://x"},
			[]flagArg{{"-s", "", false}, {"-L", "", false}, {"-o", "out.txt", true}}, nil},
		{"value attached in a bundle", curl, "-sLoout.txt http://x", []string{"http://x"},
			[]flagArg{{"-s", "", false}, {"-L", "", false}, {"-o", "out.txt", true}}, nil},
		{"long with =", curl, "--output=a --output b c", []string{"c"},
			[]flagArg{{"--output", "a", true}, {"--output", "b", true}}, nil},
		{"unknown long takes no value", curl, "--silent u", []string{"u"}, []flagArg{{"--silent", "", false}}, nil},
		{"-- ends the flags", curl, "-H x -- -o y", []string{"-o", "y"}, []flagArg{{"-H", "x", true}}, nil},
		{"- is an operand", curl, "-d @- -", []string{"-"}, []flagArg{{"-d", "@-", true}}, nil},
		{"value flag last, no value", curl, "u -o", []string{"u"}, []flagArg{{"-o", "", false}}, nil},
		{"flags after operands (GNU)", curl, "u -o f v", []string{"u", "v"}, []flagArg{{"-o", "f", true}}, nil},
		{"optional value only attached", sed, "-i.bak -i s/a/b/ f", []string{"s/a/b/", "f"},
			[]flagArg{{"-i", ".bak", true}, {"-i", "", false}}, nil},
		{"optional value ends a bundle", sed, "-ni s f", []string{"s", "f"}, []flagArg{{"-n", "", false}, {"-i", "", false}}, nil},
		{"unbundled words", xxd, "-ps -len 16 -c8 f", []string{"f"},
			[]flagArg{{"-ps", "", false}, {"-len", "16", true}, {"-c", "8", true}}, nil},
		{"posix stops at the first operand", xargs, "-I{} -0 cat -n {}", []string{"cat", "-n", "{}"},
			[]flagArg{{"-I", "{}", true}, {"-0", "", false}}, []string{"cat", "-n", "{}"}},
		{"posix after --", xargs, "-n 1 -- -x y", []string{"-x", "y"}, []flagArg{{"-n", "1", true}}, []string{"-x", "y"}},
		{"digits are flags, not values", opts("-n"), "-20 f", []string{"f"}, []flagArg{{"-2", "", false}, {"-0", "", false}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.spec.parse(strings.Fields(tc.argv))
			want := args{ops: tc.ops, flags: tc.flags, rest: tc.rest}
			if d := cmp.Diff(want, got, cmp.AllowUnexported(args{}, flagArg{})); d != "" {
				t.Errorf("parse(%q) (-want +got):\n%s", tc.argv, d)
			}
		})
	}
}

func TestGetoptLookups(t *testing.T) {
	o := opts("-o --output")
	p := o.parse([]string{"-vo", "a", "--output=b", "-x"})
	if v, ok := p.value("--output", "-o"); !ok || v != "a" {
		t.Errorf("value = %q, %v; want the first given, a", v, ok)
	}
	if !p.has("-x") || !p.has("-v") || p.has("-q") {
		t.Errorf("has: -x %v -v %v -q %v; want true true false", p.has("-x"), p.has("-v"), p.has("-q"))
	}
	if _, ok := p.value("-x"); ok {
		t.Error("value(-x) found one; -x was given without")
	}
}

// TestCommandTable: every flag list of the table reads (opts panics on a
// malformed entry) and every role is one the walk applies.
func TestCommandTable(t *testing.T) {
	if len(commands) < 120 {
		t.Errorf("%d commands in the table; want the 120-odd the normalizer knows", len(commands))
	}
	for name, sp := range commands {
		if sp.fn == nil && sp.ops == roleUnset && sp.lead == roleUnset && sp.flagRoles == nil {
			t.Errorf("%s: a plain entry with no role records nothing", name)
		}
		for f, r := range sp.flagRoles {
			if r == roleUnset || r > roleScript {
				t.Errorf("%s: flag %s has role %d", name, f, r)
			}
			if !strings.HasPrefix(f, "-") {
				t.Errorf("%s: flag role for %q, which is no flag", name, f)
			}
		}
	}
}
