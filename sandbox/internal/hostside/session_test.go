package hostside

import "testing"

func TestRestoreScript(t *testing.T) {
	for _, tc := range []struct{ name, out, want string }{
		{
			"variables filtered, the rest kept",
			"declare -x HOME=\"/home/u\"\ndeclare -rx RO=\"1\"\ndeclare -x PWD=\"/w\"\ndeclare -x OLDPWD\ndeclare -x SHLVL=\"1\"\ndeclare -x _=\"/bin/x\"\ndeclare -x PWDX=\"kept\"\n" +
				dumpVarsEnd + "\nf () \n{ \n    echo hi\n}\nshopt -s extglob\nset -o pipefail\n",
			"declare -x HOME=\"/home/u\"\ndeclare -x PWDX=\"kept\"\nf () \n{ \n    echo hi\n}\nshopt -s extglob\nset -o pipefail\n",
		},
		{
			"a function's line that looks like a readonly variable is kept",
			"declare -x A=\"1\"\n" + dumpVarsEnd + "\ng () \n{ \ndeclare -r inner=1\n}\n",
			"declare -x A=\"1\"\ng () \n{ \ndeclare -r inner=1\n}\n",
		},
		{"no marker: all lines are variables", "declare -rx RO=\"1\"\ndeclare -x B=\"2\"\n", "declare -x B=\"2\"\n"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := restoreScript(tc.out); got != tc.want {
				t.Errorf("restoreScript:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}
