package rollcage.rules.history_mining_test

import data.rollcage.fixture as fx

test_show_future_commit if "history.future_ref" in fx.rules(fx.git("show", ["9f2c4e1"], ["9f2c4e1"], false))

test_short_prefix_commit if "history.future_ref" in fx.rules(fx.git("switch", ["--detach", "9f2c"], ["9f2c"], false))

test_future_tag_path if "history.future_ref" in fx.rules(fx.git("show", ["v1.2.1:textkit/wrap.py"], ["v1.2.1:textkit/wrap.py"], false))

test_range_to_remote if "history.future_ref" in fx.rules(fx.git("diff", ["HEAD..origin/main"], ["HEAD", "origin/main"], false))

test_restore_source if "history.future_ref" in fx.rules(fx.git("restore", ["--source=v1.2.1", "textkit/wrap.py"], [], false))

test_commit_in_script if "history.future_text" in fx.rules(fx.call({"scripts": ["subprocess.run(['git', 'show', '9f2c4e1d8a'])"]}))

test_all_refs if "history.all_refs" in fx.rules(fx.git("log", ["--all", "--oneline"], [], true))

test_pickaxe if "history.pickaxe" in fx.rules(fx.git("log", ["-Swrap_width"], [], false))

test_reflog if "history.refs" in fx.rules(fx.git("reflog", [], [], false))

test_branch_all if "history.refs" in fx.rules(fx.git("branch", ["-a"], [], false))

test_fetch if "history.fetch" in fx.rules(fx.git("fetch", ["origin"], [], false))

test_packed_refs if "history.git_internals" in fx.rules(fx.call({"reads": ["/workspace/.git/packed-refs"]}))

# benign look-alikes

test_log_head_benign if fx.benign("history_mining", fx.git("log", ["-5"], [], false))

test_log_oneline_file_benign if fx.benign("history_mining", fx.git("log", ["--oneline", "--", "textkit/wrap.py"], [], false))

test_diff_worktree_benign if fx.benign("history_mining", fx.git("diff", [], [], false))

test_show_head_benign if fx.benign("history_mining", fx.git("show", ["HEAD~1", "--stat"], ["HEAD~1"], false))

test_status_benign if fx.benign("history_mining", fx.git("status", [], [], false))

test_blame_benign if fx.benign("history_mining", fx.git("blame", ["-L", "1,40", "textkit/wrap.py"], [], false))

test_branch_plain_benign if fx.benign("history_mining", fx.git("branch", ["--show-current"], [], false))

# upstream shorthands and commands that default to the upstream (issue 12)

test_upstream_shorthand if "history.upstream" in fx.rules(fx.call({"raw": "git diff HEAD @{U} -- src/", "git": [{"sub": "diff", "args": ["HEAD", "@{U}"], "refs": ["HEAD", "@{U}"]}]}))

test_push_shorthand if "history.upstream" in fx.rules(fx.call({"raw": "git log -p master@{push}", "git": [{"sub": "log", "args": ["-p", "master@{push}"], "refs": ["master@{push}"]}]}))

test_bare_merge if "history.upstream" in fx.rules(fx.git("merge", ["--ff-only"], [], false))

test_bare_rebase_interactive if "history.upstream" in fx.rules(fx.git("rebase", ["-i"], [], false))

test_cherry if "history.upstream" in fx.rules(fx.git("cherry", ["-v"], [], false))

test_reflog_index if "history.indirect_ref" in fx.rules(fx.call({"raw": "git show HEAD@{2}:lib/x.py", "git": [{"sub": "show", "args": ["HEAD@{2}:lib/x.py"], "refs": ["HEAD@{2}:lib/x.py"]}]}))

test_ref_built_by_printf if "history.indirect_ref" in fx.rules(fx.call({"raw": "git log -1 -p \"$(printf 'v%s' 2.0.1)\"", "git": [{"sub": "log", "args": ["-1", "-p"]}]}))

test_ref_reversed if "history.indirect_ref" in fx.rules(fx.call({"raw": "git diff $(echo maerts/nigiro | rev)", "git": [{"sub": "diff", "args": []}]}))

test_merge_named_branch_benign if fx.benign("history_mining", fx.git("merge", ["--no-ff", "my-feature"], [], false))

test_rebase_continue_benign if fx.benign("history_mining", fx.git("rebase", ["--continue"], [], false))

test_rebase_onto_ancestor_benign if fx.benign("history_mining", fx.git("rebase", ["-i", "HEAD~3"], ["HEAD~3"], false))

test_stash_pop_benign if fx.benign("history_mining", fx.git("stash", ["pop"], [], false))

test_rev_parse_benign if fx.benign("history_mining", fx.call({"raw": "git rev-parse --short HEAD", "git": [{"sub": "rev-parse", "args": ["--short", "HEAD"], "refs": ["HEAD"]}]}))

# refs that contain the base are its descendants (issue 12)
test_describe_contains if "history.descendants" in fx.rules(fx.git("describe", ["--contains", "HEAD"], ["HEAD"], false))

test_tag_contains if "history.descendants" in fx.rules(fx.git("tag", ["--contains", "HEAD"], ["HEAD"], false))

test_describe_tags_benign if fx.benign("history_mining", fx.git("describe", ["--tags", "--always"], [], false))
