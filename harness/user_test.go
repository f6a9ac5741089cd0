package harness

import (
	"context"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/task"
)

// TestSandboxUser: an episode's sandbox user reaches its sandbox's spec;
// an unknown one is refused, and so is a root sandbox for a task graded
// by snapshot (its root could own what the grader runs).
func TestSandboxUser(t *testing.T) {
	snap := fakeTask
	snap.Grade = task.GradeSnapshot
	tests := []struct {
		name    string
		cfgUser string
		user    string
		tk      task.Task
		want    string // error text; "" for a start whose spec has wantUser
		wantUsr string
	}{
		{"root by meta", "", sandbox.UserRoot, fakeTask, "", sandbox.UserRoot},
		{"root by config", sandbox.UserRoot, "", fakeTask, "", sandbox.UserRoot},
		{"default", "", "", fakeTask, "", sandbox.UserDefault},
		{"unknown", "", "admin", fakeTask, `sandbox user "admin"`, ""},
		{"root with snapshot grading", "", sandbox.UserRoot, snap, "grades a snapshot", ""},
	}
	for _, tc := range tests {
		b := &fake.Backend{}
		r, _ := newTestRunner(t, Config{Backend: b, SandboxUser: tc.cfgUser})
		ep, err := r.Start(context.Background(), tc.tk, fakeHidden, EpisodeMeta{SandboxUser: tc.user})
		if tc.want != "" {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: Start: %v, want an error with %q", tc.name, err, tc.want)
			}
			if len(b.Created()) != 0 {
				t.Errorf("%s: a refused start created %d sandboxes", tc.name, len(b.Created()))
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: Start: %v", tc.name, err)
			continue
		}
		if got := b.Created()[0].Spec().User; got != tc.wantUsr {
			t.Errorf("%s: sandbox user %q, want %q", tc.name, got, tc.wantUsr)
		}
		ep.Close(context.Background())
	}
}
