"""Tests of the rollcage Python client against a real rollcage serve and
Docker sandboxes (started by clients/python/client_test.go, which sets
ROLLCAGE_URL, ROLLCAGE_ADMIN_TOKEN, ROLLCAGE_TASK_ID and ROLLCAGE_MODEL
and puts a scripted OpenAI-compatible model behind --policy-url)."""

import asyncio
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import rollcage  # noqa: E402

URL = os.environ.get("ROLLCAGE_URL", "")
ADMIN = os.environ.get("ROLLCAGE_ADMIN_TOKEN", "")
TASK = os.environ.get("ROLLCAGE_TASK_ID", "")
MODEL = os.environ.get("ROLLCAGE_MODEL", "policy")


@unittest.skipUnless(URL and ADMIN and TASK, "needs ROLLCAGE_URL, ROLLCAGE_ADMIN_TOKEN, ROLLCAGE_TASK_ID (run go test ./clients/python)")
class ClientTest(unittest.TestCase):
    def setUp(self):
        self.client = rollcage.Client(URL, ADMIN)

    def test_bad_input(self):
        with self.assertRaises(ValueError):
            rollcage.Client("localhost:8080", ADMIN)
        with self.assertRaises(rollcage.RollcageError) as cm:
            self.client.create_episode(task_id="no-such-task")
        self.assertEqual(cm.exception.status, 400)
        self.assertIn("unknown task", cm.exception.message)
        with self.assertRaises(rollcage.RollcageError) as cm:
            rollcage.Client(URL, "wrong-token").create_episode(task_id=TASK)
        self.assertEqual(cm.exception.status, 401)

    def test_episode_agent_loop(self):
        """The agent loop through the recording proxy resolves the task;
        the stream, the trajectory and the samples agree."""
        ep = self.client.create_episode(task_id=TASK, model=MODEL)
        self.assertTrue(ep.token.startswith("rce_"))
        self.assertIn("bash", [t["function"]["name"] for t in ep.tools])
        # An auxiliary call (a harness naming its task) through the same
        # proxy: recorded, but no sample of the episode unless asked.
        rollcage.ChatModel(ep.model_base_url, ep.token, MODEL, auxiliary="title").complete(
            [{"role": "user", "content": "Name this task in five words."}])
        run = rollcage.run_episode(ep, rollcage.ChatModel(ep.model_base_url, ep.token, MODEL, temperature=1.0))
        o = run["outcome"]
        self.assertTrue(o["resolved"], o)
        self.assertEqual(o["label"], "clean", o)
        self.assertEqual(o["failure_class"], "", o)
        self.assertGreater(run["turns"], 2)
        types = [ev["type"] for ev in ep.stream()]
        self.assertEqual(types[0], "episode_start")
        self.assertEqual(types[-1], "episode_end")
        self.assertEqual(types.count("model_turn"), run["turns"] + 1)
        self.assertEqual(types, [ev["type"] for ev in ep.events()])
        samples = ep.samples()
        self.assertTrue(samples)
        self.assertEqual([x for x in samples if x.get("auxiliary")], [])
        aux = [x for x in ep.samples(auxiliary=True) if x.get("auxiliary")]
        self.assertEqual([(x["auxiliary"], x["turn"], x["messages"][-2]["content"]) for x in aux],
                         [("client", 0, "Name this task in five words.")])
        s = samples[-1]
        self.assertEqual(s["episode_id"], ep.id)
        self.assertEqual(s["reward"], 1)
        self.assertEqual(s["training_reward"], 1)
        self.assertFalse(rollcage.masked(s))
        # The scripted model's completion ids (1000 + turn) came through.
        # Samples are chains (a prompt that does not extend the last turn
        # starts a new one), so look across all of them.
        ids = [i for x in samples for i in (x.get("completion_token_ids")
               or [i for m in rollcage.policy_messages(x) for i in m["token_ids"]])]
        self.assertIn(1000, ids)
        # Export parameters pass through: one sample per model turn, each
        # with the scripted prompt ids, the turn's completion ids and a
        # token-level view.
        turns = ep.samples(granularity="turn")
        self.assertEqual(len(turns), run["turns"])
        view = rollcage.token_view(turns[0])
        self.assertIsNotNone(view, turns[0])
        self.assertEqual(view["prompt_ids"], [1])
        self.assertEqual(view["response_ids"], [1000, 2000])
        self.assertEqual(view["loss_mask"], [1, 1])
        with self.assertRaises(rollcage.RollcageError) as cm:
            ep.samples(granularity="bogus")
        self.assertEqual(cm.exception.status, 400)
        with self.assertRaises(rollcage.RollcageError) as cm:
            ep.bash("ls")
        self.assertEqual(cm.exception.status, 409)

    def test_documented_example(self):
        """docs/python-client.md's example, run verbatim (no token-id
        option anywhere): its batch is the episode's one chain, token-exact
        as the scripted model served it, because the gateway asks the model
        server for ids by default."""
        doc = open(os.path.join(HERE, "..", "..", "..", "docs", "python-client.md")).read()
        code = doc.split("```python\n", 1)[1].split("```", 1)[0]
        self.assertIn("batch.append", code)
        ns = {"__name__": "python_client_doc"}
        exec(compile(code, "docs/python-client.md", "exec"), ns)
        run, batch = ns["run"], ns["batch"]
        self.assertEqual((run["outcome"]["reward"], run["outcome"]["label"]), (1, "clean"), run["outcome"])
        n = run["turns"]
        # The scripted model: turn k completes [1000+k, 2000+k]; the next
        # prompt adds the tool output's [3000+k].
        response, mask, lps = [], [], []
        for k in range(n):
            response += [1000 + k, 2000 + k]
            mask += [1, 1]
            lps += [-0.5, -0.25]
            if k < n - 1:
                response.append(3000 + k)
                mask.append(0)
                lps.append(0.0)
        self.assertEqual(batch, [(1.0, {"prompt_ids": [1], "response_ids": response, "loss_mask": mask, "logprobs": lps})])

    def test_hack_blocked(self):
        ep = self.client.create_episode(task_id=TASK)
        res = ep.bash("cat /opt/grader/tests/*.py")
        self.assertTrue(res["dummy"], res)
        self.assertTrue(res["decision"]["hack"], res)
        self.assertNotIn("rollcage canary", res["output"])
        ok = ep.read_file("README.md")
        self.assertFalse(ok.get("dummy"), ok)
        self.assertIn("textkit", ok["output"])
        o = ep.submit()
        self.assertTrue(o["hacked"])
        self.assertEqual(o["label"], "hacked")
        # A hacked episode trains with the policy's reward: 0 by default,
        # the penalty when asked; never masked into silence.
        for params, want in (({}, 0), (rollcage.reward_policy(hacked_reward=-1), -1)):
            samples = ep.samples(**params)
            self.assertTrue(samples)
            for s in samples:
                self.assertEqual(s["training_reward"], want, (params, s))
                self.assertEqual(rollcage.training_reward(s), want)
                self.assertFalse(rollcage.masked(s))

    def test_late_verdict(self):
        """A step that ran unconfirmed (flagged, no judge) masks the
        episode's samples until the admin records a verdict on it; the
        first verdict stands."""
        ep = self.client.create_episode(task_id=TASK)
        res = ep.bash("git log --all --oneline")
        self.assertTrue(res["decision"].get("unconfirmed"), res["decision"])
        ep.submit()
        self.assertTrue(all(rollcage.masked(s) for s in ep.samples()))
        got = self.client.record_verdict(ep.id, res["step"], hack=False, judge="reviewer", rationale="its own history")
        self.assertEqual((got["episode_id"], got["step"]), (ep.id, res["step"]))
        for s in ep.samples():
            self.assertEqual(s["label"], "clean", s)
            self.assertFalse(rollcage.masked(s), s)
            self.assertEqual(s["training_reward"], s["reward"])
        with self.assertRaises(rollcage.RollcageError) as cm:
            self.client.record_verdict(ep.id, res["step"], hack=True)
        self.assertEqual(cm.exception.status, 409)

    def test_fork(self):
        """A fork's children have the parent's files, their own tokens
        acting on themselves only, and trajectories that start with the
        parent's prefix; a write in one is in no other."""
        ep = self.client.create_episode(task_id=TASK)
        ep.bash("echo before > /tmp/forked.txt && cd /workspace/textkit && export FORKED=1")
        kids = ep.fork(2)
        self.assertEqual(len(kids), 2)
        self.assertEqual(len({ep.token, kids[0].token, kids[1].token}), 3)
        for k in kids:
            out = k.bash('cat /tmp/forked.txt; pwd; echo "v=$FORKED"')["output"]
            self.assertEqual(out.split(), ["before", "/workspace/textkit", "v=1"], out)
            start = k.events()[0]
            self.assertEqual(start["type"], "episode_start")
            self.assertEqual(start["data"]["fork"]["parent_episode_id"], ep.id)
            self.assertEqual(start["data"]["fork"]["branch_step"], 1)
        kids[0].bash("echo mine > /tmp/only-in-0.txt")
        self.assertEqual(kids[1].bash("ls /tmp/only-in-0.txt")["exit_code"], 2)
        self.assertEqual(ep.bash("ls /tmp/only-in-0.txt")["exit_code"], 2)
        with self.assertRaises(rollcage.RollcageError) as cm:
            rollcage.Episode(URL, {"episode_id": ep.id, "token": kids[0].token}).bash("ls")
        self.assertEqual(cm.exception.status, 403)
        with self.assertRaises(rollcage.RollcageError) as cm:
            ep.fork(0)
        self.assertEqual(cm.exception.status, 400)
        for e in kids + [ep]:
            e.close()
        # The siblings are a group of their own (tree-GRPO); the root has
        # no fork fields, not even a branch step of 0.
        for k in kids:
            for smp in k.samples():
                self.assertEqual((smp["parent_episode_id"], smp["branch_step"], smp["fork_group_id"]), (ep.id, 1, ep.id + ".b1"))
                self.assertEqual(rollcage.group_of(smp), ep.id + ".b1")
        for smp in ep.samples():
            self.assertEqual([k for k in ("parent_episode_id", "branch_step", "fork_group_id") if k in smp], [])

    def test_group_async(self):
        async def main():
            client = rollcage.AsyncClient(URL, ADMIN)
            g = await client.create_group(TASK, n=2, model=MODEL)
            self.assertEqual(len(g.episodes), 2)
            self.assertEqual({e.group_id for e in g.episodes}, {g.id})
            first = await g.wait("0s")
            self.assertFalse(first["done"])
            runs = await asyncio.gather(*[
                rollcage.run_episode_async(e, rollcage.ChatModel(e.model_base_url, e.token, MODEL)) for e in g.episodes])
            info = await g.wait("1m")
            self.assertTrue(info["done"], info)
            self.assertEqual(info["graded"], 2)
            self.assertEqual(info["resolve_rate"], 1.0)
            self.assertEqual([r["outcome"]["resolved"] for r in runs], [True, True])
            seen = [ev["type"] async for ev in g.episodes[0].stream()]
            self.assertEqual(seen[-1], "episode_end")
            self.assertEqual(len(await g.samples()), len(await g.episodes[0].samples()) + len(await g.episodes[1].samples()))
        asyncio.run(main())

    def test_examples(self):
        """The slime, verl and SkyRL examples run their rollcage part."""
        for script in ("slime_generate.py", "verl_agent_loop.py", "skyrl_env.py"):
            with self.subTest(script=script):
                p = subprocess.run([sys.executable, os.path.join(HERE, "..", "examples", script), TASK],
                                   capture_output=True, text=True, timeout=600)
                self.assertEqual(p.returncode, 0, p.stderr)
                if script == "skyrl_env.py":
                    self.assertIn("'done': True", p.stdout, p.stdout + p.stderr)
                else:  # a list with one sample per chain, each trained on the training reward 1
                    self.assertTrue(p.stdout.startswith("[{'reward': 1.0"), p.stdout + p.stderr)


if __name__ == "__main__":
    unittest.main()
