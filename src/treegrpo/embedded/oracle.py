"""The episode loop of the scripted search agents, and their step format. ``run_episode`` plays
one question as ``treegrpo.rollout.sampler`` does, with the real protocol's observation tokens
and a real search tool or toolbox; a policy maps the observation texts so far to the next
step's text (``tool_step``, ``answer_step``, ``plan_text``). The oracle,
``demos.FlawedAgent`` without flaws, scores 100% (docs/embedded.md, "The warm start").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from treegrpo.agent.protocol import ToolProtocol
from treegrpo.core.rewards import exact_match, extract_answer, is_valid_format, search_r1_reward
from treegrpo.retrieval.base import SearchTool
from treegrpo.tools.registry import PastCall, Toolbox

Policy = Callable[[Sequence[str]], str]  # observation texts so far → the next step's text


def tool_step(think: str, tool: str, text: str) -> str:
    return f"<think> {think} </think><{tool}> {text} </{tool}>"


def answer_step(think: str, answer: str) -> str:
    return f"<think> {think} </think><answer> {answer} </answer>"


def plan_text(subject: str, relations: Sequence[str], counted: bool = False) -> str:
    """The thought that opens a hop: the entity in hand and the relations left ("Tevu's boss's
    rival"); ``counted``: their number first ("2 left: …", "0 left: Yb"; docs/algorithm.md §9)."""
    plan = "'s ".join([subject, *relations])
    return f"{len(relations)} left: {plan}" if counted else plan


@dataclass
class Turn:
    action_ids: list[int]  # the agent's step (mask 1 in a demonstration)
    obs_ids: list[int]  # observation or feedback (mask 0); empty after the last step
    tool: str = ""  # the tool called, if any


@dataclass
class Episode:
    turns: list[Turn]

    def score(self, protocol: ToolProtocol, golds: Sequence[str]) -> dict[str, float]:
        """Reward, EM and format exactly as ``treegrpo.rollout.scoring`` computes them."""
        response = protocol.decode(
            [t for turn in self.turns for t in turn.action_ids + turn.obs_ids]
        )
        model_text = protocol.decode(self.turns[-1].action_ids)  # an answer ends the episode
        answer = extract_answer(model_text)
        tools = protocol.names
        return {
            "reward": search_r1_reward(response, golds, model_text=model_text, tools=tools),
            "em": exact_match(answer, golds),
            "valid_format": float(is_valid_format(response, tools)),
            "searches": float(sum(t.tool == "search" for t in self.turns)),
            "tool_calls": float(sum(bool(t.tool) for t in self.turns)),
        }


def run_episode(
    policy: Policy,
    protocol: ToolProtocol,
    tool: SearchTool | Toolbox,
    max_turns: int = 3,
    topk: int = 3,
) -> Episode:
    """Play one episode by ``rollout.sampler``'s turn rules. ``tool``: a retriever (Search-R1's
    ``search``, ``topk`` passages) or the protocol's toolbox."""
    tools = tool if isinstance(tool, Toolbox) else Toolbox.search_r1(tool, topk)
    turns: list[Turn] = []
    observations: list[str] = []
    history: list[PastCall] = []
    for step in range(max_turns + 1):
        ids = list(protocol.tokenizer(policy(observations), add_special_tokens=False)["input_ids"])
        action = protocol.parse(ids)
        if action.kind == "answer" or step == max_turns:
            turns.append(Turn(ids, []))
            break
        if action.kind in tools:
            (out,) = tools.run(action.kind, [(action.text, tuple(history))])
            history.append(PastCall(action.kind, out.argument, out.result))
            obs = protocol.text_ids(out.text)
            turns.append(Turn(ids, obs, action.kind))
        else:
            obs = protocol.invalid_ids()
            turns.append(Turn(ids, obs))
        observations.append(protocol.decode(obs))
    return Episode(turns)
