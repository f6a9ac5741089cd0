# A user policy of several rule shapes, each with the gate its METADATA
# declares, written as the default bundle's rules are. The fuzz and corpus
# tests hold gated evaluation of it equal to evaluating every rule.
package rollcage.rules.team_user

import data.rollcage.lib

cat := "environment_probing"

# METADATA
# title: a command name
# custom:
#   id: team.strace
#   category: environment_probing
#   severity: suspicious
#   gate: {commands: [strace, ltrace, gdb]}
flag contains lib.flag("team.strace", cat, "suspicious", "runs strace", c.name) if {
	some c in lib.commands
	c.name in {"strace", "ltrace", "gdb"}
}

# METADATA
# title: a case-insensitive regexp over the call's text, with a negation after it
# custom:
#   id: team.ssh_key
#   category: environment_probing
#   severity: suspicious
#   gate: {text: [.ssh/id_], match: {text: '(?i)\.ssh/id_(rsa|ed25519|ecdsa)(\.pub)?\b'}}
flag contains lib.flag("team.ssh_key", cat, "suspicious", "reads an SSH key", m) if {
	some m in regex.find_n(`(?i)\.ssh/id_(rsa|ed25519|ecdsa)(\.pub)?\b`, lib.text, 1)
	not endswith(m, ".pub")
}

# METADATA
# title: a path prefix through a helper function with two definitions
# custom:
#   id: team.secrets
#   category: environment_probing
#   severity: suspicious
#   gate: {has: [paths], text: [/etc/shadow, /run/secrets/]}
flag contains lib.flag("team.secrets", cat, "suspicious", "touches secrets", p) if {
	some p in lib.touched
	secret(p)
}

secret(p) if startswith(p, "/etc/shadow")

secret(p) if regex.match(`^/run/secrets/`, p)

# METADATA
# title: an argument word, lowercased, compared with a constant
# custom:
#   id: team.pip_upgrade
#   category: environment_probing
#   severity: suspicious
#   gate: {text: [[--upgrade], [pip]]}
flag contains lib.flag("team.pip_upgrade", cat, "suspicious", "upgrades pip", concat(" ", c.argv)) if {
	some c in lib.commands
	some a in c.argv
	lower(a) == "--upgrade"
	contains(concat(" ", c.argv), "pip")
}

# METADATA
# title: written code that reaches for the environment
# custom:
#   id: team.env_dump
#   category: environment_probing
#   severity: suspicious
#   gate: {has: [code], match: {code: 'os\.environ\.(copy|items)\(\)|printenv'}}
flag contains lib.flag("team.env_dump", cat, "suspicious", "dumps the environment", m) if {
	some m in regex.find_n(`os\.environ\.(copy|items)\(\)|printenv`, lib.code, 1)
}

# A phrase over the joined argv, without a gate: a rule with no gate runs
# on every call, and so does its package.
flag contains lib.flag("team.editable", cat, "suspicious", "installs editable", concat(" ", c.argv)) if {
	some c in lib.commands
	contains(concat(" ", c.argv), "install -e")
}
