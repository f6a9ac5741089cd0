"""rollcage: the Python client of the rollcage gateway (rollcage serve).

Standard library only. Trainers create an episode (or a group of n for
GRPO), send the model's turns through the episode's recording proxy
(model_base_url, an OpenAI-compatible base URL) and its tool calls
through call(), submit, and read back the reward and the training
samples. Client is synchronous; AsyncClient runs the same calls under
asyncio. agent.run_episode is a complete agent loop over both.
"""

from .aio import AsyncClient, AsyncEpisode, AsyncGroup
from .agent import ChatModel, run_episode, run_episode_async
from .client import Client, Episode, Group, RollcageError
from .samples import group_of, masked, policy_messages, reward_policy, token_view, training_reward

__all__ = ["Client", "Episode", "Group", "RollcageError", "AsyncClient", "AsyncEpisode", "AsyncGroup",
           "ChatModel", "run_episode", "run_episode_async",
           "token_view", "policy_messages", "masked", "training_reward", "reward_policy", "group_of"]
