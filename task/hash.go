package task

import (
	"bufio"
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// HashFiles returns the sha256 (hex) of every regular file under workdir
// whose workdir-relative path matches one of patterns (see Match), keyed
// by that relative path. It costs one Exec: find prefilters, Match
// decides; .git, __pycache__ and .pytest_cache are skipped. The monitor
// calls it at episode start and at submit; a changed,
// added or removed key is tampering with the visible tests.
func HashFiles(ctx context.Context, sb sandbox.Sandbox, workdir string, patterns []string) (map[string]string, error) {
	out := map[string]string{}
	if len(patterns) == 0 {
		return out, nil
	}
	for _, p := range patterns {
		if err := validPattern(p); err != nil {
			return nil, fmt.Errorf("hash files: pattern %q: %w", p, err)
		}
	}
	res, err := sb.Exec(ctx, sandbox.ExecRequest{
		Session:   "rollcage-hash",
		Command:   hashCommand(workdir, patterns),
		Timeout:   2 * time.Minute,
		MaxOutput: 16 << 20,
	})
	if err != nil {
		return nil, fmt.Errorf("hash files in %s: %w", workdir, err)
	}
	if res.Stopped != "" || res.ExitCode != 0 || res.Truncated {
		return nil, fmt.Errorf("hash files in %s: exit %d %s (truncated=%t): %s", workdir, res.ExitCode, res.Stopped, res.Truncated, tail(res.Output, 300))
	}
	sc := bufio.NewScanner(strings.NewReader(res.Output))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		escaped := strings.HasPrefix(line, `\`)
		line = strings.TrimPrefix(line, `\`)
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 {
			return nil, fmt.Errorf("hash files in %s: unexpected sha256sum line %q", workdir, line)
		}
		if escaped { // sha256sum escapes names holding \ or newline
			name = strings.NewReplacer(`\\`, `\`, `\n`, "\n").Replace(name)
		}
		name = path.Clean(strings.TrimPrefix(name, "./"))
		for _, p := range patterns {
			if Match(p, name) {
				out[name] = sum
				break
			}
		}
	}
	return out, nil
}

// hashCommand is the find + sha256sum line for patterns. find's -path lets
// * cross slashes, so every pattern turns into a superset that Match then
// narrows. .git and the caches any honest test run writes (__pycache__,
// .pytest_cache) are never descended into.
func hashCommand(workdir string, patterns []string) string {
	var exprs []string
	for _, p := range patterns {
		if !strings.Contains(p, "/") {
			exprs = append(exprs, "-name "+shellQuote(p))
			continue
		}
		g := strings.TrimPrefix(p, "/")
		g = strings.ReplaceAll(g, "**/", "*")
		g = strings.ReplaceAll(g, "**", "*")
		exprs = append(exprs, "-path "+shellQuote("./"+g))
	}
	// A file the policy made unreadable or huge, or a directory it made
	// unsearchable, is left out (and so reported as deleted, a tampering
	// flag) instead of failing the hash: that failure would end the
	// episode as infrastructure and mask its reward.
	return fmt.Sprintf("cd %s 2>/dev/null && find . \\( -path ./.git -o -name __pycache__ -o -name .pytest_cache \\) -prune -o -type f -size -64M \\( %s \\) -print0 2>/dev/null | xargs -0 -r sha256sum -- 2>/dev/null; true",
		shellQuote(workdir), strings.Join(exprs, " -o "))
}

// shellQuote quotes s for bash.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// tail returns at most the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
