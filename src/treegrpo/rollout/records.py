"""What a rollout returns: the forest, each step's tokens, and per-leaf training sequences."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from treegrpo.agent.protocol import Action
from treegrpo.core.budget import SpendAccountant
from treegrpo.core.tree import Forest
from treegrpo.retrieval.base import Passage
from treegrpo.tools.registry import PastCall


@dataclass
class StepRecord:
    """One node of the forest: one agent step and the environment's answer to it."""

    action_ids: list[int]  # exactly the sampled tokens (mask 1)
    action_logprobs: list[float]  # the engine's log p of each sampled token
    obs_ids: list[int]  # observation or feedback tokens (mask 0); empty on a leaf
    action: Action  # parsed action: a tool's name / answer / invalid
    finish: str  # engine finish reason: stop / eos / length
    final: bool = False  # the forced last step (a tool call there is not executed)
    tool: str = ""  # the tool called for this step ("" when none was)
    tool_status: str = ""  # its outcome: ok / error / failed (tools.registry.Outcome.status)
    argument: Any = None  # the parsed argument of the call
    result: Any = None  # the tool's result (None unless ok): later calls on the path read it
    processed: int = 0  # positions the engine computed for this step
    reused: int = 0  # context positions it read from its prefix cache instead

    @property
    def called(self) -> bool:
        """A tool was called for this step (whatever came of it)."""
        return bool(self.tool)

    @property
    def tool_failed(self) -> bool:
        """The tool did not answer (an outage: ``retrieval.base.ToolFailed``)."""
        return self.tool_status == "failed"

    @property
    def searched(self) -> bool:
        """The ``search`` tool was called for this step."""
        return self.tool == "search"

    @property
    def passages(self) -> list[str]:
        """The contents of the passages a retriever search returned, for viewers."""
        hits = self.result if self.searched and isinstance(self.result, list) else []
        return [p.contents for p in hits if isinstance(p, Passage)]

    def past_call(self) -> PastCall | None:
        """This step's call as later calls of the episode see it (None: no call)."""
        return PastCall(self.tool, self.argument, self.result) if self.tool else None


@dataclass
class LeafSequence:
    """A root-to-leaf trajectory as one token sequence. Shapes (T,)."""

    ids: list[int]
    action_mask: list[int]  # 1 on model-sampled tokens, 0 on prompt and observations
    logprobs: list[float]  # engine log-probs on action tokens, 0.0 elsewhere
    prompt_len: int


@dataclass
class Rollout:
    forest: Forest
    prompts: list[list[int]]  # prompt token ids, indexed by the forest's prompt id
    steps: list[StepRecord]  # indexed by a node's payload
    kept: npt.NDArray[np.int64]  # leaf node ids kept for training (K per tree)
    spend: SpendAccountant
    # (E,) the node each expansion started from, over all rounds (a root: a fresh chain)
    expansions: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    # [E] why the expansion rule picked that node ("uniform", "entropy 2.31 (rank 1)", ...)
    expansion_reasons: list[str] = field(default_factory=list)
    # (L, T) expansions each tree got in each round: N everywhere under the per-tree budget
    expansion_counts: npt.NDArray[np.int64] = field(
        default_factory=lambda: np.zeros((0, 0), np.int64)
    )
    # seconds spent deciding where to expand (scoring leaves, allocating, choosing nodes); a
    # merged rollout sums its parts', so on rollout workers it is work done, not wall time
    expansion_s: float = 0.0

    def step(self, node: int) -> StepRecord:
        return self.steps[int(self.forest.payload[node])]

    def leaf_sequence(self, leaf: int) -> LeafSequence:
        """Prompt, then each step's action and observation along the path to ``leaf``."""
        prompt = self.prompts[int(self.forest.prompt_id[leaf])]
        ids, mask, lps = list(prompt), [0] * len(prompt), [0.0] * len(prompt)
        for node in self.forest.path(int(leaf)):
            rec = self.step(int(node))
            ids += rec.action_ids + rec.obs_ids
            mask += [1] * len(rec.action_ids) + [0] * len(rec.obs_ids)
            lps += rec.action_logprobs + [0.0] * len(rec.obs_ids)
        return LeafSequence(ids, mask, lps, len(prompt))

    def action_ids(self, leaf: int) -> list[int]:
        """The model's own tokens along the path to ``leaf`` (observations left out)."""
        return [t for node in self.forest.path(int(leaf)) for t in self.step(int(node)).action_ids]

    def logprob_after_void(self) -> tuple[float, float]:
        """Mean sampled log-prob per token of the steps that follow a void turn (a step whose
        action was invalid, answered by the feedback observation), and of all other steps
        (NaN where there are none): SimpleTIR's low-probability tokens after tool feedback."""
        after: list[float] = []
        other: list[float] = []
        f = self.forest
        for v in range(f.n_nodes):
            parent = int(f.parent[v])
            if parent < 0:
                continue  # a root holds no step
            void = f.parent[parent] >= 0 and self.step(parent).action.kind == "invalid"
            (after if void else other).extend(self.step(v).action_logprobs)
        return _mean(after), _mean(other)

    def distinct_tokens(self) -> int:
        """Tokens in the forest counting each prompt, step and observation once."""
        used = set(self.forest.prompt_id.tolist())
        steps = sum(len(s.action_ids) + len(s.obs_ids) for s in self.steps)
        return sum(len(self.prompts[p]) for p in used) + steps


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def merge_rollouts(parts: Sequence[tuple[Sequence[int], Rollout]], n_prompts: int) -> Rollout:
    """One rollout of a batch of ``n_prompts`` prompts from its parts' (``parts[i] = (keys,
    rollout)``, the rollout's prompt j being the batch's ``keys[j]``; each batch index in exactly
    one part): trees in part order, nodes in order within a part, every step record and the spend
    booked to each prompt's batch index, the parts' expansion counts side by side."""
    owners = [k for keys, _ in parts for k in keys]
    if sorted(owners) != list(range(n_prompts)):
        raise ValueError(f"the parts must cover prompts 0..{n_prompts - 1} once each: {owners}")
    rounds = {ro.expansion_counts.shape[0] for _, ro in parts}
    if len(rounds) > 1:
        raise ValueError(f"the parts' expansion counts have different rounds: {sorted(rounds)}")
    forest = Forest()
    prompts: list[list[int]] = [[] for _ in range(n_prompts)]
    steps: list[StepRecord] = []
    kept: list[int] = []
    expansions: list[int] = []
    reasons: list[str] = []
    spend = SpendAccountant()
    for keys, ro in parts:
        f, offset = ro.forest, len(steps)
        new: list[int] = []  # node id here → node id in the merged forest
        for v in range(f.n_nodes):  # a parent always comes before its children
            if f.parent[v] < 0:
                new.append(forest.add_tree(keys[int(f.prompt_id[v])]))
            else:
                payload = offset + int(f.payload[v])
                new.append(forest.add_node(new[int(f.parent[v])], payload, bool(f.is_leaf[v])))
        steps += ro.steps
        for j, key in enumerate(keys):
            prompts[key] = ro.prompts[j]
        kept += [new[int(v)] for v in ro.kept]
        expansions += [new[int(v)] for v in ro.expansions]
        reasons += ro.expansion_reasons
        for j, s in ro.spend.by_prompt.items():
            spend.add(keys[j], **asdict(s))
    counts = [ro.expansion_counts for _, ro in parts]
    return Rollout(
        forest,
        prompts,
        steps,
        np.array(sorted(kept), dtype=np.int64),
        spend,
        np.array(expansions, dtype=np.int64),
        reasons,
        np.concatenate(counts, axis=1) if counts else np.zeros((0, 0), np.int64),  # (L, T)
        sum(ro.expansion_s for _, ro in parts),
    )
