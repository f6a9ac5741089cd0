"""slime: a custom generate function that runs each prompt as a rollcage
episode and returns the slime Sample filled from rollcage's samples.

  --custom-generate-function-path slime_generate.generate

with ROLLCAGE_URL and ROLLCAGE_ADMIN_TOKEN set and rollcage serve started
with --policy-url at the SGLang router's OpenAI API (http://ROUTER/v1),
so the model turns go through rollcage's recording proxy. The prompt's
metadata names the task: {"task_id": "textwrap"}.

Run as a script it plays one episode with a stand-in Sample (slime not
installed) against a real gateway: python3 slime_generate.py TASK_ID.
"""

from __future__ import annotations

import asyncio
import os
import sys
from types import SimpleNamespace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rollcage import AsyncClient, ChatModel, masked, run_episode_async, token_view  # noqa: E402

try:  # slime's own Sample when slime is installed
    from slime.utils.types import Sample
except ImportError:  # pragma: no cover - exercised when slime is absent
    Sample = None


def _client() -> AsyncClient:
    return AsyncClient(os.environ["ROLLCAGE_URL"], os.environ["ROLLCAGE_ADMIN_TOKEN"])


async def generate(args, sample, sampling_params):
    """slime's custom generate signature: (args, sample, sampling_params)
    -> sample. sample.metadata["task_id"] names the rollcage task."""
    ep = await _client().create_episode(task_id=sample.metadata["task_id"],
                                        model=getattr(args, "hf_checkpoint", None) or os.environ.get("ROLLCAGE_MODEL", "policy"))
    params = {}
    if sampling_params.get("temperature") is not None:
        params["temperature"] = sampling_params["temperature"]
    if sampling_params.get("max_new_tokens"):
        params["max_tokens"] = sampling_params["max_new_tokens"]
    model = ChatModel(ep.model_base_url, ep.token, os.environ.get("ROLLCAGE_MODEL", "policy"), **params)
    run = await run_episode_async(ep, model)
    rows = await ep.samples()
    outcome = run["outcome"]
    sample.reward = outcome["reward"]
    sample.metadata = dict(sample.metadata, rollcage_episode=ep.id, label=outcome["label"],
                           hacked=outcome["hacked"], failure_class=outcome["failure_class"])
    view = token_view(rows[-1]) if rows else None
    if view is not None:
        sample.tokens = view["prompt_ids"] + view["response_ids"]
        sample.response_length = len(view["response_ids"])
        sample.loss_mask = view["loss_mask"]
        sample.rollout_log_probs = view["logprobs"]
    sample.response = "".join(m.get("content") or "" for m in run["messages"] if m["role"] == "assistant")
    # A trainer masks on label and failure_class, never on reward alone
    # (a hacked resolution keeps reward 1): see rollcage.masked.
    sample.metadata["masked"] = bool(rows) and masked(rows[-1])
    if Sample is not None:
        sample.status = Sample.Status.ABORTED if outcome["failure_class"] == "infrastructure" else Sample.Status.COMPLETED
    return sample


def _standin(task_id: str):
    if Sample is not None:
        return Sample(prompt="", metadata={"task_id": task_id})
    return SimpleNamespace(prompt="", metadata={"task_id": task_id}, tokens=[], response="", response_length=0,
                           loss_mask=None, rollout_log_probs=None, reward=None, status="pending")


if __name__ == "__main__":
    out = asyncio.run(generate(SimpleNamespace(), _standin(sys.argv[1]), {"temperature": 1.0}))
    print({"reward": out.reward, "tokens": len(out.tokens), "response_length": out.response_length,
           "episode": out.metadata["rollcage_episode"], "label": out.metadata["label"]})
