"""Presets and job settings: the embedded job's world, the data job's model, datasets and tools
(``DataConfig`` lists every built-in name), a run config file's sections. Plain dataclasses on
``train.config``: a tool reads and writes run configs without loading the jobs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from treegrpo.embedded.names import POOL_SIZE
from treegrpo.embedded.relations import RELATIONS
from treegrpo.engine.cpu.paths import LinearPath
from treegrpo.train.config import (
    AlgorithmConfig,
    Checked,
    ClusterConfig,
    ConfigValueError,
    HealthConfig,
    ModelConfig,
    OptimConfig,
    RunConfig,
    check_ranges,
)


@dataclass(frozen=True)
class EmbeddedConfig(Checked):
    """The synthetic world and the agent's limits in it."""

    world_seed: int = 0
    """Seed of the training world (the evaluation world uses another seed)."""
    people: int = 100
    """People per world (of the 160-name pool; one passage each)."""
    questions: int = 400
    """Questions per world, a quarter each of 1, 2, 3 and 4 hops."""
    eval_questions: int = 400
    """Held-out questions evaluated before and after training (evenly spaced over the eval
    world's list, so each hop count keeps its quarter)."""
    max_turns: int = 4
    """Steps that may search before the final step (the longest questions need 4)."""
    topk: int = 1
    """Passages per search (one fact per passage; see ``warmstart.tiny``)."""
    max_new_tokens: int = 32
    """Tokens per agent step."""
    max_obs_tokens: int = 160
    """Tokens per observation."""
    max_context: int = 1024
    """Prompt plus all steps, in tokens."""
    temperature: float = 1.0
    """Sampling temperature during training, the paper's (evaluation is greedy)."""
    web: bool = False
    """The web variant (``embedded.web``): a search lists page titles only, the fact needs a
    ``visit``; its own warm start (configs/embedded-web.yaml; give it max_turns 8)."""
    warm_start_seed: int = 0
    """Seed of the warm start (model initialization, demonstrations, batch order): another
    seed is another starting policy of the same recipe, built once and cached."""
    warm_start_linear: LinearPath = "auto"
    """Linear-layer path of the warm start's SFT: mkl, onednn, or auto (this CPU's default).
    The two differ by fp32 rounding only, yet give different starting policies."""
    demo_anchor: Literal["mix", "oracle"] = "mix"
    """The demonstrations of ``algo.demo_coef``'s term: the warm start's own (mix: all of
    them, flaws included) or only its flawless ones (oracle)."""

    def _check(self) -> None:
        people = f"in [{len(RELATIONS) + 2}, {POOL_SIZE}]"  # someone else for every relation
        check_ranges(self, world_seed=">= 0", people=people, questions=">= 1")
        check_ranges(self, eval_questions=">= 1", max_turns=">= 0", topk=">= 1")
        check_ranges(self, max_new_tokens=">= 1", max_obs_tokens=">= 1", max_context=">= 1")
        check_ranges(self, temperature="> 0", warm_start_seed=">= 0")


# The embedded default: Tree-GRPO at budget ≈ 8, (M, N, L) = (2, 6, 1), 14 leaves per prompt, sized
# for 2 CPU cores (at ≈ 4 half the first step's prompts had no signal and one seed in five could
# stall: BENCHMARKS.md, "Embedded default"). Exact match alone (no format bonus), uniform prompts
# left out, and a batch-relative baseline of weight 1 beside the paper's group-relative ones (0
# gives the paper's advantages exactly): why each, docs/algorithm.md, section 9.
DEFAULT_ALGO = AlgorithmConfig(
    algo="tree", m=2, n=6, l=1, format_score=0.0, skip_uniform_prompts=True, batch_baseline=1.0
)
DEFAULT_OPTIM = OptimConfig(
    lr=3e-4, weight_decay=0.0, mini_batch_prompts=4, micro_batch_tokens=8192
)
# held-out EM every 5 steps (400 questions take seconds), so report.html draws the real curve
DEFAULT_RUN = RunConfig(
    out_dir="runs/default", steps=50, prompts_per_step=16, save_every=10, eval_every=5
)
DEFAULT_EMBEDDED = EmbeddedConfig()


@dataclass(frozen=True)
class ToolsConfig:
    """The agent's search tool and tools (docs/tools.md): the data job's (``DataConfig``) and
    `treegrpo eval`'s, which take the same fields."""

    corpus: str | None = None
    """Search-R1 jsonl corpus searched in-process, or "wiki:corpus" (else give retriever_url)."""
    retriever_url: str | None = None
    """A running Search-R1 /retrieve server, e.g. http://127.0.0.1:8000/retrieve."""
    tools: tuple[str, ...] = ("search",)
    """The agent's tools, in the prompt's order (docs/tools.md): search (the corpus's or the
    /retrieve server's passages, or web results with search_url), visit (opens a result or a
    URL), find (a phrase in the page last visited), calculate (arithmetic); search alone is
    Search-R1's agent."""
    search_url: str | None = None
    """A web search back-end for search, instead of corpus or retriever_url: a SearXNG instance
    or `treegrpo serve-web` (http://127.0.0.1:8080), or a JSON API (search_api json); or
    wiki:web, the offline wiki site started in this process (pages at http://wiki.test/...)."""
    search_api: Literal["searxng", "json"] = "searxng"
    """How search_url answers: SearXNG's JSON API, or any JSON API read with json_fields."""
    json_fields: tuple[str, ...] = ("results", "title", "url", "snippet")
    """search_api json: the dotted path of the results list, then each result's title, URL and
    snippet fields."""
    visit_chars: int = 2000
    """Characters of a visited page's observation (its passages that match the goal)."""
    mcp_servers: tuple[str, ...] = ()
    """MCP servers whose tools the agent calls too (docs/mcp.md): a command run over stdio
    ("python -m treegrpo.tools.mcp.server --corpus c.jsonl") or an http(s) URL (streamable HTTP)."""


@dataclass(frozen=True)
class DataConfig(Checked, ToolsConfig):
    """The data-driven job (`treegrpo train --data.train-files …`): the starting model, the
    question files, the search tool and the agent's limits (defaults: the paper's QA runs).
    Built-in, offline names (``treegrpo.jobs.data`` resolves them; docs/data.md): questions
    "wiki:train" and "wiki:test" (the answer is an article's title), "wiki-hard:train" and
    "wiki-hard:test" (the same, the short description the only clue), "wiki-qa:train",
    "wiki-qa:val" and "wiki-qa:test" (the answer is a span of a passage), "wiki-qa2:train",
    "wiki-qa2:val" and "wiki-qa2:test" (the same through two articles), "wiki-read:train",
    "wiki-read:val" and "wiki-read:test" (reworded wh-questions on any sentence of a passage);
    a val set is a part of train, for choosing settings. "wiki-web:train" and "wiki-web:test":
    web questions for `treegrpo serve-web` (in a snippet, in a page, one link away), and one
    kind of them each: "wiki-web:train:in-snippet", "wiki-web:train:in-page", "wiki-web:train:link",
    "wiki-web:test:in-snippet", "wiki-web:test:in-page" and "wiki-web:test:link". Corpus
    "wiki:corpus"; models "smollm2", "smollm2-protocol", "smollm2-reader" and "smollm2-web"."""

    model: str | None = None
    """Hugging Face model directory to start from, or a built-in: "smollm2" (SmolLM2-135M-Instruct,
    built offline by `treegrpo prepare-model smollm2`), "smollm2-protocol", "smollm2-reader" or
    "smollm2-web" (it after a warm start, built once and cached)."""
    train_files: tuple[str, ...] = ()
    """Training questions: Search-R1 parquet or FlashRAG jsonl files, or built-in sets such as
    "wiki-qa:train" (given: the data-driven job runs instead of the embedded one)."""
    train_weights: tuple[float, ...] = ()
    """Sampling weight of each training file, one per train_files entry: a prompt comes from
    file f with probability w_f / Σw, so a small set (two-hop questions beside a large one-hop
    set) can take a fixed share of every step; its questions then repeat epoch after epoch.
    Empty: every question once per epoch (each file's share is its size)."""
    eval_files: tuple[str, ...] = ()
    """Held-out questions evaluated greedily before and after training, files or built-in sets
    such as "wiki-qa:test" (none: no evaluation)."""
    eval_questions: int | None = 1000
    """Evaluate this many of them, evenly spaced so every file keeps its share (None: all)."""
    eval_per_file: bool = False
    """``eval_questions`` counts per eval file (each file's own evenly spaced ones), so a small
    file (a two-hop set beside a large single-hop one) is not left with a handful."""
    retriever: Literal["bm25", "dense"] = "bm25"
    """How the corpus is searched: bm25 (bm25s) or dense (sentence-transformers + FAISS)."""
    max_turns: int = 3
    """Steps that may search before the final step."""
    topk: int = 3
    """Passages per search."""
    max_new_tokens: int = 500
    """Tokens per agent step."""
    max_obs_tokens: int = 500
    """Tokens per observation (longer ones are truncated)."""
    max_context: int = 4096
    """Prompt plus all steps and observations, in tokens."""
    temperature: float = 1.0
    """Sampling temperature during training (evaluation is greedy)."""
    top_p: float = 0.95
    """Nucleus sampling during training (the paper's 0.95)."""

    def _check(self) -> None:
        # Names, paths and train_weights against train_files: treegrpo.jobs.data.check_data.
        check_ranges(self, eval_questions=">= 1", max_turns=">= 0", topk=">= 1")
        check_ranges(self, max_new_tokens=">= 1", max_obs_tokens=">= 1", max_context=">= 1")
        check_ranges(self, temperature="> 0", top_p="in (0, 1]", visit_chars=">= 200")
        if not set(self.tools) <= set(BUILTIN_TOOLS):
            known = ", ".join(BUILTIN_TOOLS)
            raise ConfigValueError("tools", f"must each be one of {known}", self.tools)
        if len(set(self.tools)) < len(self.tools):
            raise ConfigValueError("tools", "must name each tool once", self.tools)
        if not self.tools and not self.mcp_servers:
            raise ConfigValueError("tools", "must name a tool (or give mcp_servers)", self.tools)
        if len(self.json_fields) != 4:
            raise ConfigValueError(
                "json_fields", "must be 4: results path, title, URL, snippet", self.json_fields
            )


BUILTIN_TOOLS = ("search", "visit", "find", "calculate")
"""The tools ``DataConfig.tools`` names (``jobs.data.make_tool`` builds them)."""


DEFAULT_DATA = DataConfig()

# The sections of a `treegrpo train --config` file (configs/*.yaml) and their defaults: the
# embedded preset. `treegrpo bench budget --config` reads the same files.
TRAIN_SECTIONS: dict[str, Any] = {
    "algo": DEFAULT_ALGO,
    "optim": DEFAULT_OPTIM,
    "run": DEFAULT_RUN,
    "world": DEFAULT_EMBEDDED,
    "model": ModelConfig(),
    "data": DEFAULT_DATA,
    "cluster": ClusterConfig(),
    "health": HealthConfig(),
}
