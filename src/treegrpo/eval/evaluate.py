"""Greedy evaluation of a search agent: EM and F1 per data source, hop count and question kind,
tool calls, valid-format share (docs/algorithm.md §5: evaluation is greedy, pure EM). Search-R1's
sources come in the paper's column order with its two macro averages (docs/algorithm.md §7;
docs/evaluation.md, "Reading the tables")."""

from __future__ import annotations

import json
import logging
import re
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from treegrpo.agent.protocol import parse_passages
from treegrpo.agent.stops import StepStopper
from treegrpo.core.budget import TreeShape
from treegrpo.core.rewards import extract_answer, is_span, normalize_answer
from treegrpo.data.types import Question
from treegrpo.engine.base import Engine, EngineKind
from treegrpo.engine.build import build_engine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.files import write_atomic
from treegrpo.retrieval.base import SearchTool
from treegrpo.rollout.records import StepRecord
from treegrpo.rollout.sampler import AgentLimits, agent_protocol, sample_forest
from treegrpo.rollout.scoring import score_leaves
from treegrpo.tools.registry import Toolbox

SINGLE_HOP = ("nq", "triviaqa", "popqa")
"""Search-R1's single-hop data sources, in the paper's column order."""
MULTI_HOP = ("hotpotqa", "2wikimultihopqa", "musique", "bamboogle")
"""Search-R1's multi-hop data sources, in the paper's column order."""
_COLUMNS = ("NQ", "TriviaQA", "PopQA", "HotpotQA", "2Wiki", "Musique", "Bamboogle")
PAPER_NAMES = dict(zip(SINGLE_HOP + MULTI_HOP, _COLUMNS, strict=True))
"""Column names of the paper's table (docs/algorithm.md §7), by Search-R1 data_source."""
AVERAGES = {"single-hop avg": SINGLE_HOP, "multi-hop avg": MULTI_HOP}
METRICS = ("em", "f1", "valid_format", "tool_calls", "answer_seen")
"""Means per group. ``answer_seen``: a gold answer stood, as whole tokens, in one of the
episode's observations (the search found it; a miss with it seen is a reading miss)."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvalItem:
    question: str
    golds: list[str]
    source: str = "default"
    hops: int | None = None
    kind: str = ""  # the question's type within its source (``Question.kind``), "" if none

    @classmethod
    def of(cls, q: Question) -> EvalItem:
        """The item of a loaded question (hop count 0, unknown, becomes None)."""
        return cls(q.question, list(q.golds), q.source, q.hops or None, q.kind)


class AgentSettings(Protocol):
    """The agent's limits as a job's data or world settings hold them (``jobs.presets``)."""

    @property
    def max_turns(self) -> int: ...
    @property
    def topk(self) -> int: ...
    @property
    def max_context(self) -> int: ...
    @property
    def max_new_tokens(self) -> int: ...
    @property
    def max_obs_tokens(self) -> int: ...


def evaluate(
    model: Any,
    tokenizer: Any,
    tool: SearchTool | Toolbox,
    items: Sequence[EvalItem],
    agent: AgentSettings,
    batch_size: int = 64,
    engine: Engine | EngineKind = "hf",
) -> dict[str, Any]:
    """Every question once, greedily, under ``agent``'s limits: aggregate and per-group metrics.
    ``engine``: one generating with ``model``'s weights, or the kind to build (``build_engine``);
    ``tool``: a retriever or the agent's toolbox (then ``calls/<tool>`` per row)."""
    protocol = agent_protocol(tokenizer, tool, agent.max_obs_tokens)
    if isinstance(engine, str):
        engine = build_engine(engine, model, tokenizer, StepStopper(tokenizer, protocol.stop_tags))
    limits = AgentLimits(agent.max_turns, agent.topk, agent.max_context)
    greedy = SamplingParams(greedy=True, max_new_tokens=agent.max_new_tokens)
    rows: list[dict[str, Any]] = []
    was_training = getattr(model, "training", False)
    model.eval()
    started = time.perf_counter()
    for start in range(0, len(items), batch_size):
        chunk = list(items[start : start + batch_size])
        prompts = [protocol.prompt_ids(it.question) for it in chunk]
        rollout = sample_forest(engine, protocol, tool, prompts, TreeShape(1), greedy, limits)
        leaves = leaf_per_prompt(rollout.forest)
        golds = [it.golds for it in chunk]
        scores = score_leaves(rollout, leaves, golds, protocol.decode, tools=protocol.names)
        for i, it in enumerate(chunk):
            seq = rollout.leaf_sequence(leaves[i])
            response = protocol.decode(seq.ids[seq.prompt_len :])  # steps and observations
            # the last step's answer, as ``rollout.scoring`` reads it for EM
            answer = extract_answer(protocol.decode(rollout.step(leaves[i]).action_ids))
            rows.append(
                {
                    "source": it.source,
                    "hops": it.hops,
                    "kind": it.kind,
                    "em": float(scores.em[i]),
                    "f1": float(scores.f1[i]),
                    "valid_format": float(scores.valid_format[i]),
                    "tool_calls": float(scores.tool_calls[i]),
                    "answer_seen": float(answer_seen(it.golds, response)),
                    **{f"calls/{t}": float(c[i]) for t, c in scores.calls.items()},
                    "generated_tokens": getattr(rollout.spend.by_prompt.get(i), "generated", 0),
                    "answer": answer,
                    "answer_from": answer_source(answer, response),
                    "outcome": outcome(rollout.step(leaves[i]), answer, float(scores.em[i])),
                    "question": it.question,
                    "golds": list(it.golds),
                    "response": response,
                }
            )
        log.info(
            "evaluated %d/%d questions: EM so far %.1f%%, %.0f s",
            len(rows),
            len(items),
            100 * sum(r["em"] for r in rows) / len(rows),
            time.perf_counter() - started,
        )
    if was_training:
        model.train()
    return summarize(rows)


def leaf_per_prompt(forest: Any) -> list[int]:
    """The leaf of each prompt of a forest of single chains, in prompt order. Leaf ids follow
    the order in which episodes ended (a short episode's leaf comes first), not prompt order."""
    leaves = sorted((int(v) for v in forest.leaves()), key=lambda v: int(forest.prompt_id[v]))
    if [int(forest.prompt_id[v]) for v in leaves] != list(range(len(leaves))):
        raise ValueError("expected exactly one leaf per prompt")
    return leaves


OUTCOMES = ("right", "wrong answer", "turn limit", "length limit", "no answer")
"""How an evaluated episode ended: right (EM 1); a wrong answer; no answer because the turn limit
came first (the forced final step searched again or said nothing: the episode spent every search
it may make and still wanted another); no answer because a step hit the token limit (its own or
the context's); no answer otherwise (an end of text or an invalid step at the last turn)."""


def outcome(last: StepRecord, answer: str | None, em: float) -> str:
    """The ``OUTCOMES`` entry of an episode from its last step, its answer and its EM."""
    if em >= 1.0:
        return "right"
    if answer is not None:
        return "wrong answer"
    if last.final:
        return "turn limit"
    return "length limit" if last.finish == "length" else "no answer"


ANSWER_SOURCES = ("title", "span", "other", "none")


def answer_source(answer: str | None, response: str) -> str:
    """Where an answer comes from (``response``: the episode after the prompt): "title" (of a
    retrieved Doc or a web result: a title-trained model's habit), "span" (whole tokens of any
    observation's text), "other" (the model's own words) or "none"."""
    if answer is None or not normalize_answer(answer):
        return "none"
    docs = parse_passages(response)
    if docs:  # Search-R1's passages
        titles, texts = [title for _, title, _ in docs], [text for _, _, text in docs]
    else:  # other tools' observations; web results list "[k] Title" lines
        texts = _OBSERVATION.findall(response)
        titles = [t for text in texts for t in _RESULT_TITLE.findall(text)]
    if any(normalize_answer(answer) == normalize_answer(title) for title in titles):
        return "title"
    return "span" if any(is_span(answer, text) for text in texts) else "other"


def answer_seen(golds: Sequence[str], response: str) -> bool:
    """Whether a gold answer stands, as a run of whole tokens, in one of ``response``'s
    observations (passages, results, pages)."""
    return any(is_span(g, text) for text in _OBSERVATION.findall(response) for g in golds)


_OBSERVATION = re.compile(r"<information>(.*?)</information>", re.DOTALL)
_RESULT_TITLE = re.compile(r"^\[\d+\] (.+)$", re.MULTILINE)


COLLAPSE_FORMAT = 0.8
"""A run collapsed when its held-out valid-format share after RL is below this, or its
held-out EM below its starting model's (docs/algorithm.md §9)."""


def collapsed(before_em: float, after_em: float, valid_format: float) -> bool:
    """Whether a run collapsed (``COLLAPSE_FORMAT``)."""
    return valid_format < COLLAPSE_FORMAT or after_em < before_em


def collapse_warning(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    """The warning when the held-out reports before and after RL show a collapse, else None."""
    b, a = before["overall"], after["overall"]
    if not collapsed(b["em"], a["em"], a["valid_format"]):
        return None
    why = []
    if a["valid_format"] < COLLAPSE_FORMAT:
        why.append(f"held-out valid format {a['valid_format']:.0%} < {COLLAPSE_FORMAT:.0%}")
    if a["em"] < b["em"]:
        why.append(f"held-out EM fell from {100 * b['em']:.1f} to {100 * a['em']:.1f}")
    return (
        f"this run collapsed ({'; '.join(why)}): RL drifted off the format or unlearned what "
        "the start knew. Its health alarms are in train.log; docs/algorithm.md §9 says what "
        "was measured against it (another seed or warm start, algo.batch_baseline)"
    )


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means overall, per source, per hop count and per question kind (rows without one left out of
    ``by_kind``), each with its misses by ``OUTCOMES``, and the share of each ``answer_source``."""

    def means(rs: Sequence[dict[str, Any]]) -> dict[str, Any]:
        ends = Counter(r.get("outcome") for r in rs)
        misses = {k: ends[k] for k in OUTCOMES[1:] if ends[k]}  # counts, commonest first
        calls = sorted({k for r in rs for k in r if k.startswith("calls/")})
        keys = [k for k in METRICS if any(k in r for r in rs)] + calls  # rows of older reports
        return {k: float(np.mean([r.get(k, 0.0) for r in rs])) for k in keys} | {
            "n": len(rs),
            "misses": dict(sorted(misses.items(), key=lambda kv: -kv[1])),
        }

    by_source, by_hops, by_kind = (defaultdict(list) for _ in range(3))
    for r in rows:
        by_source[r["source"]].append(r)
        if r["hops"] is not None:
            by_hops[str(r["hops"])].append(r)
        if r.get("kind"):
            by_kind[r["kind"]].append(r)
    per_source = {k: means(by_source[k]) for k in ordered_sources(by_source)}
    sources = Counter(r.get("answer_from") for r in rows)
    return {
        "overall": means(rows) if rows else {},
        "by_source": per_source,
        "averages": source_averages(per_source),
        "by_hops": {k: means(v) for k, v in sorted(by_hops.items())},
        "by_kind": {k: means(v) for k, v in sorted(by_kind.items())},
        "answer_from": {k: sources[k] / len(rows) for k in ANSWER_SOURCES} if rows else {},
        "rows": list(rows),
    }


def ordered_sources(names: Iterable[str]) -> list[str]:
    """Data sources in the paper's column order (``PAPER_NAMES``, any case), then others sorted."""
    rank = {s: i for i, s in enumerate(SINGLE_HOP + MULTI_HOP)}
    return sorted(names, key=lambda s: (rank.get(s.lower(), len(rank)), s))


def source_averages(by_source: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """The paper's "single-hop avg" and "multi-hop avg": each metric's macro mean over the group's
    sources (``n`` their total). A group with none present is left out; a partial one is labelled
    with what it averages (``"multi-hop avg (hotpotqa, musique)"``)."""
    lower = {s.lower(): s for s in by_source}
    out: dict[str, dict[str, float]] = {}
    for name, group in AVERAGES.items():
        present = [lower[s] for s in group if s in lower]
        if not present:
            continue
        label = name if len(present) == len(group) else f"{name} ({', '.join(present)})"
        ms = [by_source[s] for s in present]
        keys = [k for k in METRICS if all(k in m for m in ms)]
        out[label] = {k: float(np.mean([m[k] for m in ms])) for k in keys}
        out[label]["n"] = sum(int(m["n"]) for m in ms)
    return out


def report_groups(report: dict[str, Any]) -> list[tuple[str, dict[str, float]]]:
    """The rows of a report's table, in order: the paper's data sources (its column order),
    the single-hop and multi-hop averages, other sources, hop counts, question kinds, overall."""
    by_source = report["by_source"]
    names = ordered_sources(by_source)
    paper = [s for s in names if s.lower() in PAPER_NAMES]
    others = [s for s in names if s.lower() not in PAPER_NAMES]
    groups = [(f"source {s}", by_source[s]) for s in paper]
    groups += list(source_averages({s: by_source[s] for s in paper}).items())
    groups += [(f"source {s}", by_source[s]) for s in others]
    groups += [(f"{k}-hop", v) for k, v in report["by_hops"].items()]
    groups += [(f"kind {k}", v) for k, v in report.get("by_kind", {}).items()]
    groups.append(("overall", report["overall"]))
    return groups


def format_table(report: dict[str, Any], title: str = "evaluation") -> str:
    """A markdown table of ``report_groups``' rows, then ``paper_table`` (docs/algorithm.md §7)
    when any of the paper's sources is present."""
    lines = [
        f"### {title}",
        "",
        "| group | n | EM | F1 | valid format | tool calls | answer seen |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, m in report_groups(report):
        seen = f"{100 * m['answer_seen']:.1f}" if "answer_seen" in m else ""  # older reports
        lines.append(
            f"| {name} | {m['n']} | {100 * m['em']:.1f} | {100 * m['f1']:.1f} | "
            f"{100 * m['valid_format']:.1f} | {m['tool_calls']:.2f} | {seen} |"
        )
    paper = paper_table(report)
    if paper:
        lines += ["", paper]
    return "\n".join(lines)


def compare_table(before: dict[str, Any], after: dict[str, Any]) -> str:
    """Two reports of the same questions side by side (before and after training), with the
    rows of :func:`report_groups`: EM and tool calls per source, average, hop count, overall."""
    after_groups = dict(report_groups(after))
    return before_after_rows([(name, b, after_groups[name]) for name, b in report_groups(before)])


def before_after_rows(groups: Sequence[tuple[str, dict[str, Any], dict[str, Any]]]) -> str:
    """A markdown table of (name, before, after) groups: n, EM and tool calls before and after,
    and how the misses after ended (``OUTCOMES``; blank for averages, which do not count them)."""
    lines = [
        "| held-out group | n | EM before | EM after | tool calls before | after | misses after |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for name, b, a in groups:
        lines.append(
            f"| {name} | {b['n']} | {100 * b['em']:.1f} | {100 * a['em']:.1f} | "
            f"{b['tool_calls']:.2f} | {a['tool_calls']:.2f} | {misses_cell(a)} |"
        )
    return "\n".join(lines)


def misses_cell(group: dict[str, Any]) -> str:
    """A group's misses by how they ended, commonest first: "turn limit 9, wrong answer 2"."""
    return ", ".join(f"{k} {v}" for k, v in group.get("misses", {}).items())


def paper_table(report: dict[str, Any]) -> str:
    """EM (%) in the paper's layout: one column per data source in its order, then the
    single-hop and multi-hop averages (docs/algorithm.md §7), so a run reads beside the published
    numbers; "" when none of the paper's sources is in the report."""
    by_source = report["by_source"]
    paper = [s for s in ordered_sources(by_source) if s.lower() in PAPER_NAMES]
    if not paper:
        return ""
    cols = [(PAPER_NAMES[s.lower()], by_source[s]) for s in paper]
    averages = source_averages({s: by_source[s] for s in paper})
    cols += [(name.replace("-hop avg", " avg"), m) for name, m in averages.items()]
    return "\n".join(
        [
            "| EM % | " + " | ".join(name for name, _ in cols) + " |",
            "|---|" + "---:|" * len(cols),
            "| this run | " + " | ".join(f"{100 * m['em']:.1f}" for _, m in cols) + " |",
        ]
    )


def write_report(report: dict[str, Any], out_dir: Path, name: str = "eval") -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(out_dir / f"{name}.json", json.dumps(report, indent=2))
    write_atomic(out_dir / f"{name}.md", format_table(report, name) + "\n")
