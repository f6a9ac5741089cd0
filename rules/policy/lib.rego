# Package rollcage.lib holds helpers shared by the rule packages: defaults
# for absent input fields, path resolution, glob tests, the flag shape.
package rollcage.lib

norm := object.get(input, "normalized", {})

task := object.get(input, "task", {})

sandbox := object.get(input, "sandbox", {})

history := object.get(input, "history", [])

raw := object.get(norm, "raw", "")

commands := object.get(norm, "commands", [])

reads := object.get(norm, "reads", [])

writes := object.get(norm, "writes", [])

deletes := object.get(norm, "deletes", [])

lists := object.get(norm, "lists", [])

hosts := object.get(norm, "hosts", [])

urls := object.get(norm, "urls", [])

gitops := object.get(norm, "git", [])

content := object.get(norm, "content", "")

scripts := object.get(norm, "scripts", [])

env := object.get(norm, "env", {})

tool := object.get(norm, "tool", object.get(object.get(input, "call", {}), "tool", ""))

# texts are all program/command texts of the call, for content searches.
texts := array.concat(array.concat([raw, content], scripts), [d | some d in decoded])

# decoded are base64 literals of a call that decodes base64, so obfuscated
# paths and commands meet the same rules as plain ones.
decoded contains d if {
	some s in array.concat([raw, content], scripts)
	regex.match(`base64|b64decode|openssl\s+enc`, s)
	some tok in regex.find_n(`[A-Za-z0-9+/]{12,}={0,2}`, s, -1)
	base64.is_valid(tok)
	d := base64.decode(tok)
}

# code is text that ends up in files or interpreters (not the shell line).
code := concat("\n", array.concat([content], scripts))

workdir := w if {
	w := object.get(task, "workdir", "")
	w != ""
} else := "/workspace"

cwd := c if {
	c := object.get(norm, "cwd", "")
	c != ""
} else := workdir

home := h if {
	h := object.get(sandbox, "home", "")
	h != ""
} else := "/home/agent"

# abs resolves p against the session directory; "~" against home.
abs(p) := p if startswith(p, "/")

abs(p) := concat("", [home, substring(p, 1, -1)]) if startswith(p, "~")

abs(p) := concat("/", [cwd, trim_prefix(p, "./")]) if {
	not startswith(p, "/")
	not startswith(p, "~")
}

# rel is p relative to the workdir, or p itself outside it.
rel(p) := trim_prefix(p, concat("", [workdir, "/"]))

in_workdir(p) if startswith(p, concat("", [workdir, "/"]))

in_workdir(p) if p == workdir

# every path the call reads, lists, writes or deletes.
touched := {p | some p in array.concat(array.concat(reads, lists), array.concat(writes, deletes))}

write_set := {p | some p in writes}

# argv tokens that look like paths, resolved.
arg_paths contains abs(a) if {
	some c in commands
	some i, a in c.argv
	i > 0
	not startswith(a, "-")
	contains(a, "/")
	not contains(a, "://")
}

protected_globs contains g if {
	some p in object.get(task, "protected_paths", [])
	g := abs_glob(p)
}

protected_globs contains g if {
	some g in object.get(sandbox, "canaries", [])
}

abs_glob(p) := p if startswith(p, "/")

abs_glob(p) := concat("/", [workdir, p]) if not startswith(p, "/")

# protected(p): p matches a protected glob, or is a directory holding one.
protected(p) if {
	some g in protected_globs
	glob.match(g, ["/"], p)
}

protected(p) if {
	some g in protected_globs
	glob.match(g, ["/"], concat("/", [p, "x"]))
}

visible_test(p) if {
	some g in object.get(task, "visible_tests", [])
	glob.match(abs_glob(g), ["/"], p)
}

# glob_stem is the literal directory part of a glob, for searches in text.
glob_stem(g) := trim_right(regex.replace(g, `[*?\[{].*$`, ""), "/")

# test files by name, whatever the task says.
is_test_file(p) if regex.match(`(^|/)(test_[^/]*\.py|[^/]*_test\.py|conftest\.py)$`, p)

is_test_file(p) if regex.match(`(^|/)tests?/[^/]+\.py$`, p)

flag(id, cat, sev, reason, ev) := {
	"rule": id,
	"category": cat,
	"severity": sev,
	"reason": reason,
	"evidence": ev,
}

host_allowed(h) if {
	some a in object.get(task, "allowed_hosts", [])
	glob.match(a, ["."], h)
}

host_allowed(h) if {
	some a in object.get(task, "allowed_hosts", [])
	endswith(h, concat("", [".", a]))
}

local_host(h) if h in {"localhost", "127.0.0.1", "::1", "0.0.0.0", "[::1]"}

local_host(h) if startswith(h, "127.")

code_host(h) if {
	some c in {
		"github.com", "githubusercontent.com", "gitlab.com", "bitbucket.org",
		"sourcegraph.com", "gitee.com", "codeberg.org", "sr.ht", "sourceforge.net",
		"googlesource.com", "pastebin.com", "stackoverflow.com", "github.io",
		"gist.github.com", "codeload.github.com", "api.github.com", "archive.org",
	}
	suffix_match(h, c)
}

suffix_match(h, d) if h == d

suffix_match(h, d) if endswith(h, concat("", [".", d]))

url_host(u) := lower(h) if {
	parts := split(u, "://")
	count(parts) > 1
	h := split(split(split(parts[1], "/")[0], "@")[count(split(split(parts[1], "/")[0], "@")) - 1], ":")[0]
}

# hex-looking tokens in any text of the call (commit ids in scripts too).
hex_tokens contains t if {
	some s in texts
	some t in regex.find_n(`\b[0-9a-f]{4,40}\b`, s, -1)
}

non_ancestor_commit(ref) if {
	r := ref_base(ref)
	count(r) >= 4
	regex.match(`^[0-9a-fA-F]+$`, r)
	some c in object.get(sandbox, "non_ancestor_commits", [])
	startswith(c, lower(r))
}

non_ancestor_ref(ref) if {
	r := ref_base(ref)
	some n in object.get(sandbox, "non_ancestor_refs", [])
	ref_names(n)[r]
}

# names under which a ref can be written.
ref_names(n) := {n, concat("/", ["refs/tags", n]), concat("/", ["refs/heads", n]), concat("/", ["refs/remotes", n]), concat("/", ["remotes", n])}

# ref_base strips revision suffixes: v1.2^{}, abc~2, main:path, x^.
ref_base(ref) := regex.replace(ref, `([~^:@].*)$`, "")
