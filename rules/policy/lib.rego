# Package rollcage.lib holds helpers shared by the rule packages: defaults
# for absent input fields, path resolution, glob tests, the flag shape.
package rollcage.lib

default norm := {}

norm := input.normalized

default task := {}

task := input.task

default sandbox := {}

sandbox := input.sandbox

# Absent fields read as empty; direct references with defaults are cheaper
# than object.get on the hot path.
default history := []

history := input.history

default raw := ""

raw := norm.raw

default commands := []

commands := norm.commands

default reads := []

reads := norm.reads

default writes := []

writes := norm.writes

default deletes := []

deletes := norm.deletes

default lists := []

lists := norm.lists

default hosts := []

hosts := norm.hosts

default urls := []

urls := norm.urls

default gitops := []

gitops := norm.git

default content := ""

content := norm.content

default scripts := []

scripts := norm.scripts

default env := {}

env := norm.env

default tool := ""

tool := norm.tool

# input.derived, when the engine passes it (for a call its gates read,
# which has no base64 in it), holds text, code, touched and arg_paths as
# the definitions below compute them; monitor.TestPrefilterEquivalence
# holds the two equal.

# texts are all program/command texts of the call, for content searches.
texts := array.concat(array.concat([raw, content], scripts), [d | some d in decoded])

# text is all texts joined, so a content rule costs one regex call.
text := t if {
	t := input.derived.text
} else := concat("\n", texts)

# decoded are base64 literals of a call that decodes base64, so obfuscated
# paths and commands meet the same rules as plain ones.
decoded contains d if {
	some s in array.concat([raw, content], scripts)
	contains(s, "base64")
	some tok in regex.find_n(`[A-Za-z0-9+/]{12,}={0,2}`, s, -1)
	base64.is_valid(tok)
	d := base64.decode(tok)
}

# code is text that ends up in files or interpreters (not the shell line).
code := c if {
	c := input.derived.code
} else := concat("\n", array.concat([content], scripts))

# facts are derived from task and sandbox alone. An Episode evaluates
# episode_facts once when it starts and passes them as input.facts, so the
# per-call evaluation does not redo this work; one-off inputs derive them
# here.
facts := f if {
	f := input.facts
} else := episode_facts

episode_facts := {
	"workdir": wd,
	"workdir_slash": concat("", [wd, "/"]),
	"home": hm,
	"protected_globs": [g | some g in _protected_globs(wd)],
	# what protected.text looks for in command and script text: a glob's
	# literal directory when it has two segments or more, and its part
	# under the workdir when strictly inside
	"protected_stems": {stem |
		some g in _protected_globs(wd)
		stem := glob_stem(g)
		count(split(trim(stem, "/"), "/")) >= 2
	},
	"protected_rel_stems": {r |
		some g in _protected_globs(wd)
		stem := glob_stem(g)
		startswith(stem, concat("", [wd, "/"]))
		r := trim_prefix(stem, concat("", [wd, "/"]))
		contains(r, "/")
	},
	"visible_globs": [_abs_glob(wd, g) | some g in object.get(task, "visible_tests", [])],
	"allowed_hosts": object.get(task, "allowed_hosts", []),
	"commits": [lower(c) | some c in object.get(sandbox, "non_ancestor_commits", [])],
	"commit7": {substring(lower(c), 0, 7) | some c in object.get(sandbox, "non_ancestor_commits", [])},
	"ref_names": {r | some n in object.get(sandbox, "non_ancestor_refs", []); some r in ref_names(n)},
	"refs": object.get(sandbox, "non_ancestor_refs", []),
	# the visible-test files that existed at episode start (absolute), when
	# the sandbox reported them: a new test file is not a changed one.
	"visible_files": {_abs_glob(wd, f) | some f in object.get(sandbox, "visible_files", [])},
	"visible_files_known": count(object.get(sandbox, "visible_files", [])) > 0,
} if {
	wd := _workdir
	hm := _home
}

_workdir := w if {
	w := object.get(task, "workdir", "")
	w != ""
} else := "/workspace"

_home := h if {
	h := object.get(sandbox, "home", "")
	h != ""
} else := "/home/agent"

_protected_globs(wd) := {_abs_glob(wd, p) | some p in object.get(task, "protected_paths", [])} | {g | some g in object.get(sandbox, "canaries", [])}

_abs_glob(_, p) := p if startswith(p, "/")

_abs_glob(wd, p) := concat("/", [wd, p]) if not startswith(p, "/")

workdir := facts.workdir

home := facts.home

cwd := c if {
	c := norm.cwd
	c != ""
} else := workdir

# abs resolves p against the session directory; "~" against home.
abs(p) := p if startswith(p, "/")

abs(p) := concat("", [home, substring(p, 1, -1)]) if startswith(p, "~")

abs(p) := concat("/", [cwd, trim_prefix(p, "./")]) if {
	not startswith(p, "/")
	not startswith(p, "~")
}

# rel is p relative to the workdir, or p itself outside it.
rel(p) := trim_prefix(p, facts.workdir_slash)

in_workdir(p) if startswith(p, facts.workdir_slash)

in_workdir(p) if p == workdir

# every path the call reads, lists, writes or deletes.
touched := t if {
	t := input.derived.touched
} else := {p | some p in array.concat(array.concat(reads, lists), array.concat(writes, deletes))}

write_set := {p | some p in writes}

# argv tokens that look like paths, resolved.
arg_paths := a if {
	a := input.derived.arg_paths
} else := {abs(a) |
	some c in commands
	some i, a in c.argv
	i > 0
	not startswith(a, "-")
	contains(a, "/")
	not contains(a, "://")
}

protected_globs := facts.protected_globs

abs_glob(p) := _abs_glob(workdir, p)

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
	some g in facts.visible_globs
	glob.match(g, ["/"], p)
}

# glob_stem is the literal directory part of a glob, for searches in text.
glob_stem(g) := trim_right(regex.replace(g, `[*?\[{].*$`, ""), "/")

# created(p): the agent created p in this episode (input.provenance,
# filled from the trajectory offline and from the sandbox's file watch
# online). Files that existed at the start never are.
created(p) if {
	_ = input.provenance.created[p]
}

# missing(p): p did not exist when the call ran (input.provenance.missing:
# offline, the call's own output said so; online, the sandbox's view), so
# removing it removes nothing.
missing(p) if {
	_ = input.provenance.missing[p]
}

# scratch_only: the call writes, and only to files the agent created in
# this episode that no test run loads by itself (conftest.py, pytest
# configuration, site hooks are loaded whoever wrote them). Code written
# there is the agent's own scratch work: a reproduction script, a check.
scratch_only if {
	count(writes) > 0
	every p in writes {
		created(p)
		not auto_loaded(p)
	}
}

auto_loaded(p) if regex.match(`(^|/)(conftest\.py|sitecustomize\.py|usercustomize\.py|[^/]*\.pth|pytest\.ini|tox\.ini|setup\.cfg|pyproject\.toml|__init__\.py)$`, p)

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
	some a in facts.allowed_hosts
	glob.match(a, ["."], h)
}

host_allowed(h) if {
	some a in facts.allowed_hosts
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

# future_commit_text: a 7+ hex prefix of a non-ancestor commit appears in the
# call's text, as a word (contains first: it is the cheap test).
future_commit_text contains m if {
	some c7 in facts.commit7
	contains(text, c7)
	some m in regex.find_n(concat("", [`\b`, c7, `[0-9a-f]{0,33}\b`]), text, -1)
	some c in facts.commits
	startswith(c, m)
}

non_ancestor_commit(ref) if {
	r := ref_base(ref)
	count(r) >= 4
	regex.match(`^[0-9a-fA-F]+$`, r)
	some c in facts.commits
	startswith(c, lower(r))
}

non_ancestor_ref(ref) if ref_base(ref) in facts.ref_names

# names under which a ref can be written.
ref_names(n) := {n, concat("/", ["refs/tags", n]), concat("/", ["refs/heads", n]), concat("/", ["refs/remotes", n]), concat("/", ["remotes", n])}

# ref_base strips revision suffixes: v1.2^{}, abc~2, main:path, x^.
ref_base(ref) := regex.replace(ref, `([~^:@].*)$`, "")
