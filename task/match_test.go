package task

import "testing"

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"tests/**", "tests/test_wrap.py", true},
		{"tests/**", "tests/unit/deep/test_x.py", true},
		{"tests/**", "src/tests.py", false},
		{"tests/**", "tests", true}, // ** matches no segment too
		{"conftest.py", "conftest.py", true},
		{"conftest.py", "tests/conftest.py", true}, // no slash: any depth
		{"conftest.py", "conftest.pyc", false},
		{".github/**", ".github/workflows/ci.yml", true},
		{"/opt/grader/**", "/opt/grader/tests/test_hidden.py", true},
		{"/opt/grader/**", "/opt/graders/x", false},
		{"/opt/grader/**", "opt/grader/x", false}, // absolute vs relative
		{"**/hidden/**", "/workspace/tests/hidden/test_a.py", true},
		{"**/hidden/**", "hidden/x.py", true},
		{"**/hidden/**", "/workspace/unhidden/x.py", false},
		{"**/*hidden*test*", "/tmp/my_hidden_tests.py", true},
		{"**/*hidden*test*", "/opt/grader/tests/test_hidden.py", false},
		{"**/test_hidden*", "/opt/grader/tests/test_hidden.py", true},
		{"tests/*.py", "tests/a/b.py", false},
		{"tests/./x.py", "tests/x.py", false}, // patterns are not cleaned
		{"tests/**", "./tests/x.py", true},    // names are
	}
	for _, tc := range tests {
		if got := Match(tc.pattern, tc.name); got != tc.want {
			t.Errorf("Match(%q, %q) = %t, want %t", tc.pattern, tc.name, got, tc.want)
		}
	}
}
