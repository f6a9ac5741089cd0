"""verl: an agent loop (verl.experimental.agent_loop) whose rollout is a
rollcage episode.

Register it in the agent-loop config (name: rollcage_agent) with
ROLLCAGE_URL, ROLLCAGE_ADMIN_TOKEN and ROLLCAGE_MODEL set, and rollcage
serve --policy-url at the OpenAI API of verl's rollout servers. Each
dataset row's extra_info carries {"task_id": ...}; the loop returns
verl's AgentLoopOutput built from the token ids rollcage recorded.

Run as a script it plays one episode without verl against a real
gateway: python3 verl_agent_loop.py TASK_ID.
"""

from __future__ import annotations

import asyncio
import os
import sys
from types import SimpleNamespace
from typing import Any, Dict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rollcage import AsyncClient, ChatModel, run_episode_async, token_view  # noqa: E402

try:
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
except ImportError:  # verl absent: the same loop, without the registry
    AgentLoopBase = object
    AgentLoopOutput = None

    def register(name):
        return lambda cls: cls


async def rollout(task_id: str, sampling_params: Dict[str, Any]) -> Dict[str, Any]:
    """One rollcage episode; returns the fields of verl's AgentLoopOutput."""
    client = AsyncClient(os.environ["ROLLCAGE_URL"], os.environ["ROLLCAGE_ADMIN_TOKEN"])
    ep = await client.create_episode(task_id=task_id, model=os.environ.get("ROLLCAGE_MODEL", "policy"))
    params = {k: sampling_params[k] for k in ("temperature", "top_p") if k in sampling_params}
    model = ChatModel(ep.model_base_url, ep.token, os.environ.get("ROLLCAGE_MODEL", "policy"), **params)
    run = await run_episode_async(ep, model)
    rows = await ep.samples()
    view = (token_view(rows[-1]) if rows else None) or {"prompt_ids": [], "response_ids": [], "loss_mask": [], "logprobs": []}
    o = run["outcome"]
    return {
        "prompt_ids": view["prompt_ids"], "response_ids": view["response_ids"], "response_mask": view["loss_mask"],
        "response_logprobs": view["logprobs"] or None, "num_turns": run["turns"],
        "reward_score": o["reward"],
        "extra_fields": {"rollcage_episode": ep.id, "label": o["label"], "hacked": o["hacked"],
                         "failure_class": o["failure_class"]},
        "metrics": {},
    }


@register("rollcage_agent")
class RollcageAgentLoop(AgentLoopBase):
    """verl's AgentLoopBase: run(sampling_params, **kwargs) -> AgentLoopOutput."""

    async def run(self, sampling_params: Dict[str, Any], **kwargs: Any):
        out = await rollout(kwargs["extra_info"]["task_id"], sampling_params)
        if AgentLoopOutput is None:
            return SimpleNamespace(**out)
        return AgentLoopOutput(prompt_ids=out["prompt_ids"], response_ids=out["response_ids"],
                               response_mask=out["response_mask"], response_logprobs=out["response_logprobs"],
                               num_turns=out["num_turns"], reward_score=out["reward_score"],
                               extra_fields=out["extra_fields"], metrics={})


if __name__ == "__main__":
    loop = RollcageAgentLoop.__new__(RollcageAgentLoop)  # verl's constructor needs its trainer config
    out = asyncio.run(loop.run({"temperature": 1.0}, extra_info={"task_id": sys.argv[1]}))
    print({"reward": out.reward_score, "turns": out.num_turns, "response_ids": len(out.response_ids),
           "episode": out.extra_fields["rollcage_episode"], "label": out.extra_fields["label"]})
