"""Views of rollcage's training samples for token-in/token-out trainers."""

from __future__ import annotations

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
    """True when a trainer should not learn from the sample as a success:
    an infrastructure or grading failure (no reward signal at all), or a
    hacked or unconfirmed episode (reward stays 1 on a hacked resolution;
    read label, not reward)."""
    return sample.get("failure_class") in ("infrastructure", "grading") or sample.get("label") in ("hacked", "unconfirmed")
