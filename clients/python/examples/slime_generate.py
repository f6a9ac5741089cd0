"""slime: a custom generate function that runs each prompt as a rollcage
episode and returns slime Samples filled from rollcage's samples, one
per chain of model turns (a compacted episode, or a harness that
rewrote its history, has several; each is a sample of its own), all
returned for the prompt's one rollout. metadata["rollcage_group"] is the
group to compare rewards within (rollcage.group_of: a fork's siblings
for tree-GRPO, else the episode's group).

  --custom-generate-function-path slime_generate.generate

with ROLLCAGE_URL and ROLLCAGE_ADMIN_TOKEN set and rollcage serve started
with --policy-url at the SGLang router's OpenAI API (http://ROUTER/v1),
so the model turns go through rollcage's recording proxy. The prompt's
metadata names the task: {"task_id": "textwrap"}.

Each Sample's reward is rollcage's training_reward, decided by the
gateway's reward policy (ROLLCAGE_HACKED_REWARD, ROLLCAGE_UNCONFIRMED;
by default a hacked episode gets 0 and an unconfirmed or failed one is
masked). A masked sample has loss_mask all 0 and remove_sample set, so
it moves no gradient whatever slime does with it; reward_raw keeps the
hidden tests' reward.

Run as a script it plays one episode with a stand-in Sample (slime not
installed) against a real gateway: python3 slime_generate.py TASK_ID.
"""

from __future__ import annotations

import asyncio
import copy
import os
import sys
from types import SimpleNamespace
from typing import Any, Dict, List

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rollcage import AsyncClient, ChatModel, group_of, reward_policy, run_episode_async, token_view, training_reward  # noqa: E402

try:  # slime's own Sample when slime is installed
    from slime.utils.types import Sample
except ImportError:  # pragma: no cover - exercised when slime is absent
    Sample = None


def _client() -> AsyncClient:
    return AsyncClient(os.environ["ROLLCAGE_URL"], os.environ["ROLLCAGE_ADMIN_TOKEN"])


def to_slime(sample, rows: List[Dict[str, Any]]) -> list:
    """slime Samples from one episode's rollcage samples (rows), one per
    chain, each a copy of the prompt's sample."""
    out = []
    for row in rows:
        s = copy.deepcopy(sample)
        r = training_reward(row)
        s.reward = 0.0 if r is None else r
        s.metadata = dict(sample.metadata, rollcage_episode=row["episode_id"], rollcage_sample=row["sample_id"],
                          label=row["label"], hacked=row["hacked"], failure_class=row["failure_class"],
                          reward_raw=row["reward"], tokens=row["tokens"], rollcage_group=group_of(row),
                          parent_episode=row.get("parent_episode_id"), branch_step=row.get("branch_step"))
        s.response = "".join(m.get("content") or "" for m in row["messages"] if m["role"] == "assistant")
        view = token_view(row)
        if view is not None:
            s.tokens = view["prompt_ids"] + view["response_ids"]
            s.response_length = len(view["response_ids"])
            s.loss_mask = view["loss_mask"]
            s.rollout_log_probs = view["logprobs"]
        if r is None:  # masked: no gradient from it
            s.loss_mask = [0] * (s.response_length or 0)
            s.remove_sample = True
        if Sample is not None:
            s.status = Sample.Status.ABORTED if row["failure_class"] == "infrastructure" else Sample.Status.COMPLETED
        out.append(s)
    return out


async def generate(args, sample, sampling_params):
    """slime's custom generate signature: (args, sample, sampling_params)
    -> a list of samples, one per chain of the episode.
    sample.metadata["task_id"] names the rollcage task."""
    ep = await _client().create_episode(task_id=sample.metadata["task_id"],
                                        model=getattr(args, "hf_checkpoint", None) or os.environ.get("ROLLCAGE_MODEL", "policy"))
    params = {}
    if sampling_params.get("temperature") is not None:
        params["temperature"] = sampling_params["temperature"]
    if sampling_params.get("max_new_tokens"):
        params["max_tokens"] = sampling_params["max_new_tokens"]
    model = ChatModel(ep.model_base_url, ep.token, os.environ.get("ROLLCAGE_MODEL", "policy"), **params)
    await run_episode_async(ep, model)
    return to_slime(sample, await ep.samples(**reward_policy()))


def _standin(task_id: str):
    if Sample is not None:
        return Sample(prompt="", metadata={"task_id": task_id})
    return SimpleNamespace(prompt="", metadata={"task_id": task_id}, tokens=[], response="", response_length=0,
                           loss_mask=None, rollout_log_probs=None, reward=None, status="pending", remove_sample=False)


if __name__ == "__main__":
    out = asyncio.run(generate(SimpleNamespace(), _standin(sys.argv[1]), {"temperature": 1.0}))
    print([{"reward": s.reward, "tokens": len(s.tokens), "response_length": s.response_length,
            "episode": s.metadata["rollcage_episode"], "label": s.metadata["label"]} for s in out])
