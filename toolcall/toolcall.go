package toolcall

import "encoding/json"

// Call is one call of a tool by the policy, as it reaches the monitor.
// Its JSON is the wire format of the gateway API, the trajectory files and
// the rules' input alike.
type Call struct {
	EpisodeID string `json:"episode_id,omitempty"`
	Session   string `json:"session,omitempty"`    // shell session; "" is "default"
	RequestID string `json:"request_id,omitempty"` // idempotency key
	// User runs a bash call as one of the sandbox's users (by name) in a
	// root sandbox (E2B's per-command user); "" is the sandbox's own.
	User string          `json:"user,omitempty"`
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Normalized is what the monitor makes of a call before the rules see it.
// Paths are absolute (resolved against the session's directory); lists are
// deduplicated and in order of first appearance.
type Normalized struct {
	Tool string `json:"tool"`
	// Raw is the command text for bash, the path for file tools, the JSON
	// args for generic tools. It always reaches the rules, parsed or not.
	Raw string `json:"raw"`
	// Unparsed is true when the bash text did not parse; ParseError says why.
	// The rules still see Raw and must treat it with suspicion.
	Unparsed   bool   `json:"unparsed,omitempty"`
	ParseError string `json:"parse_error,omitempty"`
	Cwd        string `json:"cwd,omitempty"`

	// Commands are every simple command found, including those nested in
	// pipelines, subshells, command substitutions, bash -c / sh -c / eval
	// scripts and heredocs fed to shells.
	Commands []Command `json:"commands,omitempty"`

	Reads   []string `json:"reads,omitempty"`   // files read (cat, less, grep FILE, python open(), redirections <, read_file)
	Writes  []string `json:"writes,omitempty"`  // files written or created (>, tee, sed -i, cp/mv dest, write_file, edit)
	Deletes []string `json:"deletes,omitempty"` // rm, unlink, git rm, mv source
	Lists   []string `json:"lists,omitempty"`   // directories listed or searched (ls, find, grep -r, list_dir)

	Hosts []string `json:"hosts,omitempty"` // network hosts contacted (lowercase, no port)
	URLs  []string `json:"urls,omitempty"`  // full URLs seen as network targets

	Git []GitOp `json:"git,omitempty"`

	// Packages are package specs named to installers (pip, npm, yarn, go
	// get) as written: "requests==2.31", "left-pad", "golang.org/x/net@latest".
	Packages []string `json:"packages,omitempty"`

	// Content is the text written by write_file / edit (New) and by heredocs
	// or echo/printf redirected into files, for content rules.
	Content string `json:"content,omitempty"`
	// OldContent is the text an edit replaces (EditArgs.Old).
	OldContent string `json:"old_content,omitempty"`
	// Scripts are inline program texts found (python -c, perl -e, node -e,
	// heredocs fed to interpreters), for rules that look inside them.
	Scripts []string `json:"scripts,omitempty"`
	// Env are environment assignments seen (FOO=bar cmd, export FOO=bar).
	Env map[string]string `json:"env,omitempty"`
}

// Command is one simple command.
type Command struct {
	Name string   `json:"name"` // argv[0] without directory (python3, git, cat)
	Argv []string `json:"argv"`
	// Via says how it was reached: "" top level, "pipe", "subshell",
	// "subst", "bash -c", "eval", "heredoc", "xargs", "find -exec";
	// also "stdin" (a script piped into a shell), "script" (a shell command
	// inside a python/perl/... script) and a wrapper's name ("sudo", "env",
	// "timeout", ...) for the command it runs.
	Via string `json:"via,omitempty"`
}

// GitOp is one git invocation.
type GitOp struct {
	Sub     string   `json:"sub"`                // log, show, diff, checkout, fetch, reflog, cherry-pick, ...
	Args    []string `json:"args"`               // arguments after the subcommand
	Flags   []string `json:"flags,omitempty"`    // those starting with -
	Refs    []string `json:"refs,omitempty"`     // revisions named (branches, tags, hashes, HEAD~2, a..b split)
	AllRefs bool     `json:"all_refs,omitempty"` // --all, --branches, --tags, --remotes, --reflog, -g
}
