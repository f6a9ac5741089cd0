"""Views of rollcage's training samples for token-in/token-out trainers."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional


def token_view(sample: Dict[str, Any]) -> Optional[Dict[str, List]]:
    """The sample as token ids: prompt_ids, response_ids (everything after
    the prompt: the policy's tokens and the tool outputs between them),
    loss_mask over response_ids (1 on the policy's tokens) and logprobs.
    None when the model server returned no token ids for it: rollcage
    never re-tokenizes, so a trainer must then skip the sample or render
    its messages with its own chat template."""
    if sample.get("tokens") == "present" and sample.get("prompt_token_ids") is not None:
        prompt = list(sample["prompt_token_ids"])
        response = list(sample.get("completion_token_ids") or [])
        mask = list(sample.get("loss_mask") or [1] * len(response))
        lps = list(sample.get("logprobs") or [])
        if len(mask) == len(prompt) + len(response):
            mask = mask[len(prompt):]  # a mask over prompt and completion
        if len(lps) == len(prompt) + len(response):
            lps = lps[len(prompt):]
        return {"prompt_ids": prompt, "response_ids": response, "loss_mask": mask, "logprobs": lps}
    return None


def policy_messages(sample: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The messages the policy produced (loss mask 1), with their tokens
    when recorded."""
    mask = sample.get("message_mask") or sample.get("loss_mask") or []
    ids = sample.get("message_token_ids") or sample.get("token_ids") or []
    out = []
    for i, m in enumerate(sample.get("messages") or []):
        if i < len(mask) and mask[i] == 1:
            out.append(dict(m, token_ids=ids[i] if i < len(ids) else []))
    return out


def masked(sample: Dict[str, Any]) -> bool:
    """True when a trainer should leave the sample out: its
    training_reward is null (an infrastructure or grading failure, or an
    unconfirmed episode no judge has decided, under the gateway's reward
    policy). A hacked episode is not masked: its training_reward is the
    policy's (0 by default, or a penalty). Samples from a gateway older
    than training_reward are masked on failure_class and label."""
    if "training_reward" in sample:
        return sample["training_reward"] is None
    return sample.get("failure_class") in ("infrastructure", "grading") or sample.get("label") in ("hacked", "unconfirmed")


def training_reward(sample: Dict[str, Any]) -> Optional[float]:
    """The reward to train on (None: masked), decided by the gateway's
    reward policy from the raw reward and the label; never the raw
    reward of a hacked resolution."""
    if "training_reward" not in sample:
        return None if masked(sample) else float(sample["reward"])
    r = sample["training_reward"]
    return None if r is None else float(r)


def group_of(sample: Dict[str, Any]) -> str:
    """The group whose rewards a GRPO-style trainer compares this
    sample's with: the siblings forked off one parent at one step
    (fork_group_id, tree-GRPO's group), else the episode's group
    (group_id: a task's attempts run together), else the episode alone.
    Every sample of an episode (each of its chains) has the same one."""
    return sample.get("fork_group_id") or sample.get("group_id") or sample["episode_id"]


def reward_policy(hacked_reward: Optional[float] = None, unconfirmed: Optional[str] = None) -> Dict[str, str]:
    """The samples() query parameters of a training-reward policy; each
    unset one comes from the environment (ROLLCAGE_HACKED_REWARD, e.g.
    -1 to penalise hacks; ROLLCAGE_UNCONFIRMED: mask, zero or raw), else
    the gateway's default (hacked 0, unconfirmed masked)."""
    out: Dict[str, str] = {}
    h = hacked_reward if hacked_reward is not None else os.environ.get("ROLLCAGE_HACKED_REWARD")
    u = unconfirmed if unconfirmed is not None else os.environ.get("ROLLCAGE_UNCONFIRMED")
    if h not in (None, ""):
        out["hacked_reward"] = str(h)
    if u:
        out["unconfirmed"] = u
    return out
