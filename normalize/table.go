package normalize

// role is what an operand or a flag's value is to the command.
type role uint8

const (
	roleUnset  role = iota
	roleSkip        // taken, not recorded: a pattern, a mode, a member name
	roleRead        // a file read ("-" is stdin)
	roleWrite       // a file written or created
	roleTarget      // a file written as a redirection writes it (/dev/null is none, /dev/tcp a host; "-" is stdout)
	roleDelete      // a file removed
	roleList        // a directory listed or searched
	roleURL         // a URL (or host/path as curl takes it)
	roleNet         // a URL, else a host (ftp)
	roleHost        // a host (a port number or "-" is none)
	roleCmd         // a shell command the command runs
	roleSocat       // a socat address
	roleScript      // program text (awk)
)

// cmdSpec describes a command for the normalizer: its flags, and what
// its operands and flag values are. Most commands are this table alone;
// fn is for those whose meaning the roles cannot say (they print what
// they read, run a command, move the directory, parse addresses).
type cmdSpec struct {
	opt optSpec
	// flagRoles gives the role of a flag's value, by the flag's name as
	// given ("-o", "--output").
	flagRoles map[string]role
	// lead is the role of the first operand (grep's pattern, chmod's
	// mode, zip's archive) unless one of leadFlags stands in for it
	// (grep -e, sed -f); roleUnset: the first operand is like the rest.
	lead      role
	leadFlags []string
	ops       role // the role of the (other) operands
	none      role // with no operands, "." has this role (ls)
	// sw are flags that switch the operands to swOps and the empty case
	// to swNone (sed -i writes its files, grep -r lists its directories).
	sw            []string
	swOps, swNone role
	assign        bool // NAME=value operands are assignments (awk)
	stdin         bool // with no operands it copies its input to stdout (cat)
	skip          int  // wrappers: operands before the command (timeout's duration)
	flagsAfter    bool // flag values are taken after the operands (nc's -e after its host, as hosts are ordered)
	fn            func(w *walker, name string, sp *cmdSpec, argv []string, in input) input
}

func reads(flags string) *cmdSpec { return &cmdSpec{opt: opts(flags), ops: roleRead} }

func wrap(flags string, skip int) *cmdSpec {
	return &cmdSpec{opt: posixOpts(flags), skip: skip, fn: (*walker).wrapper}
}

func withFn(flags string, fn func(w *walker, name string, sp *cmdSpec, argv []string, in input) input) *cmdSpec {
	return &cmdSpec{opt: opts(flags), fn: fn}
}

// set makes one spec the spec of several names.
func set(m map[string]*cmdSpec, sp *cmdSpec, names ...string) {
	for _, n := range names {
		m[n] = sp
	}
}

var grepFlags = "-e -f -m -A -B -C -d -D --regexp --file --max-count --label --include --exclude --exclude-dir --exclude-from " +
	"--context --after-context --before-context --binary-files --devices --directories --color? --colour?"

// commands is the normalizer's table of the commands it knows, built at
// init (its functions call back into the walk, which reads the table).
var commands map[string]*cmdSpec

func init() { commands = buildCommands() }

func buildCommands() map[string]*cmdSpec {
	m := map[string]*cmdSpec{}
	out := map[string]role{"-o": roleWrite, "--output": roleWrite}

	// Commands whose operands are files they read.
	set(m, &cmdSpec{opt: opts(""), ops: roleRead, stdin: true}, "cat")
	set(m, reads(""), "tac", "less", "more", "md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum",
		"b2sum", "cksum", "sum", "wc", "nano", "emacs", "zcat", "bzcat", "xzcat", "zless", "comm")
	m["head"] = reads("-n -c --lines --bytes")
	m["tail"] = reads("-n -c -s --pid --lines --bytes --sleep-interval --max-unchanged-stats")
	m["nl"] = reads("-b -d -f -h -i -l -n -s -v -w")
	m["od"] = reads("-A -j -N -S -t -w? --address-radix --skip-bytes --read-bytes --format")
	m["hexdump"] = &cmdSpec{opt: opts("-n -s -e -f"), ops: roleRead, flagRoles: map[string]role{"-f": roleRead}}
	m["hd"] = reads("-n -s -e")
	m["strings"] = reads("-n -t -e --bytes --radix --encoding")
	m["file"] = &cmdSpec{opt: opts("-m -F -f -P --magic-file --separator --files-from"), ops: roleRead,
		flagRoles: map[string]role{"-f": roleRead, "--files-from": roleRead}}
	set(m, reads("-c -S -u -t -q -T -i -w -W -s -U --cmd"), "vim", "vi", "nvim", "view")
	m["diff"] = reads("-U -C -x -X -I -L -F --unified? --context? --exclude --exclude-from --ignore-matching-lines --label --show-function-line --line-format --new-line-format --old-line-format --from-file --to-file")
	m["cmp"] = reads("-i -n --ignore-initial --bytes")
	m["sort"] = &cmdSpec{opt: opts("-k -t -o -S -T --key --field-separator --output --buffer-size --temporary-directory --parallel --files0-from --sort --batch-size"),
		ops: roleRead, flagRoles: out}
	m["uniq"] = reads("-f -s -w --skip-fields --skip-chars --check-chars")
	m["cut"] = reads("-d -f -b -c --delimiter --fields --bytes --characters --output-delimiter")
	m["base32"] = reads("-w --wrap")
	m["column"] = reads("-s -c -o -N -E -H -R -T -W -O -n --separator --output-separator --output-width --table-columns")
	m["fold"] = reads("-w --width")
	m["fmt"] = reads("-w -p -g --width --prefix --goal")
	m["paste"] = reads("-d --delimiters")
	m["join"] = reads("-t -1 -2 -j -o -a -v -e")
	m["iconv"] = &cmdSpec{opt: opts("-f -t -o --from-code --to-code --output"), ops: roleRead, flagRoles: out}
	set(m, reads("-l -H -r -m --language --highlight-line --line-range --map-syntax --style --theme --tabs --wrap --terminal-width --color --decorations --paging --pager"), "bat", "batcat")
	m["pygmentize"] = &cmdSpec{opt: opts("-l -f -O -P -o -F -a"), ops: roleRead, flagRoles: map[string]role{"-o": roleTarget}}
	// xxd's flags are words (-ps, -len 16), never bundled.
	m["xxd"] = &cmdSpec{opt: opts("-l -s -c -g -o -n -len -seek -cols -groupsize -offset -name"), ops: roleRead, fn: (*walker).xxd}

	// Files created, changed or removed.
	m["touch"] = &cmdSpec{opt: opts("-r -d -t --reference --date --time"), ops: roleWrite}
	m["mkdir"] = &cmdSpec{opt: opts("-m --mode --context?"), ops: roleWrite}
	m["truncate"] = &cmdSpec{opt: opts("-s -r --size --reference"), ops: roleWrite}
	set(m, &cmdSpec{opt: opts("--reference"), lead: roleSkip, leadFlags: []string{"--reference"}, ops: roleWrite},
		"chmod", "chown", "chgrp", "chattr")
	m["setfacl"] = &cmdSpec{opt: opts("-m -x -M -X --modify --remove --modify-file --remove-file --set --set-file"),
		lead: roleUnset, ops: roleWrite, flagRoles: map[string]role{"-M": roleRead, "-X": roleRead, "--modify-file": roleRead, "--remove-file": roleRead, "--set-file": roleRead}}
	set(m, &cmdSpec{opt: opts("--interactive? --preserve-root?"), ops: roleDelete}, "rm", "unlink", "rmdir", "srm")
	m["shred"] = &cmdSpec{opt: opts("-n -s --iterations --size --random-source"), ops: roleDelete}
	m["patch"] = &cmdSpec{opt: opts("-i -o -d -p -r -B -F -V -z -D -Y --input --output --directory --strip --reject-file --fuzz --prefix --suffix --backup-if-mismatch? --basename-prefix --version-control --ifdef --quoting-style --reject-format --read-only"),
		lead: roleWrite, ops: roleRead,
		flagRoles: map[string]role{"-i": roleRead, "--input": roleRead, "-o": roleTarget, "--output": roleTarget}}
	m["unzip"] = &cmdSpec{opt: opts("-d -x -P"), lead: roleRead, ops: roleSkip, flagRoles: map[string]role{"-d": roleWrite}}
	m["zip"] = &cmdSpec{opt: opts("-x -i -P -b -n -t -O --exclude --include --password --temp-path --suffixes --out"),
		lead: roleWrite, ops: roleRead, flagRoles: map[string]role{"-O": roleWrite, "--out": roleWrite}}

	// Directories listed.
	m["ls"] = &cmdSpec{opt: opts("-I -w -T --ignore --hide --block-size --width --tabsize --format --sort --time --time-style --quoting-style --indicator-style --color? --hyperlink?"),
		ops: roleList, none: roleList}
	set(m, &cmdSpec{opt: opts("-I -w -T -B --ignore --hide --block-size --width --tabsize --format --sort --time --time-style --quoting-style --indicator-style --color?"),
		ops: roleList, none: roleList}, "dir", "vdir")
	m["tree"] = &cmdSpec{opt: opts("-L -P -I -o -H -T --filelimit --charset --timefmt --sort --fromfile"), ops: roleList, none: roleList,
		flagRoles: map[string]role{"-o": roleTarget}}
	m["du"] = &cmdSpec{opt: opts("-d -B -t -X --max-depth --block-size --threshold --exclude --exclude-from --files0-from --time? --time-style"),
		ops: roleList, none: roleList}
	set(m, &cmdSpec{opt: opts("-L -I -s -t --level --ignore-glob --sort --time --time-style --color? --colour? --group-directories-first? --icons?"),
		ops: roleList, none: roleList}, "exa", "eza")
	m["lsd"] = &cmdSpec{opt: opts("-I --depth --ignore-glob --sort --blocks --date --color? --icons?"), ops: roleList, none: roleList}

	// Searchers: the first operand is the pattern unless -e or -f gives it.
	grep := &cmdSpec{opt: opts(grepFlags), lead: roleSkip, leadFlags: []string{"-e", "-f", "--regexp", "--file"},
		ops: roleRead, sw: []string{"-r", "-R", "--recursive", "--dereference-recursive"}, swOps: roleList, swNone: roleList,
		flagRoles: map[string]role{"-f": roleRead, "--file": roleRead}}
	set(m, grep, "grep", "egrep", "fgrep", "zgrep")
	searcher := func(flags string, patternFile bool) *cmdSpec {
		sp := &cmdSpec{opt: opts(flags), lead: roleSkip, leadFlags: []string{"-e", "--regexp"}, ops: roleList, none: roleList}
		if patternFile {
			sp.leadFlags = append(sp.leadFlags, "-f", "--file")
			sp.flagRoles = map[string]role{"-f": roleRead, "--file": roleRead}
		}
		return sp
	}
	m["rg"] = searcher("-e -f -m -A -B -C -g -t -T -j -M -E -r -d --type --glob --iglob --replace --max-depth --max-count --type-not "+
		"--ignore-file --max-columns --encoding --context --after-context --before-context --regexp --file --sort --sortr --type-add --color --colors --path-separator --threads --max-filesize --pre --pre-glob", true)
	m["ag"] = searcher("-A -B -C -G -g -m -p --ignore --ignore-dir --file-search-regex --depth --max-count --path-to-ignore --context --after --before --pager", false)
	m["ack"] = searcher("-A -B -C -m -g --type --ignore-dir --ignore-file --match --max-count --output --context --after-context --before-context --type-add --type-set --pager", false)
	m["sed"] = &cmdSpec{opt: opts("-e -f -l -i? --expression --file --line-length"),
		lead: roleSkip, leadFlags: []string{"-e", "-f", "--expression", "--file"}, ops: roleRead,
		sw: []string{"-i", "--in-place"}, swOps: roleWrite, flagRoles: map[string]role{"-f": roleRead, "--file": roleRead}}
	m["gsed"] = m["sed"]
	set(m, &cmdSpec{opt: opts("-F -v -f -i -l -E --field-separator --assign --file --include --load --exec"),
		lead: roleScript, leadFlags: []string{"-f", "--file", "-E", "--exec"}, ops: roleRead, assign: true,
		flagRoles: map[string]role{"-f": roleRead, "--file": roleRead, "-E": roleRead, "--exec": roleRead, "-i": roleRead, "--include": roleRead}},
		"awk", "gawk", "mawk", "nawk")

	// Network clients.
	set(m, &cmdSpec{opt: opts("-o -a -A --auth --auth-type --output --session --session-read-only --verify --cert --cert-key --proxy"),
		ops: roleURL, flagRoles: map[string]role{"-o": roleTarget, "--output": roleTarget}},
		"http", "https", "httpie", "xh")
	set(m, &cmdSpec{opt: opts("-o -d -i -x -s -j --dir --out --input-file --max-connection-per-server --split --all-proxy --log"),
		ops: roleURL, flagRoles: map[string]role{"-i": roleRead, "--input-file": roleRead}}, "aria2c")
	m["lynx"] = &cmdSpec{opt: opts("-cfg -lss -cmd_script -cmd_log -auth -pauth -useragent -display_charset -assume_charset"), ops: roleURL}
	set(m, &cmdSpec{opt: opts(""), ops: roleURL}, "links", "w3m")
	m["ftp"] = &cmdSpec{opt: opts("-P -o -T -s -r -q"), ops: roleNet}
	m["sftp"] = &cmdSpec{opt: opts("-B -b -c -D -F -i -J -l -o -P -R -S -s -X"), ops: roleNet}
	m["tftp"] = &cmdSpec{opt: opts("-m -R"), ops: roleNet}
	m["wget"] = &cmdSpec{opt: opts("-O -o -a -P -i -e -U -t -T -w -Q -l -D -A -R -B -I -X " +
		"--output-document --output-file --append-output --directory-prefix --input-file --execute --user-agent --header " +
		"--post-data --post-file --body-data --body-file --method --tries --timeout --user --password --http-user --http-password " +
		"--base --limit-rate --wait --quota --level --domains --accept --reject --include-directories --exclude-directories " +
		"--load-cookies --save-cookies --ca-certificate --certificate --private-key --config --referer --bind-address"),
		ops: roleURL, flagRoles: map[string]role{
			"-O": roleTarget, "--output-document": roleTarget, "-P": roleTarget, "--directory-prefix": roleTarget,
			"-i": roleRead, "--input-file": roleRead, "--post-file": roleRead, "--body-file": roleRead,
			"--load-cookies": roleRead, "--config": roleRead,
		}}
	m["curl"] = withFn(curlFlags, (*walker).curl)
	set(m, &cmdSpec{opt: opts("-p -s -w -i -q -x -X -e -c -I -O -T -V -P --exec --sh-exec --lua-exec --proxy --proxy-type --proxy-auth --source --wait --idle-timeout"),
		lead: roleHost, ops: roleSkip, flagsAfter: true,
		flagRoles: map[string]role{"-e": roleCmd, "-c": roleCmd, "--exec": roleCmd, "--sh-exec": roleCmd}},
		"nc", "ncat", "netcat", "telnet")
	m["socat"] = &cmdSpec{opt: opts("-d? -L -W -b -T -t"), ops: roleSocat}
	m["ssh"] = &cmdSpec{opt: opts("-b -c -D -E -e -F -I -i -J -L -l -m -O -o -p -Q -R -S -W -w -B"),
		lead: roleHost, ops: roleSkip, flagsAfter: true, flagRoles: map[string]role{"-J": roleHost}}
	m["scp"] = withFn("-P -i -o -F -c -l -S -J -D -X", (*walker).copyRemote)
	m["rsync"] = withFn("-e -f -B -T -M --rsh --exclude --include --exclude-from --include-from --filter --port "+
		"--password-file --log-file --files-from --rsync-path --chmod --chown --backup-dir --suffix --compare-dest --copy-dest --link-dest --timeout --bwlimit",
		(*walker).copyRemote)

	// Wrappers: what follows their flags (and skip operands) is a command.
	set(m, wrap("-u -g -h -p -C -D -r -t -U -T --user --group --host --prompt --chdir --role --type --other-user --close-from", 0), "sudo")
	m["doas"] = wrap("-u -C", 0)
	set(m, wrap("", 0), "nohup", "builtin", "setsid", "unbuffer", "caffeinate", "catchsegv", "faketime")
	m["command"] = wrap("", 0)
	m["exec"] = wrap("-a", 0)
	m["nice"] = wrap("-n --adjustment", 0)
	m["ionice"] = wrap("-c -n -p -t -P -u --class --classdata --pid --pgid --uid", 0)
	m["stdbuf"] = wrap("-i -o -e --input --output --error", 0)
	m["time"] = wrap("-f -o --format --output", 0)
	m["time"].flagRoles = map[string]role{"-o": roleTarget, "--output": roleTarget}
	m["strace"] = wrap("-o -e -p -s -u -E -a -b -I -O -P -S -X", 0)
	m["strace"].flagRoles = map[string]role{"-o": roleTarget}
	m["ltrace"] = wrap("-o -e -p -s -u -n -a -A -D -F -l -w", 0)
	m["xargs"] = &cmdSpec{opt: posixOpts("-I -n -P -L -d -s -E -a --arg-file --delimiter --max-args --max-procs --max-lines --max-chars --eof? --replace? --process-slot-var -i? -e? -l?"),
		flagRoles: map[string]role{"-a": roleRead, "--arg-file": roleRead}, fn: (*walker).wrapper}
	m["runuser"] = wrap("-u -g -G --user --group --supp-group", 0)
	set(m, wrap("", 1), "chrt", "chroot")                        // priority, new root
	m["taskset"] = wrap("", 1)                                   // mask
	m["flock"] = wrap("-w -E --timeout --conflict-exit-code", 1) // lock file
	m["timeout"] = wrap("-s -k --signal --kill-after", 1)        // duration
	m["env"] = &cmdSpec{opt: posixOpts("-u -C -S --unset --chdir --split-string"), fn: (*walker).envCmd}

	// Shells and interpreters.
	for _, n := range []string{"bash", "sh", "dash", "zsh", "ksh", "ash", "mksh", "rbash"} {
		m[n] = &cmdSpec{fn: (*walker).shellCmd}
	}
	m["busybox"] = &cmdSpec{fn: (*walker).busybox}
	m["python"] = &cmdSpec{fn: (*walker).python}
	set(m, m["python"], "pypy", "pypy3")
	set(m, &cmdSpec{fn: (*walker).interp}, "perl", "ruby", "node", "nodejs", "php", "deno", "bun", "lua", "Rscript")
	m["eval"] = &cmdSpec{fn: (*walker).eval}
	m["su"] = &cmdSpec{opt: opts("-c -s -g -G -w --command --session-command --shell --group --supp-group --whitelist-environment"),
		ops: roleSkip, flagRoles: map[string]role{"-c": roleCmd, "--command": roleCmd, "--session-command": roleCmd}}
	m["watch"] = withFn("-n -d? -q --interval --differences? --equexit --errexit?", (*walker).watch)
	set(m, &cmdSpec{fn: (*walker).source}, "source", ".")

	// The shell's own state and output.
	set(m, &cmdSpec{opt: opts(""), fn: (*walker).cd}, "cd", "pushd")
	m["echo"] = &cmdSpec{fn: func(_ *walker, _ string, _ *cmdSpec, argv []string, _ input) input { return echo(argv) }}
	m["printf"] = &cmdSpec{fn: func(_ *walker, _ string, _ *cmdSpec, argv []string, _ input) input { return printf(argv) }}
	m["base64"] = &cmdSpec{opt: opts("-w --wrap"), ops: roleRead, fn: (*walker).base64}
	m["tee"] = &cmdSpec{opt: opts("--output-error?"), ops: roleTarget, fn: (*walker).tee}
	m["dd"] = &cmdSpec{fn: (*walker).dd}

	// Version control, archives, finders, installers: their own parsers.
	m["git"] = &cmdSpec{fn: func(w *walker, _ string, _ *cmdSpec, argv []string, _ input) input { w.git(argv); return input{} }}
	set(m, &cmdSpec{fn: func(w *walker, _ string, _ *cmdSpec, argv []string, _ input) input { w.tar(argv); return input{} }}, "tar", "bsdtar")
	m["find"] = &cmdSpec{fn: func(w *walker, _ string, _ *cmdSpec, argv []string, _ input) input { w.find(argv); return input{} }}
	set(m, withFn(pipFlags, (*walker).pip), "pip", "pip3", "pip2", "uv", "pipx")
	set(m, withFn("--registry -w --workspace --prefix -C --cwd -o --index --git --branch --tag --rev --path --root --target -t --version --source -p -c -n --channel",
		(*walker).pkgInstall), "npm", "pnpm", "yarn", "npx", "gem", "cargo", "apt", "apt-get", "go", "conda", "mamba")
	set(m, withFn("-t -S -m -o -g --target-directory --suffix --mode --owner --group --backup? --sparse --reflink? --preserve? --no-preserve --strip-program --context?",
		(*walker).copyMove), "cp", "install", "mv", "ln")
	for _, sp := range m {
		// Plain entries that ask about no flag skip recording them.
		sp.opt.noFlags = sp.fn == nil && sp.flagRoles == nil && len(sp.leadFlags) == 0 && len(sp.sw) == 0
	}
	return m
}

// spec is the table's entry for a command name; python3.11 and the like
// are python.
func spec(name string) *cmdSpec {
	if sp := commands[name]; sp != nil {
		return sp
	}
	if isPython(name) {
		return commands["python"]
	}
	return nil
}
