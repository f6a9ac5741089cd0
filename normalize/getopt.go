package normalize

import "strings"

// optSpec says which flags of a command take a value, so that its
// arguments split into flags and operands as the command itself splits
// them: bundled short flags (-sLo FILE, -qO-), values attached (-n5,
// --output=FILE) or separate (-n 5, --output FILE), and "--".
type optSpec struct {
	val      [128]bool       // one-letter flags that take a value
	optional [128]bool       // one-letter flags whose value is optional, attached only (sed -i.bak)
	long     map[string]bool // long flags (with their dashes) that take a value
	single   map[string]bool // with noBundle: single-dash words that take a value (xxd -len)
	noBundle bool            // -abc is one flag, not -a -b -c (xxd)
	posix    bool            // flags end at the first operand (a wrapper's command follows)
	noFlags  bool            // the caller asks about no flag: parse keeps only the operands
}

// opts reads a flag list: "-n -c --pid" names the flags that take a
// value; "-i?" one whose value is optional and only ever attached. A
// multi-letter single-dash word ("-len") makes the command unbundled.
func opts(list string) optSpec {
	var o optSpec
	for _, f := range strings.Fields(list) {
		switch {
		case strings.HasPrefix(f, "--") && strings.HasSuffix(f, "?"):
			// --color[=WHEN]: only ever attached, which needs no entry
		case strings.HasPrefix(f, "--"):
			if o.long == nil {
				o.long = map[string]bool{}
			}
			o.long[f] = true
		case len(f) == 3 && f[0] == '-' && f[2] == '?':
			o.optional[f[1]] = true
		case len(f) == 2 && f[0] == '-':
			o.val[f[1]] = true
		case len(f) > 2 && f[0] == '-':
			if o.single == nil {
				o.single = map[string]bool{}
			}
			o.single[f] = true
			o.noBundle = true
		default:
			panic("normalize: flag list entry " + f + " is not -x, -x?, -word or --word")
		}
	}
	return o
}

// posixOpts is opts for a command whose flags end at its first operand.
func posixOpts(list string) optSpec {
	o := opts(list)
	o.posix = true
	return o
}

// flagArg is one flag as given: its name ("-o", "--output") and value.
type flagArg struct {
	name, val string
	hasVal    bool
}

// args is a command line split by an optSpec.
type args struct {
	ops   []string  // operands in order (everything after "--" included)
	flags []flagArg // flags in order
	rest  []string  // posix: the arguments from the first operand on
}

// shortNames holds "-a" … for every ASCII byte, so that splitting a
// bundle allocates no names.
var shortNames = func() (n [128]string) {
	for c := range n {
		n[c] = "-" + string(rune(c))
	}
	return n
}()

func shortName(c byte) string {
	if c < 128 {
		return shortNames[c]
	}
	return "-" + string(c)
}

// parse splits argv (the arguments after the command name).
func (o *optSpec) parse(argv []string) args {
	var p args
	add := func(name, val string, has bool) {
		if o.noFlags {
			return
		}
		if p.flags == nil { // one allocation for most command lines
			p.flags = make([]flagArg, 0, len(argv)+2)
		}
		p.flags = append(p.flags, flagArg{name, val, has})
	}
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "--":
			if o.posix {
				p.rest = argv[i+1:]
			}
			p.ops = append(p.ops, argv[i+1:]...)
			return p
		case len(a) < 2 || a[0] != '-':
			if o.posix {
				p.rest = argv[i:]
				p.ops = argv[i:len(argv):len(argv)]
				return p
			}
			if p.ops == nil {
				p.ops = make([]string, 0, len(argv)-i)
			}
			p.ops = append(p.ops, a)
		case a[1] == '-':
			name, val, eq := strings.Cut(a, "=")
			switch {
			case eq:
				add(name, val, true)
			case o.long[name] && i+1 < len(argv):
				add(name, argv[i+1], true)
				i++
			default:
				add(name, "", false)
			}
		case o.noBundle:
			c := a[1]
			switch {
			case o.single[a] || (len(a) == 2 && c < 128 && o.val[c]):
				if i+1 < len(argv) {
					add(a, argv[i+1], true)
					i++
				} else {
					add(a, "", false)
				}
			case c < 128 && o.val[c]:
				add(shortName(c), a[2:], true) // -c8
			default:
				add(a, "", false)
			}
		default:
		bundle:
			for k := 1; k < len(a); k++ {
				c := a[k]
				if c < 128 && o.val[c] {
					switch {
					case k+1 < len(a):
						add(shortName(c), a[k+1:], true)
					case i+1 < len(argv):
						add(shortName(c), argv[i+1], true)
						i++
					default:
						add(shortName(c), "", false)
					}
					break bundle
				}
				if c < 128 && o.optional[c] {
					add(shortName(c), a[k+1:], k+1 < len(a))
					break bundle
				}
				add(shortName(c), "", false)
			}
		}
	}
	return p
}

// has reports whether any of the flags names was given.
func (p args) has(names ...string) bool {
	for _, f := range p.flags {
		for _, n := range names {
			if f.name == n {
				return true
			}
		}
	}
	return false
}

// value is the value of the first of the flags names given with one.
func (p args) value(names ...string) (string, bool) {
	for _, f := range p.flags {
		if !f.hasVal {
			continue
		}
		for _, n := range names {
			if f.name == n {
				return f.val, true
			}
		}
	}
	return "", false
}
