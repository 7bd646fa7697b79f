"""The data-driven job (``treegrpo train --data.train-files …``): the job runner on your own
questions, model and search tool; names with a colon are built-in, offline ones. Inputs are
checked in two stages so a mistake costs seconds, not a model load: ``check_data`` looks at names
and paths only (``treegrpo train --dry-run`` stops there); ``prepare_inputs`` reads every
question file, then prepares the model and the search tool."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from treegrpo.data.lead_questions import lead_questions, wh_questions
from treegrpo.data.load import load_questions
from treegrpo.data.types import Question
from treegrpo.data.web_questions import KINDS as WEB_KINDS
from treegrpo.data.web_questions import web_questions
from treegrpo.data.wiki import wiki_corpus, wiki_questions
from treegrpo.data.wiki_web import WIKI_WEB
from treegrpo.engine.sampling import SamplingParams
from treegrpo.eval.evaluate import EvalItem, compare_table, paper_table
from treegrpo.jobs.presets import DataConfig
from treegrpo.jobs.runner import Evaluator, Job, Report, evenly_spaced, greedy_evaluator, run_job
from treegrpo.jobs.tools import make_toolbox, search_r1_only
from treegrpo.models.load import load_model, resolve_device
from treegrpo.models.smollm2 import prepare_smollm2
from treegrpo.retrieval.base import SearchTool
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.retrieval.dense import DenseRetriever
from treegrpo.retrieval.http_client import RemoteRetriever
from treegrpo.rollout.sampler import AgentLimits
from treegrpo.tools.registry import Toolbox
from treegrpo.train.config import ClusterConfig
from treegrpo.train.task import TrainItem, TrainSettings
from treegrpo.warmstart.protocol import protocol_warm_start
from treegrpo.warmstart.reader import reader_warm_start
from treegrpo.warmstart.web import web_warm_start

log = logging.getLogger(__name__)


def web_side(side: str, kind: str | None = None) -> list[Question]:
    """The wiki-web questions of ``side`` ("train", or "test": ``WEB_HELD_OUT``), a kind or all."""
    train, test = web_questions(held_out_share=WEB_HELD_OUT)
    return [q for q in (train if side == "train" else test) if kind in (None, q.kind)]


WEB_KIND_SETS = tuple(f"wiki-web:{side}:{kind}" for side in ("train", "test") for kind in WEB_KINDS)
"""The wiki-web sets of one kind each (parts of ``wiki-web:train`` and ``wiki-web:test``)."""
BUILTIN_QUESTIONS: dict[str, Callable[[], list[Question]]] = {
    **{f"wiki:{s}": partial(wiki_questions, s) for s in ("train", "test")},
    **{f"wiki-hard:{s}": partial(wiki_questions, s, hard=True) for s in ("train", "test")},
    **{f"wiki-qa:{s}": partial(lead_questions, s, hops=1) for s in ("train", "val", "test")},
    **{f"wiki-qa2:{s}": partial(lead_questions, s, hops=2) for s in ("train", "val", "test")},
    **{f"wiki-read:{s}": partial(wh_questions, s) for s in ("train", "val", "test")},
    **{f"wiki-web:{s}": partial(web_side, s) for s in ("train", "test")},
    **{name: partial(web_side, *name.split(":")[1:]) for name in WEB_KIND_SETS},
}
"""Built-in question sets → the function that makes them (docs/data.md, "Built-in, offline
sets"); a ``val`` set is a part of ``train`` for choosing settings (evaluating on it drops it from
training, ``read_questions``)."""
WEB_HELD_OUT = 0.2
"""Share of articles whose questions are ``wiki-web:test`` (0.2: 48 link questions; 0.1: 22)."""
BUILTIN_CORPORA = ("wiki:corpus",)
"""Built-in corpora: ``wiki:corpus`` is ``treegrpo.data.wiki.wiki_corpus()``."""
BUILTIN_MODELS = ("smollm2", "smollm2-protocol", "smollm2-reader", "smollm2-web")
"""Built-in models (``resolve_model``): ``smollm2`` (``prepare_smollm2()``), the others it after
a warm start, built once and cached (docs/real-model.md)."""
BUILTIN_SEARCH_URLS = (WIKI_WEB,)
"""Built-in search URLs: ``wiki:web``, the offline wiki site started in this process."""


@dataclass
class DataInputs:
    """Everything the job reads, ready before any model loads."""

    model_dir: Path
    train: list[Question]
    held_out: list[Question]  # already cut to eval_questions
    tool: SearchTool | Toolbox
    train_source: list[int]  # the file of each training question: its index in train_files
    dropped: int = 0  # training questions left out because they are held out


def check_data(data: DataConfig) -> list[str]:
    """What is wrong with ``data`` as far as names and paths tell (no file is read); [] if
    nothing. Every problem names its field, e.g. ``data.corpus: wiki:corps: unknown …``."""
    problems = []
    if not data.train_files:
        problems.append("data.train_files: give at least one question file (or wiki:train)")
    if data.model is None:
        problems.append(
            "data.model: give a Hugging Face model directory, or a built-in one: "
            + ", ".join(BUILTIN_MODELS)
        )
    elif data.model not in BUILTIN_MODELS and not (Path(data.model) / "config.json").is_file():
        problems.append(f"data.model: {data.model}: not a Hugging Face model directory")
    for field in ("train_files", "eval_files"):
        names = [_check_name(name, BUILTIN_QUESTIONS) for name in getattr(data, field)]
        problems += [f"data.{field}: {problem}" for problem in names if problem]
    problems += check_tools(data)
    if data.train_weights:
        if len(data.train_weights) != len(data.train_files):
            problems.append(
                f"data.train_weights: {len(data.train_weights)} weights for "
                f"{len(data.train_files)} train_files: give one per file"
            )
        elif not all(math.isfinite(w) and w >= 0 for w in data.train_weights) or not any(
            w > 0 for w in data.train_weights
        ):
            problems.append(
                f"data.train_weights: must be finite, >= 0 and not all 0, "
                f"got {list(data.train_weights)}"
            )
    return problems  # ranges: DataConfig's own check


def check_tools(data: DataConfig, p: str = "data.") -> list[str]:
    """What is wrong with ``data``'s search tool and tools; [] if nothing. ``p`` prefixes the
    field names in the problems (``--`` for ``treegrpo eval``'s flags)."""
    problems = []
    passages = "search" in data.tools and data.search_url is None
    if passages and (data.corpus is None) == (data.retriever_url is None):
        problems.append(
            f"{p}corpus / {p}retriever_url: give exactly one (a Search-R1 jsonl corpus to "
            f"search in-process, or the URL of a running /retrieve server), or {p}search_url "
            "for web search"
        )
    elif not passages and (data.corpus is not None or data.retriever_url is not None):
        problems.append(
            f"{p}corpus / {p}retriever_url: no tool searches passages ({p}search_url is "
            f"set, or {p}tools has no search): drop them"
        )
    if problem := _check_search_url(data, p):
        problems.append(problem)
    if {"visit", "find"} & set(data.tools) and data.search_url is None:
        problems.append(
            f"{p}tools: visit and find open web pages; give {p}search_url (SearXNG, a JSON "
            "search API, `treegrpo serve-web`, or wiki:web) so that results have URLs"
        )
    if "find" in data.tools and "visit" not in data.tools:
        problems.append(f"{p}tools: find reads the page last visited: add visit")
    if data.corpus is not None and data.retriever_url is None:
        if problem := _check_name(data.corpus, BUILTIN_CORPORA):
            problems.append(f"{p}corpus: {problem}")
    elif data.retriever_url is not None and data.retriever != "bm25":
        problems.append(
            f"{p}retriever: applies to a corpus; a /retrieve server searches its own way"
        )
    return problems


def _check_search_url(data: DataConfig, p: str = "data.") -> str | None:
    """What is wrong with ``data.search_url`` as a name: an http(s) URL, or a built-in one."""
    url = data.search_url
    if url is None or url.startswith(("http://", "https://")):
        return None
    if url not in BUILTIN_SEARCH_URLS:
        known = ", ".join(BUILTIN_SEARCH_URLS)
        return f"{p}search_url: {url}: give an http(s):// URL or a built-in one ({known})"
    if data.search_api != "searxng":
        return f"{p}search_api: {url} answers as SearXNG does: use searxng"
    return None


def _check_name(name: str, builtin: Collection[str]) -> str | None:
    if name in builtin:
        return None
    prefix = name.split(":", 1)[0]
    if ":" in name and any(b.startswith(prefix + ":") for b in builtin):
        return f"{name}: unknown built-in set (known: {', '.join(builtin)})"
    if not Path(name).is_file():
        return f"{name}: no such file"
    return None


def resolve_questions(names: Sequence[str]) -> list[Question]:
    """The questions of files and built-in sets, in order; a uid seen twice (one set given twice)
    is an error, never a merged group."""
    return [q for part in resolve_question_sets(names) for q in part]


def resolve_question_sets(names: Sequence[str]) -> list[list[Question]]:
    """The questions of each file or built-in set, one list per name (files are read by
    ``load_questions``, strict). A uid seen twice across all of them is an error."""
    out = [BUILTIN_QUESTIONS[n]() if n in BUILTIN_QUESTIONS else load_questions([n]) for n in names]
    seen: dict[str, int] = {}  # uid → index of the first set that holds it
    for i, part in enumerate(out):
        for q in part:
            first = seen.setdefault(q.uid, i)
            if first != i:
                raise ValueError(
                    f"question {q.uid!r} is given twice, in {names[first]} and in {names[i]} "
                    "(a set listed twice, or two files with one data source: give each file "
                    "its own so their groups stay apart)"
                )
    return out


def resolve_model(name: str) -> Path:
    """A model directory: a built-in one built (once) into the cache, else the path itself."""
    if name not in BUILTIN_MODELS:
        return Path(name)
    base = prepare_smollm2()
    if name == "smollm2-protocol":
        return protocol_warm_start(base)
    if name == "smollm2-reader":
        return reader_warm_start(base)
    return web_warm_start(base) if name == "smollm2-web" else base


def resolve_corpus(name: str) -> Path:
    """A Search-R1 jsonl corpus: ``wiki:corpus`` is written (once) into the cache."""
    return wiki_corpus() if name == "wiki:corpus" else Path(name)


def make_tool(data: DataConfig) -> SearchTool | Toolbox:
    """The agent's tools: Search-R1's search alone (a /retrieve server, BM25 or dense search), or
    the toolbox ``data.tools`` and ``data.mcp_servers`` name (``jobs.tools``)."""
    if search_r1_only(data):
        return make_retriever(data)
    return make_toolbox(data, partial(make_retriever, data))


def make_retriever(data: DataConfig) -> SearchTool:
    """The passage retriever: a /retrieve server, or BM25 or dense search over the corpus."""
    if data.retriever_url is not None:
        return RemoteRetriever(data.retriever_url)
    assert data.corpus is not None
    retriever = DenseRetriever if data.retriever == "dense" else BM25Retriever
    return retriever(resolve_corpus(data.corpus))


def eval_inputs(
    name: str, data: DataConfig, limit: int | None = None
) -> tuple[list[EvalItem], SearchTool | Toolbox]:
    """``treegrpo eval``'s first ``limit`` questions of ``name`` (a file or built-in set) and tool
    (``make_tool``), checked and read before any index or site starts. ValueError (the problems,
    by flag) or OSError (missing files)."""
    problem = _check_name(name, BUILTIN_QUESTIONS)
    problems = ([f"--data: {problem}"] if problem else []) + check_tools(data, "--")
    if problems:
        raise ValueError("; ".join(problems))
    questions = resolve_questions([name])[:limit]
    return [EvalItem.of(q) for q in questions], make_tool(data)


def held_out_questions(files: Sequence[str], n: int | None, per_file: bool) -> list[Question]:
    """The held-out questions: ``n`` evenly spaced over all ``files`` together (each keeps its
    share), or ``n`` of each file with ``per_file``."""
    if per_file:
        return [q for part in resolve_question_sets(files) for q in evenly_spaced(part, n)]
    return evenly_spaced(resolve_questions(files), n) if files else []


@dataclass
class Questions:
    """The questions of a data job, read and checked (``read_questions``)."""

    train: list[list[Question]]  # per training file, held-out questions left out
    held_out: list[Question]  # already cut to eval_questions
    dropped: int  # training questions left out because they are held out


def read_questions(data: DataConfig) -> Questions:
    """Check ``data`` and read its questions (cheap: a bad name or row stops before a run directory
    exists); training questions a held-out one asks word for word (``same_question``) are left out,
    counted in ``dropped``. ValueError (bad names, rows) or OSError (missing files, packages)."""
    problems = check_data(data)
    if problems:
        raise ValueError("; ".join(problems))
    sets = resolve_question_sets(data.train_files)
    held_out = held_out_questions(data.eval_files, data.eval_questions, data.eval_per_file)
    asked = {same_question(q.question) for q in held_out}
    kept = [[q for q in part if same_question(q.question) not in asked] for part in sets]
    for name, part, left in zip(data.train_files, sets, kept, strict=True):
        if part and not left:
            raise ValueError(
                f"data.train_files: {name}: all {len(part)} questions are also held out "
                "(data.eval_files)"
            )
    dropped = sum(len(part) for part in sets) - sum(len(part) for part in kept)
    return Questions(kept, held_out, dropped)


def prepare_inputs(data: DataConfig, questions: Questions | None = None) -> DataInputs:
    """The questions (``read_questions``, unless given), model directory and search tool, built or
    loaded from the cache; logs how many training questions are held out (open a run log first)."""
    questions = questions or read_questions(data)
    if questions.dropped:
        log.warning("left %d training questions out: they are held out", questions.dropped)
    assert data.model is not None
    return DataInputs(
        resolve_model(data.model),
        [q for part in questions.train for q in part],
        questions.held_out,
        make_tool(data),
        [f for f, part in enumerate(questions.train) for _ in part],
        questions.dropped,
    )


def same_question(text: str) -> str:
    """A question's wording with case and runs of white space evened out: two questions are
    the same question when these agree (uids differ across files: a Search-R1 train and test
    parquet both number their rows from 0)."""
    return " ".join(text.lower().split())


def held_out_evaluator(inputs: DataInputs, data: DataConfig) -> Evaluator:
    """Greedy evaluation on ``inputs.held_out`` under ``data``'s limits (``run_data``'s reports)."""
    return greedy_evaluator(inputs.tool, [EvalItem.of(q) for q in inputs.held_out], data)


def evaluate_model_dir(
    path: Path, inputs: DataInputs, data: DataConfig, device: str = "auto"
) -> dict[str, Any] | None:
    """The ``held_out_evaluator`` report of the model at ``path`` on ``device`` (None: no held-out
    questions); of ``inputs.model_dir``: the starting report for ``run_data(before=…)``."""
    if not inputs.held_out:
        return None
    model, tokenizer = load_model(path)
    return held_out_evaluator(inputs, data)(model.to(resolve_device(device)), tokenizer, "hf")


def training_mix(files: Sequence[str], weights: Sequence[float], source: Sequence[int]) -> str:
    """One line for the report: each training file's questions and its share of the prompts
    (by size when ``weights`` is empty, else w_f / Σw)."""
    counts = [sum(1 for s in source if s == f) for f in range(len(files))]
    total = sum(weights) if weights else sum(counts)
    parts = [
        f"{name} {n:,} questions, {100 * (weights[f] if weights else n) / max(total, 1e-12):.0f}%"
        for f, (name, n) in enumerate(zip(files, counts, strict=True))
    ]
    how = "weighted by data.train_weights" if weights else "each question once per epoch"
    return f"Training prompts ({how}): " + "; ".join(parts) + "."


def run_data(
    settings: TrainSettings,
    data: DataConfig,
    inputs: DataInputs,
    progress: bool = True,
    before: Report | None = None,
    cluster: ClusterConfig = ClusterConfig(),
) -> dict[str, Any]:
    """``runner.run_job`` on ``inputs``, evaluated on ``settings.model.device``; ``before``:
    ``evaluate_model_dir(inputs.model_dir, …)``, for runs that share the inputs."""
    n_train, n_held_out = len(inputs.train), len(inputs.held_out)

    def report(before: Report | None, after: Report | None) -> list[str]:
        dropped = f" ({inputs.dropped} more left out: held out)" if inputs.dropped else ""
        lines = [f"{n_train} training questions{dropped}, {n_held_out} held out.", ""]
        lines += [training_mix(data.train_files, data.train_weights, inputs.train_source), ""]
        if before is None or after is None:
            return [*lines, "No held-out evaluation (data.eval_files is empty).", ""]
        lines += [compare_table(before, after), ""]
        for name, r in (("before", before), ("after", after)):
            paper = paper_table(r)
            if paper:
                lines += [f"EM {name} training, in the paper's layout:", "", paper, ""]
        return lines

    job = Job(
        model_dir=inputs.model_dir,
        tool=inputs.tool,
        items=[
            TrainItem(q.question, q.golds, q.uid, q.hops, src)
            for q, src in zip(inputs.train, inputs.train_source, strict=True)
        ],
        sampling=SamplingParams(
            temperature=data.temperature, top_p=data.top_p, max_new_tokens=data.max_new_tokens
        ),
        limits=AgentLimits(data.max_turns, data.topk, data.max_context),
        max_obs_tokens=data.max_obs_tokens,
        held_out=held_out_evaluator(inputs, data) if inputs.held_out else None,
        eval_device=settings.model.device,
        report=report,
        summary={
            "questions": {"train": n_train, "held_out": n_held_out, "dropped": inputs.dropped}
        },
        config={"data": asdict(data)},
        mix=tuple(data.train_weights),
    )
    return run_job(job, settings, cluster, before, progress)
