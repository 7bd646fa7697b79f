"""What the ``treegrpo`` commands do: one function per command, called by ``treegrpo.cli.main``
with the command's options (``treegrpo.cli.options``). This module loads torch, transformers,
peft and datasets, so ``treegrpo.cli`` imports it (``cli.COMMANDS``) only when a command runs
(docs/design.md, "Layers")."""

from __future__ import annotations

import contextlib
import functools
import http.server
import inspect
import logging
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from treegrpo.agent.prompt import instruction_text
from treegrpo.cli.options import (
    BenchBudgetOptions,
    BudgetOptions,
    EvaluateOptions,
    PrepareCorpusOptions,
    PrepareModelOptions,
    PrepareOptions,
    ServeMcpOptions,
    ServeOptions,
    ServeWebOptions,
    TrainOptions,
    ViewOptions,
)
from treegrpo.core.budget import CHAIN_LADDER, TREE_LADDER, expected_cost, expected_cost_l1
from treegrpo.data.flashrag import write_flashrag
from treegrpo.data.load import load_questions
from treegrpo.data.searchr1 import searchr1_rows, write_searchr1
from treegrpo.data.wiki import load_articles, wiki_corpus
from treegrpo.distributed.cluster import join_ray
from treegrpo.embedded.synthetic import SYNTHETIC_EVAL
from treegrpo.engine.cpu.speedups import start_process
from treegrpo.eval.evaluate import compare_table, format_table
from treegrpo.eval.run import evaluate_checkpoint, model_directory, synthetic_set
from treegrpo.jobs import data as data_job
from treegrpo.jobs import embedded as embedded_job
from treegrpo.jobs.budget import run as budget_run
from treegrpo.jobs.budget.plan import BenchSettings, bench_settings
from treegrpo.jobs.presets import DEFAULT_DATA, DEFAULT_EMBEDDED, DataConfig, ToolsConfig
from treegrpo.jobs.runner import start_run
from treegrpo.jobs.tools import search_r1_only
from treegrpo.models.load import resolve_device
from treegrpo.models.smollm2 import prepare_smollm2
from treegrpo.retrieval.base import SearchTool
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.retrieval.dense import DenseRetriever
from treegrpo.retrieval.server import create_app
from treegrpo.retrieval.server import serve as run_server
from treegrpo.tools.mcp.server import run as run_mcp_server
from treegrpo.tools.registry import Toolbox
from treegrpo.train.checkpoint import latest_checkpoint
from treegrpo.train.config import ClusterConfig, HealthConfig
from treegrpo.train.health import SearchOutage, TrainingUnhealthy
from treegrpo.train.task import TrainSettings
from treegrpo.train.yaml_config import dump_config
from treegrpo.viz.evalview import write_eval_pages
from treegrpo.viz.report import write_run_report
from treegrpo.viz.trees import write_pages
from treegrpo.website.corpus import WebArticle, read_site_corpus
from treegrpo.website.site import Site, create_site_app

LOG_ENV = "TREEGRPO_LOG"
"""The level of train.log and the progress lines (default INFO; DEBUG adds the phases of every
step: sampling, update, checkpoint)."""


@contextlib.contextmanager
def _stop_on(command: str, *errors: type[Exception]) -> Iterator[None]:
    """Stop ``treegrpo COMMAND`` on ``errors`` with their message as its one line."""
    try:
        yield
    except errors as exc:
        raise SystemExit(f"treegrpo {command}: {exc}") from None


def budget(args: BudgetOptions) -> None:
    """`treegrpo budget`."""
    depth = args.depth
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


def bench_budget(args: BenchBudgetOptions) -> None:
    """`treegrpo bench-budget`."""
    start_process("cpu", None)  # the CPU speed-ups' process-wide part, before any tensor work
    # every option named as a setting is that setting (None: the mode's default)
    given = {f.name: getattr(args, f.name) for f in fields(BenchSettings) if hasattr(args, f.name)}
    ablation = False if args.no_ablation else None
    with _stop_on("bench-budget", ValueError):
        settings = bench_settings(args.quick, args.config, ablation=ablation, **given)
    result = budget_run.run_benchmark(settings)
    if result["failed"]:
        raise SystemExit(f"treegrpo bench-budget: runs failed: {', '.join(result['failed'])}")


def serve(args: ServeOptions) -> None:
    """`treegrpo serve`."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("treegrpo").setLevel(logging.INFO)  # index build/load, not libraries' chatter
    tool: SearchTool
    if args.retriever == "bm25":
        tool = BM25Retriever(args.corpus, cache_dir=args.cache_dir)
    else:
        tool = DenseRetriever(
            args.corpus,
            model=args.model_path,
            query_prefix=args.query_prefix,
            passage_prefix=args.passage_prefix,
            cache_dir=args.cache_dir,
        )
    url = f"http://{args.host}:{args.port}/retrieve"
    print(f"serving {len(tool)} passages ({args.retriever}) on {url}", flush=True)
    app = create_app(tool, max_topk=args.topk_max, **_limits(args, create_app))
    run_server(app, args.host, args.port, args.log_level)


def serve_mcp(args: ServeMcpOptions) -> None:
    """`treegrpo serve-mcp`. Over stdio the protocol owns stdout: nothing else is printed there."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    with _stop_on("serve-mcp", FileNotFoundError):
        path = args.corpus if args.corpus is not None else wiki_corpus(args.cache_dir)
    run_mcp_server(
        path, transport=args.transport, host=args.host, port=args.port, cache_dir=args.cache_dir
    )


def serve_web(args: ServeWebOptions) -> None:
    """`treegrpo serve-web`."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("treegrpo").setLevel(logging.INFO)  # index build/load, start-up time
    with _stop_on("serve-web", FileNotFoundError, ValueError):  # no wiki package, a bad line
        if args.corpus is None:
            articles = [WebArticle(a.title, a.extract, a.description) for a in load_articles()]
        else:
            articles = read_site_corpus(args.corpus)
        site = Site(articles, cache_dir=args.cache_dir)
    print(
        f"serving {len(site.articles)} pages ({site.n_links} links, ready in "
        f"{site.startup_s:.1f} s) on http://{args.host}:{args.port}/",
        flush=True,
    )
    app = create_site_app(site, **_limits(args, create_site_app))
    run_server(app, args.host, args.port, args.log_level)


def _limits(options: Any, make_app: Callable[..., Any]) -> dict[str, Any]:
    """The options ``make_app`` takes as keyword-only arguments of the same name (its limits)."""
    params = inspect.signature(make_app).parameters
    keyword = {name for name, p in params.items() if p.kind is p.KEYWORD_ONLY}
    return {f.name: getattr(options, f.name) for f in fields(options) if f.name in keyword}


def train(args: TrainOptions) -> None:
    """`treegrpo train`."""
    data, run, model, cluster = args.data, args.run, args.model, args.cluster
    job, sections = _train_sections(args)
    origin = f"{args.config} and flags" if args.config is not None else "the preset and flags"
    if args.dry_run:
        print(f"# treegrpo train --dry-run: the {job} job with these settings ({origin})")
        print(dump_config(sections), end="")
        return
    # the CPU speed-ups' process-wide part (engine.cpu.speedups), before any tensor work
    start_process(resolve_device(model.device), model.cpu_speedups)
    if job == "data":  # questions first: a broken row stops before a run directory is made
        with _stop_on("train", ValueError, OSError):
            questions = data_job.read_questions(data)
    with _stop_on("train", ValueError):  # before anything is written into it
        out = start_run(run)
        if cluster.rollout_workers or cluster.train_ranks:  # before a warm start or evaluation
            join_ray(cluster)  # refuses workers and ranks the cluster can never hold
    resolved = out / "config.yaml"
    if not (run.resume and resolved.exists()):  # a resumed run keeps its first settings file
        resolved.write_text(f"# resolved settings of this run ({origin})\n{dump_config(sections)}")
    console = Console()
    if run.resume and latest_checkpoint(out) is None and console.is_terminal:
        # the trainer says so in train.log, which a terminal does not show
        console.print(f"[yellow]--run.resume: {out} holds no checkpoint; training from step 0")
    # train.log from here on: preparing the inputs (warnings, a warm start's build) is part of it
    with _progress_lines(out / "train.log", console):
        if job == "data":
            try:  # the model (a built-in one is built here) and the search index
                inputs = data_job.prepare_inputs(data, questions)
            except (ValueError, OSError) as exc:
                logging.getLogger("treegrpo").error("%s", exc)
                raise SystemExit(f"treegrpo train: {exc}") from None
        try:
            settings = TrainSettings(args.algo, args.optim, run, model, args.health)
            if job == "data":
                summary = data_job.run_data(settings, data, inputs, cluster=cluster)
            else:
                summary = embedded_job.run_embedded(settings, args.world, cluster=cluster)
        except (TrainingUnhealthy, SearchOutage) as exc:  # the checkpoints so far are kept
            logging.getLogger("treegrpo").error("stopped: %s", exc)
            raise SystemExit(f"treegrpo train: stopped: {exc}; --run.resume continues") from None
        finally:  # a toolbox's web clients and MCP connections (stdio servers exit)
            if job == "data" and isinstance(inputs.tool, Toolbox):
                inputs.tool.close()
    if job == "data" and summary["before"] is not None and summary["after"] is not None:
        console.print(compare_table(summary["before"], summary["after"]))
    elif job == "embedded":
        console.print(embedded_job.before_after_table(summary["before"], summary["after"]))
    if summary.get("collapse"):
        console.print(f"[bold yellow]warning: {summary['collapse']}")
    console.print(f"run directory: {run.out_dir} ({summary['seconds']['total']:.0f} s)")


def _train_sections(args: TrainOptions) -> tuple[str, dict[str, Any]]:
    """Which job `treegrpo train` runs (embedded, or data when questions are given) and the
    sections it resolves to; settings of the other job, or data that cannot run, stop it."""
    data, world = args.data, args.world
    job = "data" if data.train_files or "data" in args.config_sections else "embedded"
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
    if job == "data" and (problems := data_job.check_data(data)):
        raise SystemExit("treegrpo train: " + "; ".join(problems))
    sections: dict[str, Any] = {"algo": args.algo, "optim": args.optim, "run": args.run}
    sections |= {"model": args.model}
    sections |= {"data": data} if job == "data" else {"world": world}
    sections |= {"cluster": args.cluster} if args.cluster != ClusterConfig() else {}
    sections |= {"health": args.health} if args.health != HealthConfig() else {}
    return job, sections


@contextlib.contextmanager
def _progress_lines(path: Path, console: Console) -> Iterator[None]:
    """Progress of every phase (warm start, evaluations, each RL step) as lines appended to
    ``path``, and on stdout when it is no terminal (a pipe, a batch job's log: no progress bars)."""
    fmt = logging.Formatter("%(asctime)s %(name)s: %(message)s")
    level = os.environ.get(LOG_ENV, "INFO").upper()  # DEBUG adds each step's phases
    handlers: list[logging.Handler] = [logging.FileHandler(path)]
    if not console.is_terminal:
        handlers.append(logging.StreamHandler(sys.stdout))
    root = logging.getLogger("treegrpo")
    root.setLevel(level)
    for h in handlers:
        h.setFormatter(fmt)
        h.setLevel(level)
        root.addHandler(h)
    try:
        yield
    finally:
        for h in handlers:
            root.removeHandler(h)
            h.close()


def evaluate(args: EvaluateOptions) -> None:
    """`treegrpo eval`."""
    start_process(resolve_device(args.device), None)  # engine.cpu.speedups, first
    # inputs first: bad rows, missing files or flags that do not fit stop it before a model loads
    with _stop_on("eval", ValueError, OSError):
        cfg = _eval_config(args)
        built_in = str(args.model) in data_job.BUILTIN_MODELS  # built (once) after the inputs
        model = args.model if built_in else model_directory(args.model)
        if args.data != SYNTHETIC_EVAL:  # a file or built-in set with the tools cfg names
            items, tool = data_job.eval_inputs(args.data, cfg, args.limit)
        elif cfg.corpus is not None or cfg.retriever_url is not None or cfg.search_url:
            raise ValueError(f"{SYNTHETIC_EVAL} searches its own world: drop the corpus/retriever")
        else:  # the embedded job's held-out world
            items, tool = synthetic_set(args.world_seed, args.limit)
        model = data_job.resolve_model(str(model)) if built_in else model
    shown = ("corpus", "retriever_url") if search_r1_only(cfg) else _TOOL_FIELDS
    settings = {
        "data": args.data,
        **{k: getattr(cfg, k) for k in shown},
        "questions": len(items),
        **{k: getattr(cfg, k) for k in _EVAL_LIMITS},
        "engine": args.engine,
    }
    try:
        report = evaluate_checkpoint(
            model,
            items,
            tool,
            args.out,
            cfg,
            args.batch_size,
            args.device,
            settings,
            args.engine,
        )
    finally:  # a toolbox's web clients and MCP connections (stdio servers exit)
        if isinstance(tool, Toolbox):
            tool.close()
    Console().print(format_table(report, f"{model} on {args.data}"))
    Console().print(f"wrote {args.out / 'eval.json'} and {args.out / 'eval.md'}")


_EVAL_LIMITS = ("max_turns", "topk", "max_new_tokens", "max_obs_tokens", "max_context")
_TOOL_FIELDS = tuple(f.name for f in fields(ToolsConfig))


def _eval_config(args: EvaluateOptions) -> DataConfig:
    """The tools and limits of `treegrpo eval` as a checked ``DataConfig``. Limits left out are
    the ones the questions were trained under: the embedded job's on its world, the paper's
    (``DataConfig``'s defaults) on dataset files."""
    if (args.limit is not None and args.limit < 1) or args.batch_size < 1:
        raise ValueError(
            f"--limit and --batch-size must be >= 1 (got {args.limit}, {args.batch_size})"
        )
    base: Any = DEFAULT_EMBEDDED if args.data == SYNTHETIC_EVAL else DEFAULT_DATA
    given = {k: getattr(args, k) for k in _EVAL_LIMITS}
    return DataConfig(  # checks the limits' and the tools' ranges
        **{k: getattr(base, k) if v is None else v for k, v in given.items()},
        **{k: getattr(args, k) for k in _TOOL_FIELDS},
    )


def prepare(args: PrepareOptions) -> None:
    """`treegrpo prepare`."""
    input, out, source, split = args.input, args.out, args.source, args.split
    if source and len(source) != len(input):
        raise SystemExit(
            f"treegrpo prepare: {len(source)} --source values for {len(input)} --input files: "
            "give one per file or none"
        )
    with _stop_on("prepare", ValueError, OSError):  # bad rows, colliding ids, missing files
        questions = load_questions(input, source or None)
        write_searchr1(out, searchr1_rows(questions, split, instruction_text))
    counts = ", ".join(f"{k}: {n}" for k, n in Counter(q.source for q in questions).items())
    print(f"wrote {len(questions)} questions ({counts}) to {out}")


def prepare_model(args: PrepareModelOptions) -> None:
    """`treegrpo prepare-model` (smollm2 is the one model)."""
    with _stop_on("prepare-model", FileNotFoundError):
        path = prepare_smollm2(args.cache_dir)
    print(path)


def prepare_corpus(args: PrepareCorpusOptions) -> None:
    """`treegrpo prepare-corpus` (wiki is the one corpus)."""
    questions_dir = args.questions_dir
    with _stop_on("prepare-corpus", FileNotFoundError):
        path = wiki_corpus(args.cache_dir)
    if questions_dir is not None:  # every built-in set is one of the wiki corpus
        for set_name, make in data_job.BUILTIN_QUESTIONS.items():
            if set_name in data_job.WEB_KIND_SETS:  # parts of the wiki-web files (metadata.kind)
                continue
            out = questions_dir / f"{set_name.replace(':', '-')}.jsonl"  # wiki-qa:val → wiki-qa-val
            questions = make()
            if not questions:  # an empty file would not read back as a question file
                print(f"{set_name}: no questions, not written", file=sys.stderr)
                continue
            n = write_flashrag(out, questions)
            print(f"wrote {n} {set_name} questions to {out}", file=sys.stderr)
    print(path)


def view(args: ViewOptions) -> None:
    """`treegrpo view`."""
    runs, out, serve, port = args.runs, args.out, args.serve, args.port
    if not 1 <= len(runs) <= 2:
        raise SystemExit(f"treegrpo view: give one run directory or two, got {len(runs)}")
    evals = []
    for run in runs:
        if (run / "forests").is_dir():
            pages = write_pages(run)
            print(f"wrote {len(pages) - 1} tree pages and {pages[0]}")
        evals += write_eval_pages(run)
    for page in evals:
        print(f"wrote {page}")
    if len(runs) == 1 and evals and not (runs[0] / "metrics.jsonl").exists():
        return  # a `treegrpo eval` directory: its chains are all there is to draw
    first = runs[0]
    default = first / "report.html" if len(runs) == 1 else first / f"compare-{runs[1].name}.html"
    with _stop_on("view", FileNotFoundError, ValueError):
        page = write_run_report(runs, out or default)
    print(f"wrote {page}")
    if serve:
        handler = functools.partial(
            http.server.SimpleHTTPRequestHandler, directory=str(page.parent)
        )
        with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as httpd:
            print(f"serving on http://127.0.0.1:{port}/{page.name} (Ctrl-C stops)")
            with contextlib.suppress(KeyboardInterrupt):
                httpd.serve_forever()
