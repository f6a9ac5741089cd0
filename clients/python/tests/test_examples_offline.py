"""Tests of the examples' conversion of rollcage samples into each
trainer's samples, without a gateway: one trainer sample per chain, with
the training reward (never the raw reward of a hacked resolution) and
masked samples carrying no loss."""

import importlib.util
import os
import sys
import unittest
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import rollcage  # noqa: E402


def _example(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, "..", "examples", name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _row(chain, label, reward, training, failure="", **fork):
    """A rollcage sample of chain `chain` as the gateway exports it; fork
    adds a forked episode's fields."""
    return dict({"sample_id": f"ep/segment/{chain}/{2 * chain}", "episode_id": "ep", "group_id": "g1", "kind": "segment", "tokens": "present",
            "prompt_token_ids": [1, 2], "completion_token_ids": [10 + chain, 20 + chain], "loss_mask": [0, 0, 1, 1],
            "logprobs": [-0.5, -0.25], "messages": [{"role": "user", "content": "fix it"}, {"role": "assistant", "content": f"c{chain}"}],
            "turns": 1, "reward": reward, "training_reward": training, "label": label, "hacked": label == "hacked",
            "failure_class": failure}, **fork)


FORK = {"parent_episode_id": "root", "branch_step": 0, "fork_group_id": "root.b0", "prefix_turns": 1}


EPISODES = {
    # name: (rows of a compacted episode: two chains, want reward per chain, want masked)
    "clean": ([_row(0, "clean", 1, 1), _row(1, "clean", 1, 1)], 1.0, False),
    "hacked": ([_row(0, "hacked", 1, 0), _row(1, "hacked", 1, 0)], 0.0, False),
    "penalised": ([_row(0, "hacked", 1, -1), _row(1, "hacked", 1, -1)], -1.0, False),
    "unconfirmed": ([_row(0, "unconfirmed", 1, None), _row(1, "unconfirmed", 1, None)], 0.0, True),
    "abandoned": ([_row(0, "clean", 0, None, "infrastructure"), _row(1, "clean", 0, None, "infrastructure")], 0.0, True),
    "fork": ([_row(0, "clean", 1, 1, **FORK), _row(1, "clean", 1, 1, **FORK)], 1.0, False),
    "fork, hacked": ([_row(0, "hacked", 1, 0, **FORK), _row(1, "hacked", 1, 0, **FORK)], 0.0, False),
}


class ExamplesOfflineTest(unittest.TestCase):
    def test_helpers(self):
        self.assertIsNone(rollcage.training_reward({"reward": 1, "training_reward": None}))
        self.assertEqual(rollcage.training_reward({"reward": 1, "training_reward": 0}), 0.0)
        self.assertTrue(rollcage.masked({"reward": 1, "training_reward": None}))
        self.assertFalse(rollcage.masked({"reward": 1, "training_reward": 0, "label": "hacked"}))
        # A gateway older than training_reward: masked on label.
        self.assertIsNone(rollcage.training_reward({"reward": 1, "label": "hacked", "failure_class": ""}))
        self.assertEqual(rollcage.reward_policy(-1, "zero"), {"hacked_reward": "-1", "unconfirmed": "zero"})
        # Groups: a fork's siblings, else the episode's group, else the episode.
        self.assertEqual(rollcage.group_of(_row(0, "clean", 1, 1, **FORK)), "root.b0")
        self.assertEqual(rollcage.group_of(_row(0, "clean", 1, 1)), "g1")
        self.assertEqual(rollcage.group_of(dict(_row(0, "clean", 1, 1), group_id="")), "ep")

    def test_slime(self):
        slime = _example("slime_generate")
        for name, (rows, reward, masked) in EPISODES.items():
            with self.subTest(episode=name):
                prompt = slime._standin("textwrap")
                out = slime.to_slime(prompt, rows)
                self.assertEqual(len(out), len(rows), "one slime Sample per chain")
                for i, s in enumerate(out):
                    self.assertEqual(s.reward, reward)
                    self.assertEqual(s.metadata["reward_raw"], rows[i]["reward"])
                    self.assertEqual(s.metadata["task_id"], "textwrap")
                    self.assertEqual(s.tokens, [1, 2, 10 + i, 20 + i])
                    self.assertEqual(s.response_length, 2)
                    self.assertEqual(s.loss_mask, [0, 0] if masked else [1, 1])
                    self.assertEqual(bool(getattr(s, "remove_sample", False)), masked)
                    self.assertEqual(s.metadata["rollcage_group"], "root.b0" if "fork" in name else "g1")
                    self.assertEqual(s.metadata["branch_step"], 0 if "fork" in name else None)
                self.assertIsNone(prompt.reward, "the prompt's sample is copied, not changed")

    def test_verl(self):
        verl = _example("verl_agent_loop")
        for name, (rows, reward, masked) in EPISODES.items():
            with self.subTest(episode=name):
                out = verl.to_verl(rows)
                self.assertEqual(len(out), len(rows), "one AgentLoopOutput per chain")
                for i, o in enumerate(out):
                    self.assertEqual(o["reward_score"], reward)
                    self.assertEqual(o["response_ids"], [10 + i, 20 + i])
                    self.assertEqual(o["response_mask"], [0, 0] if masked else [1, 1])
                    self.assertEqual(o["extra_fields"]["masked"], masked)
                    self.assertEqual(o["extra_fields"]["reward_raw"], rows[i]["reward"])
                    self.assertEqual(o["extra_fields"]["rollcage_group"], "root.b0" if "fork" in name else "g1")


if __name__ == "__main__":
    unittest.main()
