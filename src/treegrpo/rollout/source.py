"""Where an RL step's forests come from: this process (``LocalRollout``: one engine, one search
tool) or several workers (``treegrpo.distributed.rollout.RayRollout``). The RL step sees only
this interface: sample the step's forests, then take the updated weights."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from treegrpo.agent.protocol import ToolProtocol
from treegrpo.core.budget import TreeShape
from treegrpo.engine.base import Engine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.retrieval.base import SearchTool
from treegrpo.rollout.records import Rollout
from treegrpo.rollout.sampler import AgentLimits, ForestSampler
from treegrpo.rollout.scoring import LeafRewards
from treegrpo.tools.registry import Toolbox


@dataclass(frozen=True)
class Draw:
    """How a step's forest is drawn: ``rollout.sampler.sample_forest``'s tree shape, sampling,
    episode limits and seed; ``rewards``: how its leaves are rewarded, for an expansion rule
    that reads rewards (``informed``) and for difficulty budgets."""

    shape: TreeShape
    sampling: SamplingParams
    limits: AgentLimits
    seed: int
    rewards: LeafRewards | None = None


class RolloutSource(Protocol):
    """What the RL step needs to sample forests."""

    @property
    def pad_id(self) -> int:
        """The tokenizer's padding id (the trainer pads its batches with it)."""
        ...

    def sample(self, prompts: Sequence[list[int]], draw: Draw) -> Rollout:
        """One forest for the batch, drawn as ``draw`` says (``sample_forest``'s contract)."""
        ...

    def update_weights(self, weights: torch.nn.Module | Mapping[str, torch.Tensor]) -> None:
        """Sample with these weights from now on (the policy after an update)."""
        ...


@dataclass
class LocalRollout:
    """Forests sampled in this process by ``engine``, calling ``tool`` (a retriever, or the
    agent's toolbox; ``protocol`` offers the same tools: ``rollout.sampler.agent_protocol``)."""

    engine: Engine
    protocol: ToolProtocol
    tool: SearchTool | Toolbox

    @property
    def pad_id(self) -> int:
        return self.engine.pad_id

    def sample(self, prompts: Sequence[list[int]], draw: Draw) -> Rollout:
        return self.sampler(prompts, draw).sample()

    def sampler(
        self, prompts: Sequence[list[int]], draw: Draw, keys: Sequence[int] | None = None
    ) -> ForestSampler:
        """The ``ForestSampler`` of ``prompts`` (``keys``: their indices in the batch)."""
        score = draw.rewards.scorer(self.protocol.decode) if draw.rewards is not None else None
        how = (draw.shape, draw.sampling, draw.limits, draw.seed, keys, score)
        return ForestSampler(self.engine, self.protocol, self.tool, prompts, *how)

    def update_weights(self, weights: torch.nn.Module | Mapping[str, torch.Tensor]) -> None:
        self.engine.update_weights(weights)
