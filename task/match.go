package task

import (
	"errors"
	"path"
	"strings"
)

// Match reports whether name matches the glob pattern. Patterns use
// path.Match syntax per segment, plus "**", which matches any number of
// segments (none included). A pattern without a slash matches a base name
// at any depth, as in .gitignore. Absolute patterns match absolute names;
// relative ones match names relative to the workdir; a pattern starting
// with ** matches both.
func Match(pattern, name string) bool {
	name = path.Clean(name)
	if !strings.Contains(pattern, "/") {
		ok, _ := path.Match(pattern, path.Base(name))
		return ok
	}
	// A leading ** matches any prefix, absolute or not.
	if !strings.HasPrefix(pattern, "**") && strings.HasPrefix(pattern, "/") != strings.HasPrefix(name, "/") {
		return false
	}
	p := strings.Split(strings.Trim(pattern, "/"), "/")
	n := strings.Split(strings.Trim(name, "/"), "/")
	return matchSegs(p, n)
}

func matchSegs(p, n []string) bool {
	for len(p) > 0 {
		if p[0] == "**" {
			rest := p[1:]
			for i := 0; i <= len(n); i++ {
				if matchSegs(rest, n[i:]) {
					return true
				}
			}
			return false
		}
		if len(n) == 0 {
			return false
		}
		if ok, _ := path.Match(p[0], n[0]); !ok {
			return false
		}
		p, n = p[1:], n[1:]
	}
	return len(n) == 0
}

// validPattern reports whether pattern is usable by Match.
func validPattern(pattern string) error {
	if strings.TrimSpace(pattern) == "" {
		return errors.New("empty")
	}
	for _, seg := range strings.Split(pattern, "/") {
		if seg == "**" {
			continue
		}
		if strings.Contains(seg, "**") {
			return errors.New(`"**" must be a whole path segment, as in a/**/b`)
		}
		if _, err := path.Match(seg, ""); err != nil {
			return err
		}
	}
	return nil
}
