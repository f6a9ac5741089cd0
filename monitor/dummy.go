package monitor

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/normalize"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/toolcall"
)

// dummyOutput is what a blocked call shows the policy: the answer the same
// tool would give had the protected thing not been there (a missing file, a
// 404, an unknown revision), never a word about the monitor. It depends only
// on the call, so the same call always gets the same answer.
func dummyOutput(call toolcall.Call, d decoded, n toolcall.Normalized, dec decision.Decision, f Facts) (string, int) {
	if d.spec == nil || d.spec.dummy == nil {
		return fmt.Sprintf("error: tool %s failed: not available", call.Tool), 1
	}
	return d.spec.dummy(d.args, n, dec, f)
}

// notFoundDummy is read_file's and list_dir's: the path is not there.
func notFoundDummy(n toolcall.Normalized) (string, int) {
	if len(n.Reads) > 0 {
		return notFound(n.Reads[0]), 1
	}
	if len(n.Lists) > 0 {
		return notFound(n.Lists[0]), 1
	}
	return notFound(n.Raw), 1
}

// bashDummy answers by what the rules found the command reaching for,
// after what the command's opening echo and printf statements would have
// printed before it got there (normalize.LeadingOutput).
func bashDummy(args *toolcall.BashArgs, n toolcall.Normalized, d decision.Decision, f Facts) (string, int) {
	out, code := bashDummyOf(n, d, f)
	if args != nil {
		out = normalize.LeadingOutput(args.Command) + out
	}
	return out, code
}

func bashDummyOf(n toolcall.Normalized, d decision.Decision, f Facts) (string, int) {
	switch d.Category {
	case rules.CatNetwork:
		return networkDummy(n)
	case rules.CatHistory:
		return historyDummy(n, f)
	case rules.CatTampering, rules.CatEvaluator, rules.CatSpecialCase:
		return "", 0 // as if the write went through
	case rules.CatProbing:
		if p := firstOr(n.Reads, ""); p != "" {
			return fmt.Sprintf("%s: %s: Permission denied", cmdName(n), p), 1
		}
		return "", 1
	}
	// protected access, chained discovery, anything else: the thing is not there.
	return missingDummy(n, d)
}

func firstOr(s []string, def string) string {
	if len(s) > 0 {
		return s[0]
	}
	return def
}

func cmdName(n toolcall.Normalized) string {
	if len(n.Commands) > 0 {
		return n.Commands[0].Name
	}
	return "bash"
}

// missingDummy answers as the command would for a path that does not exist.
func missingDummy(n toolcall.Normalized, d decision.Decision) (string, int) {
	target := protectedTarget(n, d.Flags)
	name := cmdName(n)
	for _, c := range n.Commands {
		for _, a := range c.Argv[1:] {
			if target != "" && (a == target || path.Base(a) == path.Base(target)) {
				name = c.Name
			}
		}
	}
	if target == "" {
		return "", 1
	}
	switch name {
	case "find":
		return "", 0 // a search that finds nothing
	case "ls":
		return fmt.Sprintf("ls: cannot access '%s': No such file or directory", target), 2
	case "cp", "mv":
		return fmt.Sprintf("%s: cannot stat '%s': No such file or directory", name, target), 1
	case "grep", "egrep", "fgrep", "rg":
		return fmt.Sprintf("%s: %s: No such file or directory", name, target), 2
	case "python", "python3":
		return fmt.Sprintf("Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\nFileNotFoundError: [Errno 2] No such file or directory: '%s'", target), 1
	}
	return fmt.Sprintf("%s: %s: No such file or directory", name, target), 1
}

// protectedTarget is the path a blocked call reached for: the first path it
// reads or lists that a flag names (exactly or as a parent), else the first
// path a flag names, else the first it reads.
func protectedTarget(n toolcall.Normalized, flags []rules.Flag) string {
	var named []string
	for _, f := range flags {
		for _, ev := range strings.Fields(f.Evidence) {
			if strings.HasPrefix(ev, "/") {
				named = append(named, ev)
			}
		}
	}
	for _, list := range [][]string{n.Reads, n.Lists} {
		for _, p := range list {
			for _, ev := range named {
				if p == ev || strings.HasPrefix(p, strings.TrimSuffix(ev, "/")+"/") {
					return p
				}
			}
		}
	}
	if len(named) > 0 {
		return named[0]
	}
	return firstOr(n.Reads, firstOr(n.Lists, ""))
}

// networkDummy answers as the client would for a 404 or an unknown repo.
func networkDummy(n toolcall.Normalized) (string, int) {
	url := firstOr(n.URLs, "")
	host := firstOr(n.Hosts, "")
	if url == "" && host != "" {
		url = "https://" + host + "/"
	}
	for _, c := range n.Commands {
		switch c.Name {
		case "curl":
			for _, a := range c.Argv[1:] {
				if a == "-f" || a == "--fail" || a == "--fail-with-body" || (strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "f")) {
					return "curl: (22) The requested URL returned error: 404", 22
				}
			}
			return "404: Not Found", 0
		case "wget":
			return fmt.Sprintf("--2026-01-01 00:00:00--  %s\nHTTP request sent, awaiting response... 404 Not Found\n2026-01-01 00:00:00 ERROR 404: Not Found.", url), 8
		case "git":
			return fmt.Sprintf("Cloning into '%s'...\nremote: Repository not found.\nfatal: repository '%s' not found", strings.TrimSuffix(path.Base(url), ".git"), url), 128
		case "pip", "pip3":
			pkg := firstOr(n.Packages, "package")
			return fmt.Sprintf("ERROR: Could not find a version that satisfies the requirement %s (from versions: none)\nERROR: No matching distribution found for %s", pkg, pkg), 1
		case "python", "python3":
			return "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\nurllib.error.HTTPError: HTTP Error 404: Not Found", 1
		}
	}
	return "404 Not Found", 1
}

// historyDummy answers as git does for a revision that is not there.
func historyDummy(n toolcall.Normalized, f Facts) (string, int) {
	for _, g := range n.Git {
		switch g.Sub {
		case "fetch", "pull", "remote", "clone", "ls-remote":
			return "fatal: 'origin' does not appear to be a git repository\nfatal: Could not read from remote repository.\n\nPlease make sure you have the correct access rights\nand the repository exists.", 128
		}
		for _, r := range g.Refs {
			if !isFuture(r, f) {
				continue
			}
			switch g.Sub {
			case "cherry-pick", "revert":
				return fmt.Sprintf("fatal: bad revision '%s'", r), 128
			case "checkout", "switch", "restore":
				return fmt.Sprintf("error: pathspec '%s' did not match any file(s) known to git", r), 1
			}
			if len(r) == 40 {
				return fmt.Sprintf("fatal: bad object %s", r), 128
			}
			return fmt.Sprintf("fatal: ambiguous argument '%s': unknown revision or path not in the working tree.\nUse '--' to separate paths from revisions, like this:\n'git <command> [<revision>...] -- [<file>...]'", r), 128
		}
	}
	return "", 0
}

// isFuture reports whether a revision names a commit that is not an
// ancestor of the base: a non-ancestor ref, or a prefix (≥ 4 hex digits) of
// a non-ancestor commit id, also with ~n/^ suffixes.
func isFuture(rev string, f Facts) bool {
	base := rev
	if i := strings.IndexAny(base, "~^@:"); i > 0 {
		base = base[:i]
	}
	for _, r := range f.NonAncestorRefs {
		if base == r {
			return true
		}
	}
	if len(base) >= 4 && isHex(base) {
		for _, c := range f.NonAncestorCommits {
			if strings.HasPrefix(c, strings.ToLower(base)) {
				return true
			}
		}
	}
	return false
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

var allRefsFlag = regexp.MustCompile(`(\s)(?:--all|--branches(?:=\S*)?|--tags(?:=\S*)?|--remotes(?:=\S*)?|--reflog|--glob=\S+|--walk-reflogs|-g)(\s|$)`)

// rewriteHistory returns the safe form of a history-mining command: the
// same command restricted to what HEAD can reach (all-refs options
// removed). Its output is then filtered of any future commit or ref. A call
// that names a future revision or reaches for a remote has no safe form.
func rewriteHistory(n toolcall.Normalized, f Facts) (string, bool) {
	if n.Unparsed || len(n.Git) == 0 {
		return "", false
	}
	for _, g := range n.Git {
		switch g.Sub {
		case "fetch", "pull", "remote", "clone", "ls-remote", "cherry-pick", "merge", "rebase", "checkout", "switch", "restore", "reset":
			return "", false
		}
		for _, r := range g.Refs {
			if isFuture(r, f) {
				return "", false
			}
		}
	}
	cmd := n.Raw
	for {
		next := allRefsFlag.ReplaceAllString(cmd, "$1$2")
		if next == cmd {
			break
		}
		cmd = next
	}
	return strings.TrimSpace(cmd), true
}
