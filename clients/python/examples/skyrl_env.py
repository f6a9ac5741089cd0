"""SkyRL: a skyrl_gym text environment (BaseTextEnv) whose steps are tool
calls in a rollcage episode. SkyRL's generator keeps the model and the
chat template; rollcage runs each action in the sandbox through its
monitor and gives the reward at the end.

The action is the model's text; a tool call is a JSON object
{"tool": "bash", "args": {"command": "..."}} (or "submit"). Register it
with skyrl_gym.envs.register(id="rollcage", entry_point="skyrl_env:RollcageEnv")
and give each prompt extras {"task_id": ...}.

The last step's reward is rollcage's training_reward, decided by the
gateway's reward policy (ROLLCAGE_HACKED_REWARD, ROLLCAGE_UNCONFIRMED;
by default a hacked episode gets 0, never its raw 1); a masked episode
(unconfirmed, or an infrastructure failure) gets 0 with
metadata["masked"] set, and metadata keeps the raw reward and label.

Run as a script it steps one episode without SkyRL against a real
gateway: python3 skyrl_env.py TASK_ID.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List, Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rollcage import Client, reward_policy, training_reward  # noqa: E402

try:
    from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
except ImportError:  # SkyRL absent: same interface
    BaseTextEnv = object

    def BaseTextEnvStepOutput(**kw):  # a TypedDict in SkyRL
        return dict(kw)


class RollcageEnv(BaseTextEnv):
    def __init__(self, env_config: Optional[Dict[str, Any]] = None, extras: Optional[Dict[str, Any]] = None):
        if BaseTextEnv is not object:
            super().__init__()
        self.client = Client(os.environ["ROLLCAGE_URL"], os.environ["ROLLCAGE_ADMIN_TOKEN"])
        self.task_id = (extras or {})["task_id"]
        self.max_turns = (env_config or {}).get("max_turns", 30)
        self.turns = 0
        self.episode = None

    def init(self, prompt: List[Dict[str, str]]):
        """Starts the episode; the prompt gets the task's instruction."""
        self.episode = self.client.create_episode(task_id=self.task_id, model=os.environ.get("ROLLCAGE_MODEL", "policy"))
        tools = ", ".join(t["function"]["name"] for t in self.episode.tools)
        prompt = list(prompt) + [{"role": "user", "content": self.episode.instruction +
                                  f"\n\nAnswer with one JSON tool call per turn, {{\"tool\": ..., \"args\": {{...}}}}; tools: {tools}."}]
        return prompt, {"rollcage_episode": self.episode.id}

    def step(self, action: str):
        self.turns += 1
        try:
            call = json.loads(action)
            tool, args = call["tool"], call.get("args", {})
        except (ValueError, KeyError, TypeError):
            return BaseTextEnvStepOutput(observations=[{"role": "user", "content": "error: answer with one JSON tool call"}],
                                         reward=0.0, done=False, metadata={})
        if tool == "submit" or self.turns >= self.max_turns:
            return self._done(self.episode.submit())
        res = self.episode.call(tool, args)
        if res.get("submitted"):
            return self._done(res["outcome"])
        return BaseTextEnvStepOutput(observations=[{"role": "user", "content": res["output"]}], reward=0.0, done=False,
                                     metadata={"step": res["step"]})

    def _done(self, outcome: Dict[str, Any]):
        """The last step: the episode's training reward, from its samples
        (every sample of an episode carries the same one)."""
        rows = self.episode.samples(**reward_policy())
        r = training_reward(rows[0]) if rows else None
        return BaseTextEnvStepOutput(observations=[], reward=0.0 if r is None else r, done=True,
                                     metadata={"outcome": outcome, "rollcage_episode": self.episode.id, "masked": r is None,
                                               "reward_raw": outcome["reward"], "label": outcome["label"]})

    def close(self):
        if self.episode is not None:
            st = self.episode.get()["state"]
            if st == "running":
                self.episode.close()


if __name__ == "__main__":
    env = RollcageEnv({}, {"task_id": sys.argv[1]})
    env.init([])
    for act in ['{"tool": "bash", "args": {"command": "ls"}}', "not json", '{"tool": "submit"}']:
        out = env.step(act)
    env.close()
    print({"reward": out["reward"], "done": out["done"], "masked": out["metadata"]["masked"],
           "episode": out["metadata"]["outcome"]["episode_id"]})
