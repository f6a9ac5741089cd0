"""asyncio client: the synchronous client's calls run on worker threads
(urllib blocks), so many episodes of a rollout proceed concurrently
under one event loop."""

from __future__ import annotations

import asyncio
import functools
from typing import Any, AsyncIterator, Dict, List, Optional

from .client import DEFAULT_TIMEOUT, Client, Episode, Group


class AsyncEpisode:
    """Episode's methods as coroutines; sync is the underlying Episode."""

    def __init__(self, sync: Episode):
        self.sync = sync
        self.id, self.token, self.info = sync.id, sync.token, sync.info
        self.instruction, self.tools, self.group_id = sync.instruction, sync.tools, sync.group_id

    @property
    def model_base_url(self) -> str:
        return self.sync.model_base_url

    async def _run(self, fn, *a, **kw):
        return await asyncio.to_thread(functools.partial(fn, *a, **kw))

    async def call(self, tool: str, args: Optional[Dict[str, Any]] = None, **kw) -> Dict[str, Any]:
        return await self._run(self.sync.call, tool, args, **kw)

    async def bash(self, command: str, **kw) -> Dict[str, Any]:
        return await self._run(self.sync.bash, command, **kw)

    async def submit(self, message: str = "") -> Dict[str, Any]:
        return await self._run(self.sync.submit, message)

    async def fork(self, n: int) -> List["AsyncEpisode"]:
        return [AsyncEpisode(e) for e in await self._run(self.sync.fork, n)]

    async def close(self) -> Dict[str, Any]:
        return await self._run(self.sync.close)

    async def events(self, start: int = 0) -> List[Dict[str, Any]]:
        return await self._run(self.sync.events, start)

    async def samples(self, **params: Any) -> List[Dict[str, Any]]:
        return await self._run(self.sync.samples, **params)

    async def stream(self, start: int = 0) -> AsyncIterator[Dict[str, Any]]:
        """Events as they are recorded; ends after episode_end."""
        it = self.sync.stream(start)
        done = object()
        while True:
            ev = await asyncio.to_thread(next, it, done)
            if ev is done:
                return
            yield ev


class AsyncGroup:
    def __init__(self, sync: Group):
        self.sync = sync
        self.id, self.task_id = sync.id, sync.task_id
        self.episodes = [AsyncEpisode(e) for e in sync.episodes]

    async def wait(self, wait: str = "5m") -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.wait, wait)

    async def samples(self, **params: Any) -> List[Dict[str, Any]]:
        return await asyncio.to_thread(functools.partial(self.sync.samples, **params))


class AsyncClient:
    """Client's methods as coroutines."""

    def __init__(self, base_url: str, token: str, timeout: float = DEFAULT_TIMEOUT):
        self.sync = Client(base_url, token, timeout)

    async def health(self) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.health)

    async def create_episode(self, **kw) -> AsyncEpisode:
        return AsyncEpisode(await asyncio.to_thread(functools.partial(self.sync.create_episode, **kw)))

    async def create_group(self, task_id: Optional[str] = None, n: int = 1, **kw) -> AsyncGroup:
        return AsyncGroup(await asyncio.to_thread(functools.partial(self.sync.create_group, task_id, n, **kw)))

    async def group(self, group_id: str, wait: str = "5m") -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.group, group_id, wait)

    async def samples(self, episode_id: str, **params: Any) -> List[Dict[str, Any]]:
        return await asyncio.to_thread(functools.partial(self.sync.samples, episode_id, **params))

    async def record_verdict(self, episode_id: str, step: int, hack: bool, **kw: Any) -> Dict[str, Any]:
        return await asyncio.to_thread(functools.partial(self.sync.record_verdict, episode_id, step, hack, **kw))
