package hostside

import (
	"strings"
	"testing"
)

func TestContainerName(t *testing.T) {
	tests := []struct {
		episode, want string
	}{
		{"ep-1", "rollcage-ep-1-abcd1234"},
		{"", "rollcage-abcd1234"},
		{"task/42 #3", "rollcage-task-42--3-abcd1234"},
		{"../../etc", "rollcage-etc-abcd1234"},
		{strings.Repeat("x", 100), "rollcage-" + strings.Repeat("x", 48) + "-abcd1234"},
	}
	for _, tc := range tests {
		if got := ContainerName(tc.episode, "abcd1234"); got != tc.want {
			t.Errorf("ContainerName(%q) = %q, want %q", tc.episode, got, tc.want)
		}
	}
}

func TestParseStatStart(t *testing.T) {
	tests := []struct {
		name, stat string
		want       uint64
		wantErr    bool
	}{
		{"plain", "1234 (rollcage) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 8 0 987654 1000000 500", 987654, false},
		{"parens and spaces in comm", "1234 (a) b (c) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 8 0 42 1000000 500", 42, false},
		{"truncated", "1234 (x) S 1 2", 0, true},
		{"garbage", "no parens here", 0, true},
	}
	for _, tc := range tests {
		got, err := parseStatStart([]byte(tc.stat))
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%s: got %d, %v; want %d, err %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestOwner(t *testing.T) {
	self, err := SelfOwner()
	if err != nil {
		t.Fatal(err)
	}
	if !self.Alive() {
		t.Error("this process is not alive by its own owner record")
	}
	stale := self
	stale.Start++ // same pid, another process
	if stale.Alive() {
		t.Error("a reused pid with another start time counts as alive")
	}
	got, ok := OwnerFromLabels(self.Labels())
	if !ok || got != self {
		t.Errorf("labels round trip: %+v, %v; want %+v", got, ok, self)
	}
	fromDir, ok := OwnerFromDirName(self.DirName("abcd"))
	if want := (Owner{PID: self.PID, Start: self.Start}); !ok || fromDir != want {
		t.Errorf("dir name round trip: %+v, %v; want %+v", fromDir, ok, want)
	}
	for _, bad := range []string{"x", "1.2", "a.b.c", "1.2."} {
		if _, ok := OwnerFromDirName(bad); ok {
			t.Errorf("OwnerFromDirName(%q) accepted", bad)
		}
	}
}
