"""Synchronous client of the rollcage gateway (standard library only)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterator, List, Optional

from . import ws

DEFAULT_TIMEOUT = 600.0  # seconds; a call runs a command, a group waits


class RollcageError(Exception):
    """An error answer of the gateway: status is the HTTP status, message
    the gateway's one-line {"error"} text (it says what to do)."""

    def __init__(self, status: int, message: str, limit: str = ""):
        super().__init__(f"rollcage: HTTP {status}: {message}")
        self.status = status
        self.message = message
        self.limit = limit


class _HTTP:
    def __init__(self, base_url: str, token: str, timeout: float):
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url {base_url!r}: give the gateway's URL, e.g. http://127.0.0.1:8080")
        if not token:
            raise ValueError("token is empty: pass the admin token (rollcage serve --admin-token) or an episode's token")
        self.base = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def request(self, method: str, path: str, body: Any = None, query: Optional[Dict[str, Any]] = None,
                raw: bool = False, timeout: Optional[float] = None):
        url = self.base + path
        if query:
            url += "?" + urllib.parse.urlencode({k: _qv(v) for k, v in query.items() if v is not None})
        data = None
        headers = {"Authorization": "Bearer " + self.token, "Accept": "application/json"}
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                payload = resp.read()
        except urllib.error.HTTPError as e:
            raise _error(e) from None
        if raw:
            return payload
        return json.loads(payload) if payload.strip() else None


def _qv(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def _error(e: urllib.error.HTTPError) -> RollcageError:
    body = e.read()
    try:
        doc = json.loads(body)
        return RollcageError(e.code, doc.get("error", body.decode(errors="replace")), doc.get("limit", ""))
    except (ValueError, AttributeError):
        return RollcageError(e.code, body.decode(errors="replace").strip())


def _ndjson(payload: bytes) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in payload.splitlines() if line.strip()]


class Episode:
    """One episode, acting with its own token (it acts on this episode
    only). info is the creation answer: instruction, tools (OpenAI
    function format), workdir, deadline and the URLs."""

    def __init__(self, base_url: str, info: Dict[str, Any], timeout: float = DEFAULT_TIMEOUT):
        self.info = info
        self.id: str = info["episode_id"]
        self.token: str = info["token"]
        self.task_id: str = info.get("task_id", "")
        self.group_id: str = info.get("group_id", "")
        self.instruction: str = info.get("instruction", "")
        self.tools: List[Dict[str, Any]] = info.get("tools", [])
        self._base, self._timeout = base_url, timeout
        self._http = _HTTP(base_url, self.token, timeout)
        self._path = "/v1/episodes/" + urllib.parse.quote(self.id)

    @property
    def model_base_url(self) -> str:
        """The OpenAI-compatible base URL of the recording proxy for this
        episode: give it to an OpenAI SDK as base_url with api_key=token.
        Every model turn through it is recorded with its token ids."""
        url = self.info.get("chat_url", "")
        for suffix in ("/chat/completions",):
            if url.endswith(suffix):
                url = url[: -len(suffix)]
        return url

    def call(self, tool: str, args: Optional[Dict[str, Any]] = None, request_id: Optional[str] = None,
             session: Optional[str] = None) -> Dict[str, Any]:
        """One tool call through the monitor: the answer has output (what
        the model sees; dummy when blocked), exit_code, dummy, step and the
        monitor's decision (for the trainer, never for the model)."""
        body: Dict[str, Any] = {"tool": tool, "args": args or {}}
        if request_id:
            body["request_id"] = request_id
        if session:
            body["session"] = session
        return self._http.request("POST", self._path + "/calls", body)

    def bash(self, command: str, timeout_sec: Optional[float] = None, **kw) -> Dict[str, Any]:
        args: Dict[str, Any] = {"command": command}
        if timeout_sec is not None:
            args["timeout_sec"] = timeout_sec
        return self.call("bash", args, **kw)

    def read_file(self, path: str, **kw) -> Dict[str, Any]:
        return self.call("read_file", {"path": path}, **kw)

    def write_file(self, path: str, content: str, **kw) -> Dict[str, Any]:
        return self.call("write_file", {"path": path, "content": content}, **kw)

    def edit(self, path: str, old: str, new: str, **kw) -> Dict[str, Any]:
        return self.call("edit", {"path": path, "old": old, "new": new}, **kw)

    def list_dir(self, path: str, **kw) -> Dict[str, Any]:
        return self.call("list_dir", {"path": path}, **kw)

    def submit(self, message: str = "") -> Dict[str, Any]:
        """Grade the episode; returns its outcome (resolved, reward, hacked,
        label, failure_class, ...). reward stays 1 on a hacked resolution:
        read hacked and label to mask or penalise it."""
        return self._http.request("POST", self._path + "/submit", {"message": message} if message else None)

    def fork(self, n: int) -> List["Episode"]:
        """n episodes that go on from where this one stands: each in a fork
        of its sandbox (files and shell state; running processes are not
        carried), the monitor's history copied, its trajectory starting
        with the shared prefix (episode_start's fork names this episode
        and the branch step). Each child has its own token, acting on it
        only; this episode goes on. Works with this episode's token or
        the admin's."""
        info = self._http.request("POST", self._path + "/fork", {"n": n})
        return [Episode(self._base, e, self._timeout) for e in info["episodes"]]

    def close(self) -> Dict[str, Any]:
        """End the episode without grading (reason abandoned)."""
        return self._http.request("DELETE", self._path)

    def get(self) -> Dict[str, Any]:
        return self._http.request("GET", self._path)

    def events(self, start: int = 0) -> List[Dict[str, Any]]:
        """The trajectory's events recorded so far, from offset start."""
        return _ndjson(self._http.request("GET", self._path + "/trajectory", query={"from": start}, raw=True))

    def stream(self, start: int = 0, timeout: Optional[float] = None) -> Iterator[Dict[str, Any]]:
        """Events as they are recorded (WebSocket), from offset start; it
        ends after the episode_end event."""
        url = self._http.base.replace("http", "ws", 1) + self._path + "/stream?from=" + str(start)
        return ws.json_messages(url, self.token, timeout or self._http.timeout)

    def samples(self, **params: Any) -> List[Dict[str, Any]]:
        """The ended episode's training samples (one dict per sample, as
        rollcage export writes them). params are passed to the export as
        query parameters: granularity, prefix, hacked_reward, unconfirmed,
        and auxiliary=True for the auxiliary model calls too (left out by
        default; each such sample's "auxiliary" says why)."""
        return _ndjson(self._http.request("GET", self._path + "/samples", query=params, raw=True))


class Client:
    """The gateway as the admin token sees it: create episodes and groups,
    list them, read the finished ones."""

    def __init__(self, base_url: str, token: str, timeout: float = DEFAULT_TIMEOUT):
        self._http = _HTTP(base_url, token, timeout)
        self.base_url = self._http.base
        self.timeout = timeout

    def health(self) -> Dict[str, Any]:
        return self._http.request("GET", "/healthz")

    def create_episode(self, task_id: Optional[str] = None, task: Optional[Dict[str, Any]] = None,
                       model: Optional[str] = None, labels: Optional[Dict[str, str]] = None,
                       episode_id: Optional[str] = None, attempt: Optional[int] = None) -> Episode:
        body = _drop_none({"task_id": task_id, "task": task, "model": model, "labels": labels,
                           "episode_id": episode_id, "attempt": attempt})
        return Episode(self.base_url, self._http.request("POST", "/v1/episodes", body), self.timeout)

    def create_group(self, task_id: Optional[str] = None, n: int = 1, task: Optional[Dict[str, Any]] = None,
                     model: Optional[str] = None, labels: Optional[Dict[str, str]] = None) -> "Group":
        """n episodes of one task (a GRPO-style group), all started or none."""
        body = _drop_none({"task_id": task_id, "task": task, "n": n, "model": model, "labels": labels})
        return Group(self, self._http.request("POST", "/v1/groups", body))

    def group(self, group_id: str, wait: str = "5m") -> Dict[str, Any]:
        """The group's state; waits up to wait (a Go duration, "0s" for at
        once) for every episode to end. done says whether they all did."""
        return self._http.request("GET", "/v1/groups/" + urllib.parse.quote(group_id), query={"wait": wait},
                                  timeout=_wait_timeout(wait, self.timeout))

    def episodes(self, all: bool = False, state: Optional[str] = None) -> List[Dict[str, Any]]:
        return self._http.request("GET", "/v1/episodes", query=_drop_none({"all": all or None, "state": state}))["episodes"]

    def samples(self, episode_id: str, **params: Any) -> List[Dict[str, Any]]:
        return _ndjson(self._http.request("GET", "/v1/episodes/" + urllib.parse.quote(episode_id) + "/samples",
                                          query=params, raw=True))

    def record_verdict(self, episode_id: str, step: int, hack: bool, category: Optional[str] = None,
                       confidence: Optional[float] = None, rationale: Optional[str] = None,
                       judge: Optional[str] = None) -> Dict[str, Any]:
        """Decide a step of an ended episode that ran unconfirmed (flagged,
        no judge's verdict; its decision and tool step say unconfirmed):
        your judge's or a reviewer's verdict. The episode's samples then
        carry the decided label and training reward (an unconfirmed
        episode's are masked until every such step is decided). Admin
        token only; the first verdict on a step stands."""
        body = _drop_none({"step": step, "hack": hack, "category": category, "confidence": confidence,
                           "rationale": rationale, "judge": judge})
        return self._http.request("POST", "/v1/episodes/" + urllib.parse.quote(episode_id) + "/verdicts", body)


class Group:
    """A group's episodes (Episode objects, attempt 0 to n-1)."""

    def __init__(self, client: Client, info: Dict[str, Any]):
        self.client = client
        self.id: str = info["group_id"]
        self.task_id: str = info["task_id"]
        self.episodes = [Episode(client.base_url, e, client.timeout) for e in info["episodes"]]

    def wait(self, wait: str = "5m") -> Dict[str, Any]:
        return self.client.group(self.id, wait)

    def samples(self, **params: Any) -> List[Dict[str, Any]]:
        out: List[Dict[str, Any]] = []
        for e in self.episodes:
            out.extend(self.client.samples(e.id, **params))
        return out


def _drop_none(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _wait_timeout(wait: str, floor: float) -> float:
    units = {"h": 3600.0, "m": 60.0, "s": 1.0}
    try:
        secs = float(wait[:-1]) * units[wait[-1]]
    except (KeyError, ValueError, IndexError):
        secs = 0.0
    return max(floor, secs + 30.0)
