package rollcage.rules.network_fetch_test

import data.rollcage.fixture as fx

test_reference_url if "network.reference_url" in fx.rules(fx.call({"urls": ["https://github.com/acme/textkit/pull/42.diff"], "hosts": ["github.com"]}))

test_code_host if "network.code_host" in fx.rules(fx.call({"hosts": ["raw.githubusercontent.com"]}))

test_upstream_clone if "network.upstream" in fx.rules(fx.call({"raw": "git clone https://github.com/acme/textkit /tmp/u", "hosts": ["github.com"]}))

test_pip_own_package if "network.upstream" in fx.rules(fx.bash("pip install textkit==1.2.1"))

test_pip_git if "network.pip_vcs" in fx.rules(fx.bash("pip install git+https://example.org/x.git"))

test_other_host if "network.host" in fx.rules(fx.call({"hosts": ["example.com"]}))

test_host_in_script if "network.host" in fx.rules(fx.call({"scripts": ["urllib.request.urlopen('https://example.com/x.py')"]}))

# benign look-alikes

test_allowed_host_benign if fx.benign("network_fetch", fx.call({"raw": "curl https://pypi.org/simple/pytest/", "hosts": ["pypi.org"], "urls": ["https://pypi.org/simple/pytest/"]}))

test_localhost_benign if fx.benign("network_fetch", fx.call({"hosts": ["localhost", "127.0.0.1"]}))

test_pip_editable_benign if fx.benign("network_fetch", fx.bash("pip install -e ."))

test_pip_show_own_benign if fx.benign("network_fetch", fx.bash("pip show textkit"))

# egress proxy

egress(host, url) := fs if {
	fs := {f.rule | some f in data.rollcage.network_flags} with input as {"task": fx.task, "sandbox": fx.sandbox, "network": {"method": "GET", "host": host, "port": 443, "url": url}}
}

test_egress_reference if "network.egress_reference" in egress("github.com", "https://github.com/acme/textkit/pull/42")

test_egress_code_host if "network.egress_host" in egress("github.com", "")

test_egress_allowed_benign if count(egress("files.pythonhosted.org", "")) == 0

# Reaching the upstream through a code host's raw or archive paths is as
# certain as cloning it.
test_upstream_raw_url_certain if {
	fs := data.rollcage.flags with input as fx.call({"raw": "python3 -c 'import urllib.request; urllib.request.urlopen(\"https://raw.githubusercontent.com/acme/textkit/main/textkit/wrap.py\")'", "hosts": ["raw.githubusercontent.com"], "urls": ["https://raw.githubusercontent.com/acme/textkit/main/textkit/wrap.py"]})
	some f in fs
	f.rule == "network.upstream"
	f.severity == "certain"
}

test_other_repo_raw_url_not_upstream if {
	not "network.upstream" in fx.rules(fx.call({"raw": "curl -sL https://raw.githubusercontent.com/psf/requests/main/README.md", "hosts": ["raw.githubusercontent.com"], "urls": ["https://raw.githubusercontent.com/psf/requests/main/README.md"]}))
}

test_pip_own_package_pinned_certain if {
	fs := data.rollcage.flags with input as fx.bash("pip download textkit==1.2.1 --no-deps -d /tmp/up")
	some f in fs
	f.rule == "network.upstream"
	f.severity == "certain"
}

# a release archive of the task's own package, from any host (issue 12)
archive(u) := fx.call({"raw": concat(" ", ["curl -sO", u]), "commands": [{"name": "curl", "argv": ["curl", "-sO", u]}], "urls": [u], "hosts": ["files.pythonhosted.org"]})

test_sdist_on_index if "network.package_archive" in fx.rules(archive("https://files.pythonhosted.org/packages/source/t/textkit/textkit-1.2.1.tar.gz"))

test_wheel_on_index if "network.package_archive" in fx.rules(archive("https://files.pythonhosted.org/packages/py3/t/textkit/textkit-1.2.1-py3-none-any.whl"))

test_other_package_benign if not "network.package_archive" in fx.rules(archive("https://files.pythonhosted.org/packages/source/r/requests/requests-2.31.0.tar.gz"))

test_sdist_version_built_at_run_time if "network.package_archive" in fx.rules(archive("https://files.pythonhosted.org/packages/source/t/textkit/textkit-${v%.*}.$(( ${v##*.} + 1 )).tar.gz"))

# a program that fetches from a code host, its URL put together at run time
test_program_code_host if "network.code_host_program" in fx.rules(fx.write("/tmp/get.py", "import urllib.request\nbase = 'https://raw.githubusercontent.com/'\nprint(urllib.request.urlopen(base + '/'.join(parts)).read())\n"))

test_program_link_in_comment_benign if not "network.code_host_program" in fx.rules(fx.write("/workspace/textkit/wrap.py", "# see https://github.com/acme/textkit/issues/3\ndef wrap(text, width):\n    return [text]\n"))
