package hostside

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// ContainerName builds rollcage-<episode>-<token>, with the episode id
// reduced to the characters container engines accept in names.
func ContainerName(episode, token string) string {
	ep := NameChars(episode, 48) // names stay readable; the label keeps the full id
	if ep == "" {
		return "rollcage-" + token
	}
	return "rollcage-" + ep + "-" + token
}

// NameChars reduces s to at most n of the characters both container
// engines and Kubernetes label values accept, [A-Za-z0-9_.-], every other
// byte a '-', starting and ending alphanumeric.
func NameChars(s string, n int) string {
	b := []byte(s)
	if len(b) > n {
		b = b[:n]
	}
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
		default:
			b[i] = '-'
		}
	}
	return strings.Trim(string(b), "-._")
}

// RandomToken is 8 hex digits: enough to keep names unique among the
// containers of one host.
func RandomToken() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

// ReapDirs removes the run directories in stateDir whose owner is gone,
// except those named in inUse (a container of another boot or pid
// namespace still holds them). It returns how many it removed.
func ReapDirs(stateDir string, inUse map[string]bool, log *slog.Logger) (int, error) {
	if stateDir == "" {
		return 0, nil
	}
	entries, err := os.ReadDir(stateDir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reap: %w", err)
	}
	removed := 0
	var errs []error
	for _, e := range entries {
		o, ok := OwnerFromDirName(e.Name())
		if !ok || !e.IsDir() || o.Alive() || inUse[e.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(stateDir, e.Name())); err != nil {
			errs = append(errs, fmt.Errorf("reap: %w", err))
			continue
		}
		removed++
		log.Info("reaped run dir", "dir", e.Name(), "owner_pid", o.PID)
	}
	return removed, errors.Join(errs...)
}
