# A user policy of several rule shapes, none with a feature test: the
# engine derives each rule's gate from its body (derive.go). The fuzz and
# corpus tests hold gated evaluation of it equal to evaluating every rule.
package rollcage.rules.team_user

import data.rollcage.lib

cat := "environment_probing"

# a command name
flag contains lib.flag("team.strace", cat, "suspicious", "runs strace", c.name) if {
	some c in lib.commands
	c.name in {"strace", "ltrace", "gdb"}
}

# a case-insensitive regexp over the call's text, with a negation after it
flag contains lib.flag("team.ssh_key", cat, "suspicious", "reads an SSH key", m) if {
	some m in regex.find_n(`(?i)\.ssh/id_(rsa|ed25519|ecdsa)(\.pub)?\b`, lib.text, 1)
	not endswith(m, ".pub")
}

# a path prefix through a helper function with two definitions
flag contains lib.flag("team.secrets", cat, "suspicious", "touches secrets", p) if {
	some p in lib.touched
	secret(p)
}

secret(p) if startswith(p, "/etc/shadow")

secret(p) if regex.match(`^/run/secrets/`, p)

# an argument word, lowercased, compared with a constant
flag contains lib.flag("team.pip_upgrade", cat, "suspicious", "upgrades pip", concat(" ", c.argv)) if {
	some c in lib.commands
	some a in c.argv
	lower(a) == "--upgrade"
	contains(concat(" ", c.argv), "pip")
}

# written code that reaches for the environment
flag contains lib.flag("team.env_dump", cat, "suspicious", "dumps the environment", m) if {
	some m in regex.find_n(`os\.environ\.(copy|items)\(\)|printenv`, lib.code, 1)
}

# a phrase over the joined argv: the deriver cuts it at the join's space
flag contains lib.flag("team.editable", cat, "suspicious", "installs editable", concat(" ", c.argv)) if {
	some c in lib.commands
	contains(concat(" ", c.argv), "install -e")
}
