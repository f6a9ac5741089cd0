"""A complete agent loop over a rollcage episode: the model (any
OpenAI-compatible server, reached through the episode's recording proxy)
picks tool calls, rollcage runs them in the sandbox through its monitor,
until the model submits or stops calling tools."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional

from .client import RollcageError, _error


class ChatModel:
    """An OpenAI-compatible chat-completions client (urllib). Point
    base_url at episode.model_base_url with api_key=episode.token so every
    turn is recorded; params (temperature, max_tokens, ...) go in every
    request as they are. auxiliary marks every call of this model as a
    call beside the episode's conversation (a title, a summary): its
    value, e.g. "title", is sent as the X-Rollcage-Auxiliary header, and
    the calls are recorded but left out of the episode's samples unless
    samples(auxiliary=True) asks for them."""

    def __init__(self, base_url: str, api_key: str, model: str, timeout: float = 600.0, auxiliary: str = "", **params: Any):
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.model = model
        self.timeout = timeout
        self.auxiliary = auxiliary
        self.params = params

    def complete(self, messages: List[Dict[str, Any]], tools: Optional[List[Dict[str, Any]]] = None) -> Dict[str, Any]:
        body: Dict[str, Any] = dict(self.params, model=self.model, messages=messages)
        if tools:
            body["tools"] = tools
        headers = {"Content-Type": "application/json", "Authorization": "Bearer " + self.api_key}
        if self.auxiliary:
            headers["X-Rollcage-Auxiliary"] = self.auxiliary
        req = urllib.request.Request(self.base_url + "/chat/completions", data=json.dumps(body).encode(), method="POST",
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                doc = json.loads(resp.read())
        except urllib.error.HTTPError as e:
            raise _error(e) from None
        msg = doc["choices"][0]["message"]
        out: Dict[str, Any] = {"role": "assistant", "content": msg.get("content")}
        if msg.get("tool_calls"):
            out["tool_calls"] = msg["tool_calls"]
        return out


def _start(episode, system: Optional[str]) -> List[Dict[str, Any]]:
    messages: List[Dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": episode.instruction})
    return messages


def _args(tc: Dict[str, Any]):
    try:
        args = json.loads(tc["function"].get("arguments") or "{}")
    except ValueError:
        return None
    return args if isinstance(args, dict) else None


def run_episode(episode, model: ChatModel, max_turns: int = 50, system: Optional[str] = None) -> Dict[str, Any]:
    """Run the episode to its end; returns {"outcome", "messages", "turns"}.
    A model turn without tool calls, a submit call, a limit reached or
    max_turns submits the episode."""
    messages = _start(episode, system)
    outcome = None
    turns = 0
    while outcome is None and turns < max_turns:
        turns += 1
        msg = model.complete(messages, episode.tools)
        messages.append(msg)
        calls = msg.get("tool_calls") or []
        if not calls:
            break
        limited = False
        for tc in calls:
            args = _args(tc)
            if args is None:
                messages.append({"role": "tool", "tool_call_id": tc["id"],
                                 "content": "error: the arguments are not a JSON object"})
                continue
            try:
                res = episode.call(tc["function"]["name"], args, request_id=tc["id"])
            except RollcageError as e:
                if e.status == 409 and e.limit:
                    limited = True  # a limit: grade what there is
                    break
                raise
            messages.append({"role": "tool", "tool_call_id": tc["id"], "content": res["output"]})
            if res.get("submitted"):
                outcome = res["outcome"]
                break
        if limited:
            break
    if outcome is None:
        outcome = episode.submit()
    return {"outcome": outcome, "messages": messages, "turns": turns}


async def run_episode_async(episode, model: ChatModel, max_turns: int = 50, system: Optional[str] = None) -> Dict[str, Any]:
    """run_episode for an AsyncEpisode: the model and the calls run on
    worker threads, so many episodes proceed at once."""
    return await asyncio.to_thread(run_episode, episode.sync, model, max_turns, system)
