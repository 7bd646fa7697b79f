"""Score the leaves of a rollout: reward, exact match, F1, format, tool calls."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import numpy.typing as npt

from treegrpo.core.rewards import (
    exact_match,
    extract_answer,
    f1_score,
    is_valid_format,
    is_well_formed_step,
    search_r1_reward,
)
from treegrpo.rollout.records import Rollout

FloatArray = npt.NDArray[np.float64]


@dataclass
class LeafScores:
    """One entry per scored leaf, (B,) each."""

    reward: FloatArray
    em: FloatArray
    f1: FloatArray
    valid_format: FloatArray
    answered: FloatArray  # the model gave an answer at all
    tool_calls: FloatArray  # executed tool calls on the leaf's path
    # tool → its calls on the path; empty for Search-R1's agent (search alone: tool_calls)
    calls: dict[str, FloatArray] = field(default_factory=dict)
    # how each episode ended (``OUTCOMES``); its void turns, steps on the path whose action was
    # neither a tool call nor an answer (the protocol's invalid action); and its broken turns,
    # steps that are not one well-formed think-then-action block (``is_well_formed_step``: void
    # turns, and actions beside text the model wrote in place of an observation)
    outcome: list[str] = field(default_factory=list)
    void_turns: FloatArray = field(default_factory=lambda: np.zeros(0))
    broken_turns: FloatArray = field(default_factory=lambda: np.zeros(0))


OUTCOMES = ("right", "wrong", "turn_limit", "no_answer")
"""How a leaf's episode ended: an answer that matched a gold (exact match), an answer that did
not, the forced final step without an answer (the turn limit), or an end without an answer
before it (a void last step at the context limit, an empty step)."""


def outcome_of(em: float, answered: bool, final: bool) -> str:
    """The ``OUTCOMES`` entry of a leaf from its exact match, whether it answered, and whether
    its last step was the forced final one."""
    if answered:
        return "right" if em > 0 else "wrong"
    return "turn_limit" if final else "no_answer"


def score_leaves(
    rollout: Rollout,
    leaves: Sequence[int],
    golds: Sequence[Sequence[str]],
    decode: Callable[[list[int]], str],
    reward: Literal["em", "f1"] = "em",
    format_score: float = 0.2,
    tools: Sequence[str] = ("search",),
    format_gate: bool = False,
) -> LeafScores:
    """Score ``leaves``; ``golds[p]``: the gold answers of the forest's prompt p (docs/algorithm.md
    §5). ``format_score``: Search-R1's format bonus; ``tools``: the format's action tags;
    ``format_gate``: a leaf whose path holds a broken turn scores as a wrong answer in invalid
    format. The format is read from the whole response, the answer from the model's own tokens of
    the last step (joined steps could pair an ``<answer>`` cut at a step's limit with the next's
    ``</answer>``)."""
    fn = functools.partial(
        search_r1_reward, f1=reward == "f1", tools=tools, format_score=format_score
    )
    cols: list[list[float]] = [[] for _ in range(8)]
    broken: dict[int, bool] = {}  # node → its step is broken (a shared step is decoded once)
    counts: list[Counter[str]] = []
    outcomes: list[str] = []
    for leaf in leaves:
        seq = rollout.leaf_sequence(int(leaf))
        response = decode(seq.ids[seq.prompt_len :])
        model_text = decode(rollout.step(int(leaf)).action_ids)
        g = golds[int(rollout.forest.prompt_id[leaf])]
        answer = extract_answer(model_text)
        path = rollout.forest.path(int(leaf))
        values = (
            fn(response, g, model_text=model_text, final_format_score=format_score / 2),
            exact_match(answer, g),
            f1_score(answer, g),
            float(is_valid_format(response, tools)),
            float(answer is not None),
            float(sum(rollout.step(int(n)).called for n in path)),
            float(sum(rollout.step(int(n)).action.kind == "invalid" for n in path)),
            float(sum(_broken(rollout, int(n), decode, tools, broken) for n in path)),
        )
        for col, v in zip(cols, values, strict=True):
            col.append(v)
        counts.append(Counter(rollout.step(int(n)).tool for n in path))
        outcomes.append(outcome_of(values[1], answer is not None, rollout.step(int(leaf)).final))
    per_tool = tuple(tools) != ("search",)  # Search-R1's agent: tool_calls says it all
    calls = {t: np.array([c[t] for c in counts], dtype=np.float64) for t in tools if per_tool}
    r, em, f1, valid, answered, n_calls, void, bad = (np.array(c, np.float64) for c in cols)
    if format_gate:  # a broken path earns at most what a wrong answer in broken format earns
        r = np.where(bad > 0, np.minimum(r, format_score / 2), r)
    return LeafScores(r, em, f1, valid, answered, n_calls, calls, outcomes, void, bad)


def _broken(
    rollout: Rollout,
    node: int,
    decode: Callable[[list[int]], str],
    tools: Sequence[str],
    seen: dict[int, bool],
) -> bool:
    """Whether the step of ``node`` is a broken turn: a void turn, or a step that is not one
    well-formed think-then-action block (``seen`` caches the answers)."""
    if node not in seen:
        step = rollout.step(node)  # a void turn is broken even in well-formed tags (empty)
        text = decode(step.action_ids)
        seen[node] = step.action.kind == "invalid" or not is_well_formed_step(text, tools)
    return seen[node]


@dataclass(frozen=True)
class LeafRewards:
    """The reward a step trains on, as plain values (they travel to rollout workers): the gold
    answers of each prompt of the batch and the reward's settings. The ``informed`` expansion
    rule scores the leaves seen so far with it (``rollout.sampler.sample_forest``'s score)."""

    golds: Sequence[Sequence[str]]  # [prompts] gold answers, by the forest's prompt id
    reward: Literal["em", "f1"] = "em"
    format_score: float = 0.2
    tools: tuple[str, ...] = ("search",)  # the agent's tool names (the format's action tags)
    format_gate: bool = False  # a path with a broken turn scores as a wrong answer

    def only(self, prompts: Sequence[int]) -> LeafRewards:
        """The same reward for a part of the batch: its prompts ``prompts``, renumbered 0.."""
        return replace(self, golds=[self.golds[p] for p in prompts])

    def scorer(
        self, decode: Callable[[list[int]], str]
    ) -> Callable[[Rollout, Sequence[int]], FloatArray]:
        """``score(rollout, leaves) -> rewards`` (B,), decoding with ``decode``."""

        def score(rollout: Rollout, leaves: Sequence[int]) -> FloatArray:
            return score_leaves(
                rollout, leaves, self.golds, decode, self.reward, self.format_score, self.tools,
                self.format_gate,
            ).reward  # fmt: skip

        return score


@dataclass
class ScoredRollout:
    """A step's rollout as the RL step scored it, for observers (``rollout.snapshot``, the trainer's
    ledger): the kept leaves with their scores, prompt groups and total advantages, all (B,)."""

    rollout: Rollout
    leaves: list[int]
    scores: LeafScores
    groups: np.ndarray
    adv: np.ndarray
