"""verl: an agent loop (verl.experimental.agent_loop) whose rollout is a
rollcage episode.

Register it in the agent-loop config (name: rollcage_agent) with
ROLLCAGE_URL, ROLLCAGE_ADMIN_TOKEN and ROLLCAGE_MODEL set, and rollcage
serve --policy-url at the OpenAI API of verl's rollout servers. Each
dataset row's extra_info carries {"task_id": ...}; the loop returns a
list of verl's AgentLoopOutput, one per chain of model turns (verl's v1
agent-loop path, trainer.use_v1, takes a list, one row each; a
compacted episode has several chains), built from the token ids
rollcage recorded.

reward_score is rollcage's training_reward, decided by the gateway's
reward policy (ROLLCAGE_HACKED_REWARD, ROLLCAGE_UNCONFIRMED; by default
a hacked episode gets 0 and an unconfirmed or failed one is masked: its
response_mask is all 0 and extra_fields.masked is set). extra_fields
keep the raw reward, the label and rollcage_group, the group to compare
rewards within (rollcage.group_of: a fork's siblings for tree-GRPO, else
the episode's group).

Run as a script it plays one episode without verl against a real
gateway: python3 verl_agent_loop.py TASK_ID.
"""

from __future__ import annotations

import asyncio
import os
import sys
from types import SimpleNamespace
from typing import Any, Dict, List

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rollcage import AsyncClient, ChatModel, group_of, reward_policy, run_episode_async, token_view, training_reward  # noqa: E402

try:
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
except ImportError:  # verl absent: the same loop, without the registry
    AgentLoopBase = object
    AgentLoopOutput = None

    def register(name):
        return lambda cls: cls


def to_verl(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The fields of verl's AgentLoopOutput for each chain (row) of one
    episode's rollcage samples."""
    out = []
    for row in rows:
        view = token_view(row) or {"prompt_ids": [], "response_ids": [], "loss_mask": [], "logprobs": []}
        r = training_reward(row)
        mask = view["loss_mask"] if r is not None else [0] * len(view["response_ids"])
        out.append({
            "prompt_ids": view["prompt_ids"], "response_ids": view["response_ids"], "response_mask": mask,
            "response_logprobs": view["logprobs"] or None, "num_turns": row["turns"],
            "reward_score": 0.0 if r is None else r,
            "extra_fields": {"rollcage_episode": row["episode_id"], "rollcage_sample": row["sample_id"], "label": row["label"],
                             "hacked": row["hacked"], "failure_class": row["failure_class"], "reward_raw": row["reward"],
                             "masked": r is None, "tokens": row["tokens"], "rollcage_group": group_of(row),
                             "parent_episode": row.get("parent_episode_id"), "branch_step": row.get("branch_step")},
            "metrics": {},
        })
    return out


async def rollout(task_id: str, sampling_params: Dict[str, Any]) -> List[Dict[str, Any]]:
    """One rollcage episode; returns the fields of verl's AgentLoopOutput,
    one per chain."""
    client = AsyncClient(os.environ["ROLLCAGE_URL"], os.environ["ROLLCAGE_ADMIN_TOKEN"])
    ep = await client.create_episode(task_id=task_id, model=os.environ.get("ROLLCAGE_MODEL", "policy"))
    params = {k: sampling_params[k] for k in ("temperature", "top_p") if k in sampling_params}
    model = ChatModel(ep.model_base_url, ep.token, os.environ.get("ROLLCAGE_MODEL", "policy"), **params)
    await run_episode_async(ep, model)
    return to_verl(await ep.samples(**reward_policy()))


@register("rollcage_agent")
class RollcageAgentLoop(AgentLoopBase):
    """verl's AgentLoopBase: run(sampling_params, **kwargs) -> AgentLoopOutput."""

    async def run(self, sampling_params: Dict[str, Any], **kwargs: Any):
        outs = await rollout(kwargs["extra_info"]["task_id"], sampling_params)
        if AgentLoopOutput is None:
            return [SimpleNamespace(**o) for o in outs]
        return [AgentLoopOutput(prompt_ids=o["prompt_ids"], response_ids=o["response_ids"],
                                response_mask=o["response_mask"], response_logprobs=o["response_logprobs"],
                                num_turns=o["num_turns"], reward_score=o["reward_score"],
                                extra_fields=o["extra_fields"], metrics={}) for o in outs]


if __name__ == "__main__":
    loop = RollcageAgentLoop.__new__(RollcageAgentLoop)  # verl's constructor needs its trainer config
    outs = asyncio.run(loop.run({"temperature": 1.0}, extra_info={"task_id": sys.argv[1]}))
    print([{"reward": o.reward_score, "turns": o.num_turns, "response_ids": len(o.response_ids),
            "episode": o.extra_fields["rollcage_episode"], "label": o.extra_fields["label"]} for o in outs])
