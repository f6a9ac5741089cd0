package monitor

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// probeSession is the shell session the episode-start probe runs in, apart
// from the agent's sessions.
const probeSession = "rollcage-probe"

// ProbeScript finds what of the repository's history lies outside the base
// commit's ancestry, the upstream fix's added lines, message and blob ids,
// and the text of the repository at base (so secret lines already visible
// there are never taken for leaks). Its arguments are the workdir, the base
// commit (empty: HEAD) and the upstream fix ref (may be empty); it is POSIX
// sh and prints lines ParseProbe reads. It runs once per sealed image before
// sealing (sandbox.SealSpec.Probe), or, on unsealed images, in each
// sandbox at episode start (ProbeRepo).
const ProbeScript = `cd "$1" 2>/dev/null || exit 0
git rev-parse --git-dir >/dev/null 2>&1 || exit 0
base=$(git rev-parse --verify -q "${2:-HEAD}^{commit}") || { echo "nobase"; exit 0; }
echo "base $base"
git rev-list --all --reflog --not "$base" 2>/dev/null | sed 's/^/commit /'
git for-each-ref --format='%(objectname) %(refname)' | while read -r obj ref; do
  git merge-base --is-ancestor "$obj" "$base" 2>/dev/null || echo "ref $ref"
done
if [ -n "$3" ] && git rev-parse -q --verify "$3^{commit}" >/dev/null; then
  git diff "$base" "$3" 2>/dev/null | grep '^+' | grep -v '^+++' | sed 's/^/fix /'
  git log -1 --format=%B "$3" 2>/dev/null | sed -n 's/^\(..*\)$/msg \1/p'
  git diff --raw --no-abbrev "$base" "$3" 2>/dev/null | awk '$4 !~ /^0+$/ {print "blob " $4}'
fi
echo "--- base text ---"
git ls-files -z | head -c 100000 | xargs -0 cat 2>/dev/null | head -c 2000000
`

// Probe is what the probe learnt.
type Probe struct {
	BaseCommit string
	Facts      Facts    // NonAncestorCommits and NonAncestorRefs filled
	FixDiff    string   // the upstream fix's added lines
	FixMessage []string // the non-empty lines of the fix commit's message
	FixBlobs   []string // ids of the blobs the fix adds or changes
	BaseText   string   // the tracked files at base, concatenated
}

// ProbeRepo inspects the task's repository in the sandbox at episode start
// (unsealed images only: a sealed repository has nothing to find). A
// workdir that is not a git repository gives an empty Probe.
func ProbeRepo(ctx context.Context, sb sandbox.Sandbox, workdir, base, fixRef string) (Probe, error) {
	cmd := fmt.Sprintf("bash -c %s rollcage-probe %s %s %s", shellQuote(ProbeScript), shellQuote(workdir), shellQuote(base), shellQuote(fixRef))
	r, err := sb.Exec(ctx, sandbox.ExecRequest{Session: probeSession, Command: cmd, Timeout: 60 * time.Second, MaxOutput: 8 << 20})
	if err != nil {
		return Probe{}, fmt.Errorf("monitor: probe repo %s: %w", workdir, err)
	}
	if r.ExitCode != 0 || r.Stopped != "" {
		return Probe{}, fmt.Errorf("monitor: probe repo %s: exit %d %s: %s", workdir, r.ExitCode, r.Stopped, clip(r.Output, 300))
	}
	return ParseProbe(r.Output, workdir, base)
}

// ParseProbe reads ProbeScript's output.
func ParseProbe(out, workdir, base string) (Probe, error) {
	var p Probe
	var fix, text strings.Builder
	inText := false
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if inText {
			text.WriteString(l)
			text.WriteByte('\n')
			continue
		}
		kind, rest, _ := strings.Cut(l, " ")
		switch kind {
		case "nobase":
			return Probe{}, fmt.Errorf("monitor: probe repo %s: base commit %q not found", workdir, base)
		case "base":
			p.BaseCommit = rest
		case "commit":
			p.Facts.NonAncestorCommits = append(p.Facts.NonAncestorCommits, rest)
		case "ref":
			p.Facts.NonAncestorRefs = append(p.Facts.NonAncestorRefs, refNames(rest)...)
		case "fix":
			fix.WriteString(rest)
			fix.WriteByte('\n')
		case "msg":
			p.FixMessage = append(p.FixMessage, rest)
		case "blob":
			p.FixBlobs = append(p.FixBlobs, rest)
		case "---":
			inText = true
		}
	}
	if err := sc.Err(); err != nil {
		return Probe{}, fmt.Errorf("monitor: probe repo %s: read output: %w", workdir, err)
	}
	p.FixDiff, p.BaseText = fix.String(), text.String()
	return p, nil
}

// refNames are the names a ref is known by: refs/tags/v1.2 → v1.2,
// tags/v1.2, refs/tags/v1.2.
func refNames(full string) []string {
	names := []string{full}
	for _, pre := range []string{"refs/heads/", "refs/remotes/", "refs/tags/"} {
		if short, ok := strings.CutPrefix(full, pre); ok {
			names = append(names, short, strings.TrimPrefix(full, "refs/"))
		}
	}
	return names
}
