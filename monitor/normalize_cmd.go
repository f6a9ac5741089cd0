package monitor

import (
	"encoding/base64"
	"encoding/hex"
	"path"
	"strings"
)

// hasVal reports whether flag f is in vals, a space-separated list of the
// flags of a command that take their value as the next argument.
func hasVal(vals, f string) bool {
	for vals != "" {
		var v string
		v, vals, _ = strings.Cut(vals, " ")
		if v == f {
			return true
		}
	}
	return false
}

// operands returns the non-flag arguments of args, skipping the values of
// the flags listed in vals; everything after "--" is an operand.
func operands(args []string, vals string) []string {
	var ops []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(ops, args[i+1:]...)
		case len(a) > 1 && a[0] == '-':
			if hasVal(vals, a) {
				i++
			}
		default:
			ops = append(ops, a)
		}
	}
	return ops
}

// flagValue returns the value of the first of names in args (as "-o X",
// "--out=X" or "-oX" for one-letter flags).
func flagValue(args []string, names ...string) (string, bool) {
	for i, a := range args {
		if a == "--" {
			break
		}
		for _, n := range names {
			switch {
			case a == n && i+1 < len(args):
				return args[i+1], true
			case strings.HasPrefix(n, "--") && strings.HasPrefix(a, n+"="):
				return a[len(n)+1:], true
			case len(n) == 2 && len(a) > 2 && strings.HasPrefix(a, n) && a[1] != '-':
				return a[2:], true
			}
		}
	}
	return "", false
}

// shortFlag reports whether a bundle of one-letter flags (-rn) contains c.
func shortFlag(args []string, c byte, longs ...string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.IndexByte(a[1:], c) >= 0 {
			return true
		}
		for _, l := range longs {
			if a == l || strings.HasPrefix(a, l+"=") {
				return true
			}
		}
	}
	return false
}

// Commands whose operands are all files they read, with the flags of each
// that take a value.
var readCmds = map[string]string{
	"cat": "", "tac": "", "less": "", "more": "", "head": "-n -c", "tail": "-n -c -s --pid",
	"nl": "-b -d -f -h -i -l -n -s -v -w", "od": "-A -j -N -S -t -w", "xxd": "-l -s -c -g -o -n",
	"hexdump": "-n -s -e -f", "hd": "-n -s", "strings": "-n -t -e", "md5sum": "", "sha1sum": "", "sha224sum": "",
	"sha256sum": "", "sha384sum": "", "sha512sum": "", "b2sum": "", "cksum": "", "sum": "",
	"wc": "", "file": "-m -F", "vim": "-c -S -u", "vi": "-c -S -u", "nvim": "-c -S -u", "view": "-c",
	"nano": "", "emacs": "", "diff": "-U -C -x -X -I -L -F", "cmp": "-i -n", "sort": "-k -t -o -S -T",
	"uniq": "-f -s -w", "cut": "-d -f -b -c", "base32": "-w", "zcat": "", "bzcat": "", "xzcat": "",
	"zless": "", "column": "-s -t -c", "fold": "-w", "fmt": "-w", "paste": "-d", "join": "-t -1 -2 -o",
	"comm": "", "iconv": "-f -t", "bat": "-l", "batcat": "-l", "pygmentize": "-l -f -O",
}

// Wrappers run their operand as a command; the value lists their flags
// that take an argument.
var wrappers = map[string]string{
	"sudo": "-u -g -h -p -C -D -r -t -U -T", "doas": "-u -C", "nohup": "", "command": "",
	"builtin": "", "exec": "-a", "nice": "-n", "ionice": "-c -n -p -t", "chrt": "",
	"stdbuf": "-i -o -e", "time": "-f -o", "setsid": "", "unbuffer": "", "chroot": "",
	"strace": "-o -e -p -s -u -E -a -b -I -O -P -S -X", "ltrace": "-o -e -p -s -u -n -a",
	"flock": "-w -E", "runuser": "-u -g -G", "caffeinate": "", "catchsegv": "", "faketime": "",
	"xargs": "-I -n -P -L -d -s -E -a --arg-file --delimiter --max-args --max-procs --max-lines",
}

var shells = map[string]bool{"bash": true, "sh": true, "dash": true, "zsh": true, "ksh": true, "ash": true, "mksh": true, "rbash": true}

func isPython(name string) bool {
	return name == "python" || name == "pypy" || name == "pypy3" ||
		strings.HasPrefix(name, "python2") || strings.HasPrefix(name, "python3")
}

// call records one simple command and interprets what it reads, writes,
// contacts and runs. It returns the command's stdout when that is known
// from the script (echo, printf, cat of a heredoc, base64 -d of a literal).
// testCallHook, when set by a test, is called for every simple command,
// so the test can make the walk panic where it likes.
var testCallHook func(name string)

func (w *walker) call(argv []string, via string, in input) input {
	if len(argv) == 0 {
		return input{}
	}
	name := path.Base(argv[0])
	if argv[0] == "" {
		name = ""
	}
	w.a.n.Commands = append(w.a.n.Commands, Command{Name: name, Argv: argv, Via: via})
	args := argv[1:]
	if testCallHook != nil {
		testCallHook(name)
	}

	if vals, ok := wrappers[name]; ok {
		return w.wrapper(name, args, vals, in)
	}
	if vals, ok := readCmds[name]; ok {
		for _, f := range operands(args, vals) {
			if f != "-" {
				w.a.add(&w.a.n.Reads, w.path(f))
			}
		}
		if name == "cat" && len(operands(args, "")) == 0 {
			return in
		}
		if name == "xxd" && in.ok && shortFlag(args, 'r') && shortFlag(args, 'p') {
			if b, err := hex.DecodeString(strings.Join(strings.Fields(in.text), "")); err == nil {
				return input{text: string(b), ok: true}
			}
		}
		if name == "sort" {
			if o, ok := flagValue(args, "-o", "--output"); ok {
				w.a.add(&w.a.n.Writes, w.path(o))
			}
		}
		return input{}
	}
	if shells[name] || (name == "busybox" && len(args) > 0 && shells[args[0]]) {
		if name == "busybox" {
			args = args[1:]
		}
		w.shellCmd(name, args, in)
		return input{}
	}
	if isPython(name) {
		w.python(args, in)
		return input{}
	}
	if strings.Contains(argv[0], "/") {
		w.runFile(w.path(argv[0]), "")
	}
	switch name {
	case "env":
		w.envCmd(args, in)
	case "timeout":
		// Flags stop at the duration; the command's own flags follow it.
		i := 0
		for i < len(args) && len(args[i]) > 1 && args[i][0] == '-' {
			if hasVal("-s -k --signal --kill-after", args[i]) {
				i++
			}
			i++
		}
		if i+1 < len(args) {
			return w.call(args[i+1:], "timeout", in)
		}
	case "eval":
		if len(args) > 0 {
			w.nested(strings.Join(args, " "), "eval")
		}
	case "su":
		if c, ok := flagValue(args, "-c", "--command"); ok {
			w.nested(c, "bash -c")
		}
	case "watch":
		if ops := operands(args, "-n -d --interval"); len(ops) > 0 {
			w.nested(strings.Join(ops, " "), "bash -c")
		}
	case "source", ".":
		if len(args) > 0 {
			w.a.add(&w.a.n.Reads, w.path(args[0]))
			w.runFile(w.path(args[0]), "sh")
		}
	case "cd", "pushd":
		ops := operands(args, "")
		switch {
		case len(ops) == 0:
			w.cwd = "~"
		case ops[0] == "-" || (name == "pushd" && (strings.HasPrefix(ops[0], "+") || strings.HasPrefix(ops[0], "-"))):
		default:
			w.cwd = w.path(ops[0])
		}
	case "echo":
		return echo(args)
	case "printf":
		return printf(args)
	case "base64":
		for _, f := range operands(args, "-w --wrap") {
			if f != "-" {
				w.a.add(&w.a.n.Reads, w.path(f))
			}
		}
		if in.ok && (shortFlag(args, 'd', "--decode") || shortFlag(args, 'D')) {
			if s, ok := decodeBase64(in.text); ok {
				return input{text: s, ok: true}
			}
		}
	case "grep", "egrep", "fgrep", "zgrep", "rg", "ag", "ack":
		w.grep(name, args)
	case "awk", "gawk", "mawk", "nawk":
		w.awk(args)
	case "sed", "gsed":
		w.sed(args)
	case "perl", "ruby", "node", "nodejs", "php", "deno", "bun", "lua", "Rscript":
		w.interp(name, args, in)
	case "git":
		w.git(args)
	case "curl":
		w.curl(args)
	case "wget":
		w.wget(args)
	case "http", "https", "httpie", "xh", "aria2c", "lynx", "links", "w3m", "ftp", "sftp", "tftp":
		for _, op := range operands(args, "-o -d -i -a --auth --output") {
			if !w.a.url(op) && (name == "ftp" || name == "sftp" || name == "tftp") {
				w.a.host(op)
			}
		}
	case "nc", "ncat", "netcat", "telnet":
		ops := operands(args, "-p -s -w -i -q -x -X -e -c -I -O -T -V -P --exec --sh-exec --proxy")
		if len(ops) > 0 && !isFD(ops[0]) {
			w.a.host(ops[0])
		}
		if c, ok := flagValue(args, "-e", "-c", "--exec", "--sh-exec"); ok {
			w.nested(c, "bash -c")
		}
	case "socat":
		for _, op := range operands(args, "") {
			w.socatAddr(op)
		}
	case "ssh":
		ops := operands(args, "-b -c -D -E -e -F -I -i -J -L -l -m -O -o -p -Q -R -S -W -w -B")
		if len(ops) > 0 {
			w.a.host(ops[0])
		}
		if j, ok := flagValue(args, "-J"); ok {
			w.a.host(j)
		}
	case "scp", "rsync":
		w.copyRemote(args)
	case "pip", "pip3", "pip2", "uv", "pipx":
		if name == "uv" && len(args) > 0 && args[0] == "pip" {
			args = args[1:]
		}
		w.pip(args)
	case "npm", "pnpm", "yarn", "npx", "gem", "cargo", "apt", "apt-get", "go", "conda", "mamba":
		w.pkgInstall(name, args)
	case "cp", "install", "mv", "ln":
		w.copyMove(name, args)
	case "touch", "mkdir", "truncate":
		for _, f := range operands(args, "-r -d -t -m -s --reference --size --date --mode") {
			w.a.add(&w.a.n.Writes, w.path(f))
		}
	case "chmod", "chown", "chgrp", "chattr", "setfacl":
		ops := operands(args, "")
		if len(ops) > 0 && !hasPrefixFlag(args, "--reference") {
			ops = ops[1:]
		}
		for _, f := range ops {
			w.a.add(&w.a.n.Writes, w.path(f))
		}
	case "tee":
		for _, f := range operands(args, "") {
			w.writeTarget(f)
		}
		if in.ok {
			w.a.content(in.text)
		}
		return in
	case "dd":
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "if="); ok {
				w.a.add(&w.a.n.Reads, w.path(v))
			} else if v, ok := strings.CutPrefix(a, "of="); ok {
				w.writeTarget(v)
			}
		}
	case "rm", "unlink", "shred", "rmdir", "srm":
		for _, f := range operands(args, "-n -s --iterations --size") {
			w.a.add(&w.a.n.Deletes, w.path(f))
		}
	case "ls", "dir", "tree", "du", "exa", "eza", "lsd", "vdir":
		ops := operands(args, "-I -w -T -L -P -o -d -B -t -X --max-depth --ignore --block-size")
		if len(ops) == 0 {
			w.a.add(&w.a.n.Lists, w.path("."))
		}
		for _, d := range ops {
			w.a.add(&w.a.n.Lists, w.path(d))
		}
	case "find":
		w.find(args)
	case "patch":
		w.patch(args)
	case "tar", "bsdtar":
		w.tar(args)
	case "unzip":
		ops := operands(args, "-d -x -P")
		if len(ops) > 0 {
			w.a.add(&w.a.n.Reads, w.path(ops[0]))
		}
		if d, ok := flagValue(args, "-d"); ok {
			w.a.add(&w.a.n.Writes, w.path(d))
		}
	case "zip":
		ops := operands(args, "-x -i -P -b -n -t -tt")
		for i, f := range ops {
			if i == 0 {
				w.a.add(&w.a.n.Writes, w.path(f))
			} else {
				w.a.add(&w.a.n.Reads, w.path(f))
			}
		}
	}
	return input{}
}

func hasPrefixFlag(args []string, p string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, p) {
			return true
		}
	}
	return false
}

// wrapper unwraps sudo, nohup, xargs, ... and records the command they run.
func (w *walker) wrapper(name string, args []string, vals string, in input) input {
	i := 0
	for i < len(args) {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if len(a) < 2 || a[0] != '-' {
			break
		}
		if name == "command" && (a == "-v" || a == "-V") {
			return input{} // a lookup, not a run
		}
		if name == "nice" && len(a) > 1 && a[1] >= '0' && a[1] <= '9' {
			i++
			continue
		}
		if hasVal(vals, a) {
			if name == "xargs" && (a == "-a" || a == "--arg-file") && i+1 < len(args) {
				w.a.add(&w.a.n.Reads, w.path(args[i+1]))
			}
			i++
		}
		i++
	}
	rest := args[i:]
	switch name {
	case "sudo", "doas":
		for len(rest) > 0 {
			k, v, ok := strings.Cut(rest[0], "=")
			if !ok || !isName(k) {
				break
			}
			w.a.env(k, v)
			rest = rest[1:]
		}
	case "chrt", "taskset":
		if len(rest) > 0 {
			rest = rest[1:] // priority / mask
		}
	case "chroot":
		if len(rest) > 0 {
			rest = rest[1:] // new root
		}
	case "flock":
		if len(rest) > 0 {
			rest = rest[1:] // lock file
		}
	}
	if len(rest) == 0 {
		return input{}
	}
	return w.call(rest, name, in)
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
func (w *walker) envCmd(args []string, in input) {
	i := 0
	for i < len(args) {
		a := args[i]
		switch {
		case a == "--":
			i++
		case a == "-u" || a == "--unset" || a == "-C" || a == "--chdir":
			i += 2
			continue
		case a == "-S" || a == "--split-string":
			if i+1 < len(args) {
				w.nested(strings.Join(args[i+1:], " "), "env")
			}
			return
		case len(a) > 1 && a[0] == '-':
			i++
			continue
		}
		break
	}
	for i < len(args) {
		k, v, ok := strings.Cut(args[i], "=")
		if !ok || !isName(k) {
			break
		}
		w.a.env(k, v)
		i++
	}
	if i < len(args) {
		w.call(args[i:], "env", in)
	}
}

// shellCmd handles bash -c SCRIPT, bash FILE and a shell reading a script
// from stdin (heredoc, here-string, pipe).
func (w *walker) shellCmd(name string, args []string, in input) {
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
}

// python handles python -c, python -m pip, python FILE and scripts on stdin.
func (w *walker) python(args []string, in input) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-c" && i+1 < len(args):
			w.script(args[i+1])
			return
		case strings.HasPrefix(a, "-c") && len(a) > 2:
			w.script(a[2:])
			return
		case a == "-m" && i+1 < len(args):
			if args[i+1] == "pip" {
				w.pip(args[i+2:])
			}
			return
		case a == "-W" || a == "-X" || a == "--check-hash-based-pycs":
			i++
		case a == "-":
			if in.ok {
				w.script(in.text)
			}
			return
		case len(a) > 1 && a[0] == '-':
		default:
			w.a.add(&w.a.n.Reads, w.path(a))
			w.runFile(w.path(a), "py")
			return
		}
	}
	if in.ok {
		w.script(in.text)
	}
}

// interp handles perl -e, ruby -e, node -e / -p, php -r and their files.
func (w *walker) interp(name string, args []string, in input) {
	eflag := "-e"
	switch name {
	case "node", "nodejs", "deno", "bun":
		eflag = "--eval"
	case "php":
		eflag = "-r"
	}
	inplace := name == "perl" && shortFlag(args, 'i')
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
		return
	}
	w.script(strings.Join(progs, "\n"))
	for _, f := range files {
		if inplace {
			w.a.add(&w.a.n.Writes, w.path(f))
		} else {
			w.a.add(&w.a.n.Reads, w.path(f))
		}
	}
}

func (w *walker) grep(name string, args []string) {
	vals := "-e -f -m -A -B -C -d -D --regexp --file --max-count --label --include --exclude --exclude-dir"
	recursive := name == "rg" || name == "ag" || name == "ack"
	if recursive {
		vals = "-e -f -m -A -B -C -g -t -T -j -M -E -r -d --type --glob --iglob --replace --max-depth --max-count --type-not --ignore --file-search-regex -G"
	} else if shortFlag(args, 'r', "--recursive", "--dereference-recursive") || shortFlag(args, 'R') {
		recursive = true
	}
	ops := operands(args, vals)
	_, pat := flagValue(args, "-e", "--regexp")
	if f, ok := flagValue(args, "-f", "--file"); ok && name != "ag" {
		w.a.add(&w.a.n.Reads, w.path(f))
		pat = true
	}
	if !pat && len(ops) > 0 {
		ops = ops[1:]
	}
	if recursive && len(ops) == 0 {
		w.a.add(&w.a.n.Lists, w.path("."))
	}
	for _, f := range ops {
		if f == "-" {
			continue
		}
		if recursive {
			w.a.add(&w.a.n.Lists, w.path(f))
		} else {
			w.a.add(&w.a.n.Reads, w.path(f))
		}
	}
}

func (w *walker) awk(args []string) {
	ops := operands(args, "-F -v -f --field-separator --assign --file -i --include")
	if f, ok := flagValue(args, "-f", "--file"); ok {
		w.a.add(&w.a.n.Reads, w.path(f))
	} else if len(ops) > 0 {
		w.a.add(&w.a.n.Scripts, ops[0])
		ops = ops[1:]
	}
	for _, f := range ops {
		if k, _, ok := strings.Cut(f, "="); ok && isName(k) {
			continue // var=value assignment
		}
		if f != "-" {
			w.a.add(&w.a.n.Reads, w.path(f))
		}
	}
}

func (w *walker) sed(args []string) {
	ops := operands(args, "-e -f -l --expression --file --line-length")
	_, script := flagValue(args, "-e", "--expression")
	if f, ok := flagValue(args, "-f", "--file"); ok {
		w.a.add(&w.a.n.Reads, w.path(f))
		script = true
	}
	if !script && len(ops) > 0 {
		ops = ops[1:]
	}
	inplace := shortFlag(args, 'i', "--in-place")
	for _, f := range ops {
		if f == "-" {
			continue
		}
		if inplace {
			w.a.add(&w.a.n.Writes, w.path(f))
		} else {
			w.a.add(&w.a.n.Reads, w.path(f))
		}
	}
}

func (w *walker) curl(args []string) {
	vals := "-o --output -x --proxy -H --header -d --data --data-binary --data-raw --data-urlencode --data-ascii " +
		"-X --request -u --user -A --user-agent -e --referer -b --cookie -c --cookie-jar -T --upload-file " +
		"-F --form --form-string -w --write-out -m --max-time --connect-timeout -K --config --cacert --cert --key " +
		"-r --range -C --continue-at --retry --retry-delay --retry-max-time --resolve --url -U --proxy-user " +
		"-E --capath --limit-rate -y -Y -z --time-cond --max-filesize --dns-servers --interface --local-port " +
		"--connect-to --output-dir --unix-socket --abstract-unix-socket --json -Q --quote --mail-from --mail-rcpt -t --telnet-option"
	for _, op := range operands(args, vals) {
		w.a.url(op)
	}
	for i := 0; i+1 < len(args); i++ {
		a, v := args[i], args[i+1]
		switch a {
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
}

func (w *walker) wget(args []string) {
	vals := "-O --output-document -o --output-file -a --append-output -P --directory-prefix -i --input-file " +
		"-e --execute -U --user-agent --header --post-data --post-file --body-file --method -t --tries -T --timeout " +
		"--user --password --http-user --http-password -B --base --limit-rate -w --wait -Q --quota -l --level -D --domains -A -R --accept --reject"
	for _, op := range operands(args, vals) {
		w.a.url(op)
	}
	for i := 0; i+1 < len(args); i++ {
		a, v := args[i], args[i+1]
		switch a {
		case "-O", "--output-document", "-P", "--directory-prefix":
			if v != "-" {
				w.writeTarget(v)
			}
		case "-i", "--input-file", "--post-file", "--body-file":
			w.a.add(&w.a.n.Reads, w.path(v))
		}
	}
	if v, ok := flagValue(args, "-O", "--output-document"); ok && len(v) > 0 && v != "-" {
		w.writeTarget(v)
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
func (w *walker) copyRemote(args []string) {
	ops := operands(args, "-P -i -o -F -c -l -S -J -e --rsh --exclude --include --exclude-from --include-from --filter -f --port --password-file --log-file")
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

// pip handles pip install/download: index URLs, VCS and URL requirements,
// requirement files, plain package specs.
func (w *walker) pip(args []string) {
	vals := "-i --index-url --extra-index-url -f --find-links -r --requirement -c --constraint -e --editable " +
		"-t --target --proxy --prefix --root --trusted-host --cache-dir --python-version --platform --src -d --dest --log --timeout --retries"
	ops := operands(args, vals)
	if len(ops) == 0 {
		return
	}
	sub := ops[0]
	if sub != "install" && sub != "download" && sub != "wheel" && sub != "add" {
		return
	}
	for i := 0; i+1 < len(args); i++ {
		a, v := args[i], args[i+1]
		switch a {
		case "-i", "--index-url", "--extra-index-url", "-f", "--find-links":
			if !w.a.url(v) {
				w.a.add(&w.a.n.Reads, w.path(v))
			}
		case "-r", "--requirement", "-c", "--constraint":
			w.a.add(&w.a.n.Reads, w.path(v))
		case "-e", "--editable":
			w.pipReq(v)
		}
	}
	for _, a := range args {
		for _, f := range []string{"--index-url=", "--extra-index-url=", "--find-links="} {
			if v, ok := strings.CutPrefix(a, f); ok {
				w.a.url(v)
			}
		}
	}
	for _, op := range ops[1:] {
		w.pipReq(op)
	}
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
func (w *walker) pkgInstall(name string, args []string) {
	vals := "--registry -w --workspace --prefix -C --cwd -o --index --git --branch --tag --rev --path --root --target -t --version --source -p -c -n --channel"
	ops := operands(args, vals)
	if reg, ok := flagValue(args, "--registry", "--index", "--source", "--git"); ok {
		w.a.url(reg)
	}
	if name == "npx" {
		if len(ops) > 0 {
			w.pkgSpec(ops[0])
		}
		return
	}
	if len(ops) == 0 {
		return
	}
	sub, pkgs := ops[0], ops[1:]
	switch name {
	case "npm", "pnpm":
		if sub != "install" && sub != "i" && sub != "add" && sub != "exec" && sub != "x" {
			return
		}
	case "yarn":
		if sub != "add" && sub != "global" && sub != "dlx" {
			return
		}
		if sub == "global" && len(pkgs) > 0 {
			pkgs = pkgs[1:]
		}
	case "go":
		if sub != "get" && sub != "install" && sub != "run" {
			return
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
		return
	case "cargo":
		if sub != "install" && sub != "add" {
			return
		}
	case "conda", "mamba":
		if sub != "install" && sub != "create" {
			return
		}
	default: // gem, apt, apt-get
		if sub != "install" {
			return
		}
	}
	for _, p := range pkgs {
		w.pkgSpec(p)
	}
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
func (w *walker) copyMove(name string, args []string) {
	ops := operands(args, "-t -S -m -o -g --target-directory --suffix --mode --owner --group")
	dest, hasT := flagValue(args, "-t", "--target-directory")
	if !hasT && len(ops) > 0 {
		if len(ops) == 1 && name == "ln" {
			dest = path.Base(ops[0])
		} else if len(ops) > 1 || name != "install" {
			dest, ops = ops[len(ops)-1], ops[:len(ops)-1]
		}
	}
	if shortFlag(args, 'd', "--directory") && name == "install" {
		for _, d := range append(ops, dest) {
			w.a.add(&w.a.n.Writes, w.path(d))
		}
		return
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

func (w *walker) patch(args []string) {
	ops := operands(args, "-i -o -d -p -r -B -F -V -z -D --input --output --directory --strip --reject-file")
	if f, ok := flagValue(args, "-i", "--input"); ok {
		w.a.add(&w.a.n.Reads, w.path(f))
	}
	if f, ok := flagValue(args, "-o", "--output"); ok {
		w.writeTarget(f)
	}
	if len(ops) > 0 {
		w.a.add(&w.a.n.Writes, w.path(ops[0]))
	}
	if len(ops) > 1 {
		w.a.add(&w.a.n.Reads, w.path(ops[1]))
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
