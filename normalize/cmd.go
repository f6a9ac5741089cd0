package normalize

import (
	"encoding/base64"
	"encoding/hex"
	"path"
	"strings"

	"github.com/rollcage/rollcage/toolcall"
)

func isPython(name string) bool {
	return name == "python" || name == "pypy" || name == "pypy3" ||
		strings.HasPrefix(name, "python2") || strings.HasPrefix(name, "python3")
}

// testCallHook, when set by a test, is called for every simple command,
// so the test can make the walk panic where it likes.
var testCallHook func(name string)

// call records one simple command and interprets what it reads, writes,
// contacts and runs, as the commands table describes it. It returns the
// command's stdout when that is known from the script (echo, printf, cat
// of a heredoc, base64 -d of a literal).
func (w *walker) call(argv []string, via string, in input) input {
	if len(argv) == 0 {
		return input{}
	}
	name := path.Base(argv[0])
	if argv[0] == "" {
		name = ""
	}
	w.a.n.Commands = append(w.a.n.Commands, toolcall.Command{Name: name, Argv: argv, Via: via})
	args := argv[1:]
	if testCallHook != nil {
		testCallHook(name)
	}
	if strings.Contains(argv[0], "/") {
		// ./run.sh, /tmp/cat: a script the policy wrote is followed
		// whatever its name.
		w.runFile(w.path(argv[0]), "")
	}
	sp := spec(name)
	switch {
	case sp == nil:
		return input{}
	case sp.fn != nil:
		return sp.fn(w, name, sp, args, in)
	}
	return w.plain(sp, args, in)
}

// plain applies a table entry: flag values, the lead operand, the rest.
func (w *walker) plain(sp *cmdSpec, argv []string, in input) input {
	p := sp.opt.parse(argv)
	if !sp.flagsAfter {
		w.flagValues(sp, &p)
	}
	ops := p.ops
	if sp.lead != roleUnset && len(ops) > 0 && !p.has(sp.leadFlags...) {
		w.role(sp.lead, ops[0])
		ops = ops[1:]
	}
	r, none := sp.ops, sp.none
	if len(sp.sw) > 0 && p.has(sp.sw...) {
		r, none = sp.swOps, sp.swNone
	}
	if len(ops) == 0 && none != roleUnset {
		w.role(none, ".")
	}
	for _, o := range ops {
		if sp.assign {
			if k, _, ok := strings.Cut(o, "="); ok && isName(k) {
				continue // var=value assignment
			}
		}
		w.role(r, o)
	}
	if sp.flagsAfter {
		w.flagValues(sp, &p)
	}
	if sp.stdin && len(p.ops) == 0 {
		return in
	}
	return input{}
}

// flagValues records the values of the flags the table gives a role.
func (w *walker) flagValues(sp *cmdSpec, p *args) {
	if sp.flagRoles == nil {
		return
	}
	for _, f := range p.flags {
		if f.hasVal {
			if r := sp.flagRoles[f.name]; r != roleUnset {
				w.role(r, f.val)
			}
		}
	}
}

// role records v as what r says it is.
func (w *walker) role(r role, v string) {
	switch r {
	case roleRead:
		if v != "-" {
			w.a.add(&w.a.n.Reads, w.path(v))
		}
	case roleWrite:
		w.a.add(&w.a.n.Writes, w.path(v))
	case roleTarget:
		if v != "-" {
			w.writeTarget(v)
		}
	case roleDelete:
		w.a.add(&w.a.n.Deletes, w.path(v))
	case roleList:
		w.a.add(&w.a.n.Lists, w.path(v))
	case roleURL:
		w.a.url(v)
	case roleNet:
		if !w.a.url(v) {
			w.a.host(v)
		}
	case roleHost:
		if !isFD(v) {
			w.a.host(v)
		}
	case roleCmd:
		w.nested(v, "bash -c")
	case roleSocat:
		w.socatAddr(v)
	case roleScript:
		w.a.add(&w.a.n.Scripts, v)
	}
}

// wrapper unwraps sudo, nohup, xargs, timeout, ... and records the
// command they run.
func (w *walker) wrapper(name string, sp *cmdSpec, argv []string, in input) input {
	p := sp.opt.parse(argv)
	if name == "command" && p.has("-v", "-V") {
		return input{} // a lookup, not a run
	}
	w.flagValues(sp, &p)
	rest := p.rest
	if len(rest) >= sp.skip {
		rest = rest[sp.skip:]
	} else {
		rest = nil
	}
	if name == "sudo" || name == "doas" {
		rest = w.assignments(rest)
	}
	if len(rest) == 0 {
		return input{}
	}
	return w.call(rest, name, in)
}

// assignments records the NAME=value words argv starts with (sudo's,
// env's) as environment and returns the words after them.
func (w *walker) assignments(argv []string) []string {
	for len(argv) > 0 {
		k, v, ok := strings.Cut(argv[0], "=")
		if !ok || !isName(k) {
			break
		}
		w.a.env(k, v)
		argv = argv[1:]
	}
	return argv
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// envCmd handles env [-i] [-u NAME] [-C DIR] [-S STRING] [A=B]... [cmd].
func (w *walker) envCmd(_ string, sp *cmdSpec, argv []string, in input) input {
	p := sp.opt.parse(argv)
	if s, ok := p.value("-S", "--split-string"); ok {
		w.nested(strings.Join(append([]string{s}, p.rest...), " "), "env")
		return input{}
	}
	rest := w.assignments(p.rest)
	if len(rest) > 0 {
		w.call(rest, "env", in)
	}
	return input{}
}

// busybox APPLET ... is the applet.
func (w *walker) busybox(_ string, _ *cmdSpec, argv []string, in input) input {
	if len(argv) > 0 && commands[argv[0]] != nil && commands[argv[0]].fn != nil && isShell(argv[0]) {
		w.shellCmd(argv[0], nil, argv[1:], in)
	}
	return input{}
}

func isShell(name string) bool {
	switch name {
	case "bash", "sh", "dash", "zsh", "ksh", "ash", "mksh", "rbash":
		return true
	}
	return false
}

// shellCmd handles bash -c SCRIPT, bash FILE and a shell reading a script
// from stdin (heredoc, here-string, pipe).
func (w *walker) shellCmd(_ string, _ *cmdSpec, args []string, in input) input {
	cflag := false
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-" {
			i++
			break
		}
		if len(a) < 2 || (a[0] != '-' && a[0] != '+') {
			break
		}
		if a == "-o" || a == "+o" || a == "--rcfile" || a == "--init-file" || a == "-O" || a == "+O" {
			i++
			continue
		}
		if a[1] != '-' && strings.IndexByte(a[1:], 'c') >= 0 {
			cflag = true
		}
	}
	switch {
	case cflag && i < len(args):
		w.nested(args[i], "bash -c")
	case !cflag && i < len(args):
		w.a.add(&w.a.n.Reads, w.path(args[i]))
		w.runFile(w.path(args[i]), "sh")
	case in.ok:
		via := in.via
		if via == "" {
			via = "stdin"
		}
		w.nested(in.text, via)
	}
	return input{}
}

// python handles python -c, python -m pip, python FILE and scripts on stdin.
func (w *walker) python(_ string, _ *cmdSpec, args []string, in input) input {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-c" && i+1 < len(args):
			w.script(args[i+1])
			return input{}
		case strings.HasPrefix(a, "-c") && len(a) > 2:
			w.script(a[2:])
			return input{}
		case a == "-m" && i+1 < len(args):
			if args[i+1] == "pip" {
				w.pip("pip", commands["pip"], args[i+2:], input{})
			}
			return input{}
		case a == "-W" || a == "-X" || a == "--check-hash-based-pycs":
			i++
		case a == "-":
			if in.ok {
				w.script(in.text)
			}
			return input{}
		case len(a) > 1 && a[0] == '-':
		default:
			w.a.add(&w.a.n.Reads, w.path(a))
			w.runFile(w.path(a), "py")
			return input{}
		}
	}
	if in.ok {
		w.script(in.text)
	}
	return input{}
}

// interp handles perl -e, ruby -e, node -e / -p, php -r and their files.
func (w *walker) interp(name string, _ *cmdSpec, args []string, in input) input {
	eflag := "-e"
	switch name {
	case "node", "nodejs", "deno", "bun":
		eflag = "--eval"
	case "php":
		eflag = "-r"
	}
	inplace := name == "perl" && bundleHas(args, 'i')
	var progs []string
	var files []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			files = append(files, args[i+1:]...)
			i = len(args)
		case a == eflag || a == "-e" || a == "-E" || a == "-p" || a == "--print" ||
			(name == "perl" && len(a) > 2 && a[0] == '-' && a[1] != '-' && (a[len(a)-1] == 'e' || a[len(a)-1] == 'E')):
			if (name == "node" || name == "nodejs") && (a == "-p" || a == "--print") || a != "-p" {
				if i+1 < len(args) {
					progs = append(progs, args[i+1])
					i++
				}
			}
		case name == "deno" && (a == "run" || a == "eval"):
			if a == "eval" && i+1 < len(args) {
				progs = append(progs, args[i+1])
				i++
			}
		case len(a) > 1 && a[0] == '-':
		default:
			files = append(files, a)
		}
	}
	if len(progs) == 0 {
		if len(files) > 0 {
			w.a.add(&w.a.n.Reads, w.path(files[0]))
		} else if in.ok {
			w.script(in.text)
		}
		return input{}
	}
	w.script(strings.Join(progs, "\n"))
	for _, f := range files {
		if inplace {
			w.a.add(&w.a.n.Writes, w.path(f))
		} else {
			w.a.add(&w.a.n.Reads, w.path(f))
		}
	}
	return input{}
}

// bundleHas reports whether a single-dash argument (a bundle such as
// -pi, or an unbundled word) contains c; interpreters whose flags take
// their values in odd ways (perl -i.bak -pe) are read this loosely.
func bundleHas(args []string, c byte) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.IndexByte(a[1:], c) >= 0 {
			return true
		}
	}
	return false
}

func (w *walker) eval(_ string, _ *cmdSpec, argv []string, _ input) input {
	if len(argv) > 0 {
		w.nested(strings.Join(argv, " "), "eval")
	}
	return input{}
}

func (w *walker) watch(_ string, sp *cmdSpec, argv []string, _ input) input {
	if p := sp.opt.parse(argv); len(p.ops) > 0 {
		w.nested(strings.Join(p.ops, " "), "bash -c")
	}
	return input{}
}

func (w *walker) source(_ string, _ *cmdSpec, argv []string, _ input) input {
	if len(argv) > 0 {
		w.a.add(&w.a.n.Reads, w.path(argv[0]))
		w.runFile(w.path(argv[0]), "sh")
	}
	return input{}
}

// cd moves the walker's directory (pushd +N / -N and cd - go where the
// text does not say).
func (w *walker) cd(name string, sp *cmdSpec, argv []string, _ input) input {
	ops := sp.opt.parse(argv).ops
	switch {
	case len(ops) == 0:
		w.cwd = "~"
	case ops[0] == "-" || (name == "pushd" && (strings.HasPrefix(ops[0], "+") || strings.HasPrefix(ops[0], "-"))):
	default:
		w.cwd = w.path(ops[0])
	}
	return input{}
}

// base64 reads its files; base64 -d of known input is known output.
func (w *walker) base64(_ string, sp *cmdSpec, argv []string, in input) input {
	w.plain(sp, argv, in)
	if in.ok && sp.opt.parse(argv).has("-d", "--decode", "-D") {
		if s, ok := decodeBase64(in.text); ok {
			return input{text: s, ok: true}
		}
	}
	return input{}
}

// xxd reads its files; xxd -r -p of known hex is known output.
func (w *walker) xxd(_ string, sp *cmdSpec, argv []string, in input) input {
	w.plain(sp, argv, in)
	if in.ok && bundleHas(argv, 'r') && bundleHas(argv, 'p') {
		if b, err := hex.DecodeString(strings.Join(strings.Fields(in.text), "")); err == nil {
			return input{text: string(b), ok: true}
		}
	}
	return input{}
}

// tee writes its files and passes its input on.
func (w *walker) tee(_ string, sp *cmdSpec, argv []string, in input) input {
	w.plain(sp, argv, in)
	if in.ok {
		w.a.content(in.text)
	}
	return in
}

func (w *walker) dd(_ string, _ *cmdSpec, argv []string, _ input) input {
	for _, a := range argv {
		if v, ok := strings.CutPrefix(a, "if="); ok {
			w.a.add(&w.a.n.Reads, w.path(v))
		} else if v, ok := strings.CutPrefix(a, "of="); ok {
			w.writeTarget(v)
		}
	}
	return input{}
}

// curlFlags are curl's flags that take a value.
const curlFlags = "-o --output -x --proxy -H --header -d --data --data-binary --data-raw --data-urlencode --data-ascii " +
	"-X --request -u --user -A --user-agent -e --referer -b --cookie -c --cookie-jar -T --upload-file " +
	"-F --form --form-string -w --write-out -m --max-time --connect-timeout -K --config --cacert --cert --key " +
	"-r --range -C --continue-at --retry --retry-delay --retry-max-time --resolve --url -U --proxy-user " +
	"-E --capath --limit-rate -y -Y -z --time-cond --max-filesize --dns-servers --interface --local-port " +
	"--connect-to --output-dir --unix-socket --abstract-unix-socket --json -Q --quote --mail-from --mail-rcpt -t --telnet-option " +
	"--proto --proto-redir --noproxy --ciphers --cert-type --key-type --pass --hostpubmd5 --pubkey --oauth2-bearer"

// curl: operands and --url are URLs; -o writes, -T, -K, -d @FILE and
// -F name=@FILE read; -O writes the URL's last segment in the directory.
func (w *walker) curl(_ string, sp *cmdSpec, argv []string, _ input) input {
	p := sp.opt.parse(argv)
	for _, op := range p.ops {
		w.a.url(op)
	}
	for _, f := range p.flags {
		v := f.val
		if !f.hasVal {
			if f.name == "-O" || f.name == "--remote-name" {
				w.remoteNames(p.ops)
			}
			continue
		}
		switch f.name {
		case "--url":
			w.a.url(v)
		case "-o", "--output":
			if v != "-" {
				w.writeTarget(v)
			}
		case "-T", "--upload-file", "-K", "--config":
			w.a.add(&w.a.n.Reads, w.path(v))
		case "-d", "--data", "--data-binary", "--data-urlencode", "--data-ascii", "--json":
			if f, ok := strings.CutPrefix(v, "@"); ok && f != "-" {
				w.a.add(&w.a.n.Reads, w.path(f))
			}
		case "-F", "--form":
			if _, f, ok := strings.Cut(v, "=@"); ok {
				f, _, _ = strings.Cut(f, ";")
				w.a.add(&w.a.n.Reads, w.path(f))
			} else if _, f, ok := strings.Cut(v, "=<"); ok {
				w.a.add(&w.a.n.Reads, w.path(f))
			}
		}
	}
	return input{}
}

// remoteNames records the files curl -O writes: each URL's last path
// segment, in the current directory.
func (w *walker) remoteNames(urls []string) {
	for _, u := range urls {
		if !isURL(u) {
			continue
		}
		rest := u[strings.Index(u, "://")+3:]
		if i := strings.IndexAny(rest, "?#"); i >= 0 {
			rest = rest[:i]
		}
		slash := strings.IndexByte(rest, '/')
		if slash < 0 {
			continue
		}
		if base := path.Base(rest[slash:]); base != "/" && base != "." && base != "" {
			w.writeTarget(base)
		}
	}
}

// socatAddr reads socat addresses: TCP:host:port, OPENSSL:host:port,
// EXEC:cmd, SYSTEM:cmd, OPEN:file.
func (w *walker) socatAddr(op string) {
	typ, rest, ok := strings.Cut(op, ":")
	if !ok {
		return
	}
	typ = strings.ToUpper(typ)
	switch {
	case strings.Contains(typ, "LISTEN"):
	case strings.HasPrefix(typ, "TCP") || strings.HasPrefix(typ, "UDP") || strings.HasPrefix(typ, "SSL") ||
		strings.HasPrefix(typ, "OPENSSL") || strings.HasPrefix(typ, "SCTP") || strings.HasPrefix(typ, "PROXY"):
		h, _, _ := strings.Cut(rest, ":")
		h, _, _ = strings.Cut(h, ",")
		w.a.host(h)
	case typ == "EXEC" || typ == "SYSTEM":
		c, _, _ := strings.Cut(rest, ",")
		w.nested(c, "bash -c")
	case typ == "OPEN" || typ == "GOPEN" || typ == "CREATE" || typ == "FILE":
		f, _, _ := strings.Cut(rest, ",")
		w.a.add(&w.a.n.Reads, w.path(f))
	}
}

// copyRemote handles scp and rsync: host:path operands are network
// targets, local sources are read, a local destination is written.
func (w *walker) copyRemote(_ string, sp *cmdSpec, argv []string, _ input) input {
	ops := sp.opt.parse(argv).ops
	for i, op := range ops {
		if h, ok := remoteHost(op); ok {
			if isURL(op) {
				w.a.url(op)
			} else {
				w.a.host(h)
			}
			continue
		}
		if i == len(ops)-1 && len(ops) > 1 {
			w.a.add(&w.a.n.Writes, w.path(op))
		} else {
			w.a.add(&w.a.n.Reads, w.path(op))
		}
	}
	return input{}
}

// remoteHost recognises host:path, user@host:path and rsync:// operands.
func remoteHost(op string) (string, bool) {
	if isURL(op) {
		h := hostOf(op)
		return h, h != ""
	}
	if h, ok := scpHost(op); ok {
		return h, true
	}
	c := strings.IndexByte(op, ':')
	if c <= 0 || strings.ContainsAny(op[:c], "/ ") {
		return "", false
	}
	return cleanHost(op[:c]), true
}

// pipFlags are pip's flags that take a value.
const pipFlags = "-i --index-url --extra-index-url -f --find-links -r --requirement -c --constraint -e --editable " +
	"-t --target --proxy --prefix --root --trusted-host --cache-dir --python-version --platform --src -d --dest --log --timeout --retries " +
	"--implementation --abi --upgrade-strategy --progress-bar --global-option --config-settings --only-binary --no-binary --python"

// pip handles pip install/download: index URLs, VCS and URL requirements,
// requirement files, plain package specs.
func (w *walker) pip(name string, sp *cmdSpec, args []string, _ input) input {
	if name == "uv" && len(args) > 0 && args[0] == "pip" {
		args = args[1:]
	}
	p := sp.opt.parse(args)
	if len(p.ops) == 0 {
		return input{}
	}
	sub := p.ops[0]
	if sub != "install" && sub != "download" && sub != "wheel" && sub != "add" {
		return input{}
	}
	for _, f := range p.flags {
		if !f.hasVal {
			continue
		}
		switch f.name {
		case "-i", "--index-url", "--extra-index-url", "-f", "--find-links":
			if !w.a.url(f.val) {
				w.a.add(&w.a.n.Reads, w.path(f.val))
			}
		case "-r", "--requirement", "-c", "--constraint":
			w.a.add(&w.a.n.Reads, w.path(f.val))
		case "-e", "--editable":
			w.pipReq(f.val)
		}
	}
	for _, op := range p.ops[1:] {
		w.pipReq(op)
	}
	return input{}
}

func (w *walker) pipReq(op string) {
	switch {
	case strings.HasPrefix(op, "git+") || strings.HasPrefix(op, "hg+") || strings.HasPrefix(op, "svn+") || strings.HasPrefix(op, "bzr+"):
		_, u, _ := strings.Cut(op, "+")
		if !w.a.url(u) {
			w.a.url(op)
		}
	case isURL(op):
		w.a.url(op)
	case strings.Contains(op, " @ "):
		_, u, _ := strings.Cut(op, " @ ")
		w.a.url(strings.TrimSpace(u))
		w.a.add(&w.a.n.Packages, op)
	case op == "." || strings.ContainsRune(op, '/') || strings.HasSuffix(op, ".whl") || strings.HasSuffix(op, ".tar.gz") || strings.HasSuffix(op, ".zip"):
		w.a.add(&w.a.n.Reads, w.path(op))
	default:
		w.a.add(&w.a.n.Packages, op)
	}
}

// pkgInstall handles npm/yarn/pnpm/npx, go get/install, gem, cargo, apt.
func (w *walker) pkgInstall(name string, sp *cmdSpec, args []string, _ input) input {
	p := sp.opt.parse(args)
	ops := p.ops
	if reg, ok := p.value("--registry", "--index", "--source", "--git"); ok {
		w.a.url(reg)
	}
	if name == "npx" {
		if len(ops) > 0 {
			w.pkgSpec(ops[0])
		}
		return input{}
	}
	if len(ops) == 0 {
		return input{}
	}
	sub, pkgs := ops[0], ops[1:]
	switch name {
	case "npm", "pnpm":
		if sub != "install" && sub != "i" && sub != "add" && sub != "exec" && sub != "x" {
			return input{}
		}
	case "yarn":
		if sub != "add" && sub != "global" && sub != "dlx" {
			return input{}
		}
		if sub == "global" && len(pkgs) > 0 {
			pkgs = pkgs[1:]
		}
	case "go":
		if sub != "get" && sub != "install" && sub != "run" {
			return input{}
		}
		for _, p := range pkgs {
			if sub == "run" && !strings.Contains(p, "@") {
				continue // a local package, not a download
			}
			if strings.HasPrefix(p, ".") || strings.HasPrefix(p, "/") {
				continue
			}
			w.a.add(&w.a.n.Packages, p)
			first, _, _ := strings.Cut(p, "/")
			if strings.Contains(first, ".") {
				w.a.host(first)
			}
		}
		return input{}
	case "cargo":
		if sub != "install" && sub != "add" {
			return input{}
		}
	case "conda", "mamba":
		if sub != "install" && sub != "create" {
			return input{}
		}
	default: // gem, apt, apt-get
		if sub != "install" {
			return input{}
		}
	}
	for _, p := range pkgs {
		w.pkgSpec(p)
	}
	return input{}
}

func (w *walker) pkgSpec(p string) {
	switch {
	case strings.HasPrefix(p, "git+"):
		w.a.url(p[4:])
	case isURL(p):
		w.a.url(p)
	case strings.HasPrefix(p, "github:"):
		w.a.host("github.com")
		w.a.add(&w.a.n.Packages, p)
	case strings.HasPrefix(p, ".") || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "file:"):
		w.a.add(&w.a.n.Reads, w.path(strings.TrimPrefix(p, "file:")))
	default:
		w.a.add(&w.a.n.Packages, p)
	}
}

// copyMove handles cp/install/mv/ln: sources read (mv: deleted), the
// destination written. ln's target is recorded as read: a link is how a
// protected file is later read under an innocent name.
func (w *walker) copyMove(name string, sp *cmdSpec, args []string, _ input) input {
	p := sp.opt.parse(args)
	ops := p.ops
	dest, hasT := p.value("-t", "--target-directory")
	if !hasT && len(ops) > 0 {
		if len(ops) == 1 && name == "ln" {
			dest = path.Base(ops[0])
		} else if len(ops) > 1 || name != "install" {
			dest, ops = ops[len(ops)-1], ops[:len(ops)-1]
		}
	}
	if name == "install" && p.has("-d", "--directory") {
		for _, d := range append(ops, dest) {
			w.a.add(&w.a.n.Writes, w.path(d))
		}
		return input{}
	}
	for _, s := range ops {
		if name == "mv" {
			w.a.add(&w.a.n.Deletes, w.path(s))
		} else {
			w.a.add(&w.a.n.Reads, w.path(s))
		}
	}
	if dest != "" {
		w.a.add(&w.a.n.Writes, w.path(dest))
	}
	return input{}
}

func (w *walker) find(args []string) {
	i := 0
	for i < len(args) && !(strings.HasPrefix(args[i], "-") || args[i] == "(" || args[i] == "!" || args[i] == ")") {
		i++
	}
	roots := args[:i]
	if len(roots) == 0 {
		roots = []string{"."}
	}
	for _, r := range roots {
		w.a.add(&w.a.n.Lists, w.path(r))
	}
	for ; i < len(args); i++ {
		switch args[i] {
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && args[j] != ";" && args[j] != "+" {
				j++
			}
			if j > i+1 {
				// {} is each file found: under the first root is the
				// best the text tells.
				sub := append([]string(nil), args[i+1:j]...)
				for k, a := range sub {
					sub[k] = strings.ReplaceAll(a, "{}", roots[0])
				}
				w.call(sub, "find -exec", input{})
			}
			i = j
		case "-delete":
			for _, r := range roots {
				w.a.add(&w.a.n.Deletes, w.path(r))
			}
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			if i+1 < len(args) {
				w.writeTarget(args[i+1])
				i++
			}
		}
	}
}

// tar handles -c (sources read, archive written) and -x (archive read,
// -C directory written), with old-style bundled flags (tar czf x.tgz dir).
func (w *walker) tar(args []string) {
	var create, extract bool
	var archive, dir string
	var ops []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		bundle, dash := "", false
		switch {
		case i == 0 && a != "" && a[0] != '-':
			bundle = a
		case strings.HasPrefix(a, "--"):
			switch {
			case a == "--create" || a == "--append" || a == "--update":
				create = true
			case a == "--extract" || a == "--get":
				extract = true
			case a == "--file" || a == "--directory":
				if i+1 < len(args) {
					if a == "--file" {
						archive = args[i+1]
					} else {
						dir = args[i+1]
					}
					i++
				}
			case strings.HasPrefix(a, "--file="):
				archive = a[7:]
			case strings.HasPrefix(a, "--directory="):
				dir = a[12:]
			case a == "--exclude" || a == "--transform" || a == "--owner" || a == "--group":
				i++
			}
			continue
		case len(a) > 1 && a[0] == '-':
			bundle, dash = a[1:], true
		default:
			ops = append(ops, a)
			continue
		}
		for k := 0; k < len(bundle); k++ {
			c := bundle[k]
			switch c {
			case 'c', 'r', 'u':
				create = true
			case 'x':
				extract = true
			case 'f', 'C':
				// -fX.tar carries its value; otherwise (and always in
				// old-style bundles) the next argument is the value.
				v := ""
				if dash && k+1 < len(bundle) {
					v = bundle[k+1:]
					k = len(bundle)
				} else if i+1 < len(args) {
					v = args[i+1]
					i++
				}
				if c == 'f' {
					archive = v
				} else {
					dir = v
				}
			}
		}
	}
	switch {
	case create:
		if archive != "" && archive != "-" {
			w.writeTarget(archive)
		}
		saved := w.cwd
		if dir != "" {
			w.cwd = w.path(dir)
		}
		for _, s := range ops {
			w.a.add(&w.a.n.Reads, w.path(s))
		}
		w.cwd = saved
	case extract:
		if archive != "" && archive != "-" {
			w.a.add(&w.a.n.Reads, w.path(archive))
		}
		if dir == "" {
			dir = "."
		}
		w.a.add(&w.a.n.Writes, w.path(dir))
	default:
		if archive != "" && archive != "-" {
			w.a.add(&w.a.n.Reads, w.path(archive))
		}
	}
}

// echo returns what echo prints.
func echo(args []string) input {
	nl, esc := true, false
	for len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' && strings.Trim(args[0][1:], "neE") == "" {
		nl = nl && !strings.Contains(args[0], "n")
		esc = esc || strings.Contains(args[0], "e")
		args = args[1:]
	}
	s := strings.Join(args, " ")
	if esc {
		var sb strings.Builder
		ansiC(&sb, s)
		s = sb.String()
	}
	if nl {
		s += "\n"
	}
	return input{text: s, ok: true}
}

// printf returns what printf prints, substituting %s and %b naively.
func printf(args []string) input {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 || args[0] == "-v" {
		return input{}
	}
	var sb strings.Builder
	ansiC(&sb, args[0])
	f := sb.String()
	for _, a := range args[1:] {
		i := strings.Index(f, "%")
		for i >= 0 && i+1 < len(f) && f[i+1] == '%' {
			j := strings.Index(f[i+2:], "%")
			if j < 0 {
				i = -1
				break
			}
			i += 2 + j
		}
		if i < 0 || i+1 >= len(f) {
			break
		}
		if f[i+1] == 'b' {
			var eb strings.Builder
			ansiC(&eb, a)
			a = eb.String()
		}
		f = f[:i] + a + f[i+2:]
	}
	return input{text: strings.ReplaceAll(f, "%%", "%"), ok: true}
}

func decodeBase64(s string) (string, bool) {
	clean := strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(clean); err == nil {
			return string(b), true
		}
	}
	return "", false
}
