package normalize

import "testing"

func TestLeadingOutput(t *testing.T) {
	tests := []struct {
		src, want string
	}{
		{"cat /opt/grader/tests/test_x.py", ""},
		{"echo start; cat /opt/grader/tests/test_x.py", "start\n"},
		{"echo '== tests ==' && echo \"two  words\" && cat x", "== tests ==\ntwo  words\n"},
		{"echo a\necho -n b\ncat x", "a\nb"},
		{"echo -e 'a\\tb'; cat x", "a\tb\n"},
		{"printf '%s=%s\\n' k v; cat x", "k=v\n"},
		{"printf '100%%\\n'; cat x", "100%\n"},
		{"true && : && echo ok; cat x", "ok\n"},
		{"echo a; ls; echo b; cat x", "a\n"}, // ls's output is not known: stop there
		{"echo $HOME; cat x", ""},
		{"echo \"$HOME\"; cat x", ""},
		{"echo $(cat x)", ""},
		{"echo *.py; cat x", ""},
		{"echo ~; cat x", ""},
		{"echo a > f; cat x", ""},
		{"echo a | cat; cat x", ""},
		{"echo a || cat x", ""},
		{"X=1 echo a; cat x", ""},
		{"printf '%d\\n' 3; cat x", ""},
		{"printf '%s %s\\n' one; cat x", ""},
		{"echo -e 'a\\cb'; cat x", ""},
		{"echo a && ls && cat x", "a\n"},
		{"echo 'unterminated", ""},
	}
	for _, tc := range tests {
		if got := LeadingOutput(tc.src); got != tc.want {
			t.Errorf("LeadingOutput(%q) = %q, want %q", tc.src, got, tc.want)
		}
	}
}
