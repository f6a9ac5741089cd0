package rules

import (
	"context"
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// bundleWith is the default bundle with files added under policy/, as if
// they shipped with it.
func bundleWith(t *testing.T, add map[string]string) fs.FS {
	t.Helper()
	m := fstest.MapFS{}
	err := fs.WalkDir(policyFS, "policy", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(policyFS, p)
		m[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, src := range add {
		m["policy/"+p] = &fstest.MapFile{Data: []byte(src)}
	}
	return m
}

// TestNewDefaultRuleGated: a rule added to a default package whose calls
// no Go list describes (history mining, network fetching and
// special-casing used to run only for calls that mention git, URLs or
// carry code, the chained rules only after discoveries) fires on a call holding its literal, with the prefilter on
// as with it off: the packages' gates come from their rules alone.
func TestNewDefaultRuleGated(t *testing.T) {
	rule := func(pkg, id, cmd string) string {
		return `package rollcage.rules.` + pkg + `

import data.rollcage.lib

# METADATA
# title: ` + cmd + `
# custom: {id: ` + id + `, category: ` + pkg + `, severity: suspicious}
flag contains lib.flag("` + id + `", "` + pkg + `", "suspicious", "runs ` + cmd + `", c.name) if {
	some c in lib.commands
	c.name == "` + cmd + `"
}
`
	}
	bundle := bundleWith(t, map[string]string{
		"zz_history.rego": rule("history_mining", "history.zz_quarry", "quarrytool"),
		"zz_network.rego": rule("network_fetch", "network.zz_fetchling", "fetchling"),
		"zz_special.rego": rule("special_casing", "special.zz_shimmer", "shimmerctl"),
		"zz_chained.rego": rule("chained_discovery", "chained.zz_kiln", "kilnctl"),
	})
	ctx := context.Background()
	on, err := newEngineFS(ctx, Config{}, bundle)
	if err != nil {
		t.Fatal(err)
	}
	if on.pre == nil {
		t.Fatal("the bundle with rules added has no prefilter; the test would not test the gates")
	}
	off, err := newEngineFS(ctx, Config{DisablePrefilter: true}, bundle)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		cmd, id string
	}{
		{"quarrytool", "history.zz_quarry"},
		{"fetchling", "network.zz_fetchling"},
		{"shimmerctl", "special.zz_shimmer"},
		{"kilnctl", "chained.zz_kiln"}, // with no discoveries before it
	}
	for _, tc := range tests {
		n := map[string]any{"tool": "bash", "raw": tc.cmd + " --deep .", "cwd": "/workspace",
			"commands": []any{map[string]any{"name": tc.cmd, "argv": []string{tc.cmd, "--deep", "."}}}}
		call := map[string]any{"tool": "bash", "arguments": map[string]any{"command": tc.cmd + " --deep ."}}
		got, err := on.NewEpisode(ctx, demoTask, demoSandbox).Eval(ctx, call, n)
		if err != nil {
			t.Fatal(err)
		}
		want, err := off.NewEpisode(ctx, demoTask, demoSandbox).Eval(ctx, call, n)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: prefiltered flags differ from every rule's (-off +on):\n%s", tc.cmd, diff)
		}
		fired := false
		for _, f := range got {
			fired = fired || f.Rule == tc.id
		}
		if !fired {
			t.Errorf("%s: %s did not fire with the prefilter on (flags %v)", tc.cmd, tc.id, got)
		}
	}
}
