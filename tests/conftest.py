"""Shared fixtures: tokenizers with and without the protocol tags as single tokens, the tiny
agent as a model directory, question files with a corpus for the data-driven job, and twenty
one-topic passages (tests/passages.py) with their jsonl file."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
if "PYTEST_XDIST_WORKER" in os.environ:  # `make test` runs two workers: one thread each
    os.environ.setdefault("OMP_NUM_THREADS", "1")

from agent_fixtures import CORPUS, FACTS, PEOPLE, TAGS, trained_agent
from passages import TOPICS
from treegrpo.models.tiny import train_bpe_tokenizer
from treegrpo.retrieval.base import Passage
from treegrpo.retrieval.corpus import make_contents, write_corpus

TEXTS = [
    "<think>I should search for the capital of France</think><search>capital of France</search>",
    '<information>Doc 1(Title: "Paris") Paris is the capital of France.</information>',
    "<answer>Paris</answer> and then some more words, numbers 123 and symbols >< /.",
] * 20


@pytest.fixture(scope="session")
def split_tokenizer():  # type: ignore[no-untyped-def]
    """Byte-level BPE where tags are several tokens ('</', 'answer', '>')."""
    return train_bpe_tokenizer(TEXTS, vocab_size=300)


@pytest.fixture(scope="session")
def tag_tokenizer():  # type: ignore[no-untyped-def]
    """The same with each protocol tag as one special token."""
    return train_bpe_tokenizer(TEXTS, vocab_size=300, special_tokens=TAGS)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tests' tiny trained agent saved as a Hugging Face model directory."""
    agent = trained_agent()
    path = tmp_path_factory.mktemp("model")
    agent.model.save_pretrained(path)
    agent.tokenizer.save_pretrained(path)
    return path


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A BM25 corpus (Search-R1 jsonl) and FlashRAG question files about it: "train" (6
    questions, source "toy") and "test" (4, sources "nq" and "hotpotqa", no hop counts); the
    cache goes to tmp_path."""
    from treegrpo.retrieval.corpus import write_corpus

    monkeypatch.setenv("TREEGRPO_CACHE_DIR", str(tmp_path / "cache"))
    corpus = tmp_path / "corpus.jsonl"
    write_corpus(corpus, CORPUS)

    def questions(path: Path, people: list[str], sources: list[str]) -> Path:
        rows = [
            {"id": str(i), "question": f"Where was {p} born", "golden_answers": [FACTS[p]]}
            | {"data_source": sources[i % len(sources)]}
            for i, p in enumerate(people)
        ]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    return {
        "corpus": corpus,
        "train": questions(tmp_path / "train.jsonl", PEOPLE[:6], ["toy"]),
        "test": questions(tmp_path / "test.jsonl", PEOPLE[4:], ["nq", "hotpotqa"]),
    }


@pytest.fixture(autouse=True)
def _denormals_restored() -> Iterator[None]:
    """The commands flush denormals for their whole process (``engine.cpu.denormal``); tests run
    many commands in one process, so each test leaves the default mode behind it."""
    yield
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_flush_denormal(False)


# The files that take a minute or more on 2 cores, longest first. `make unit` hands whole files to
# two workers in collection order (--dist loadfile --no-loadscope-reorder): these go first, so
# that no worker is left with a long file while the other has finished the rest.
LONG_FILES = (
    "tests/reliability/test_more_kills.py",
    "tests/train/test_shared_smollm2.py",
    "tests/reliability/test_kills.py",
    "tests/reliability/test_budget_kills.py",
    "tests/distributed/test_fsdp.py",
    "tests/distributed/test_ray_expansion.py",
    "tests/distributed/test_ray_rollout.py",
    "tests/jobs/budget/test_bench.py",
    "tests/rollout/test_search_failures.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    root = Path(__file__).parents[1]
    missing = [path for path in LONG_FILES if not (root / path).is_file()]
    if missing:
        raise pytest.UsageError(f"tests/conftest.py LONG_FILES names missing files: {missing}")
    rank = {path: i for i, path in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable


# `make test` runs the suite with --fail-on-skip: a test skipped for a missing extra or resource
# fails CI, unless its markers or its skip reason name one of the --allow-skip words (the vLLM
# tests, which `make test-vllm` runs in their own environment).
def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fail-on-skip",
        action="store_true",
        help="fail the run if any test was skipped (see --allow-skip)",
    )
    parser.addoption(
        "--allow-skip",
        default="",
        help="comma-separated words: skips whose markers or reason name one are allowed",
    )


_SKIPS: list[tuple[str, set[str], str]] = []  # (node id, markers, reason) of every skip


def _record(report: pytest.TestReport | pytest.CollectReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        longrepr = report.longrepr
        reason = str(longrepr[2] if isinstance(longrepr, tuple) else longrepr)
        _SKIPS.append((report.nodeid, set(getattr(report, "keywords", {})), reason))


pytest_runtest_logreport = _record
pytest_collectreport = _record


def _refused(config: pytest.Config) -> list[str]:
    """The skips --fail-on-skip does not allow, as "node id: reason"."""
    if not config.getoption("--fail-on-skip"):
        return []
    allowed = [w for w in config.getoption("--allow-skip").split(",") if w]
    return [
        f"{node}: {reason}"
        for node, markers, reason in _SKIPS
        if not any(w in markers or w in reason.lower() for w in allowed)
    ]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus == 0 and _refused(session.config):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    refused = _refused(terminalreporter.config)
    if refused:
        terminalreporter.write_line(
            f"--fail-on-skip: {len(refused)} test(s) skipped that this run must execute "
            "(install what their skip reason names):",
            red=True,
        )
        for line in refused:
            terminalreporter.write_line(f"  {line}")


@pytest.fixture(scope="session")
def passages() -> list[Passage]:
    """Twenty one-topic passages with ids "0".."19"."""
    return [Passage(str(i), make_contents(t, x)) for i, (t, x) in enumerate(TOPICS)]


@pytest.fixture
def corpus_file(tmp_path: Path, passages: list[Passage]) -> Path:
    """The twenty passages as a Search-R1 jsonl file."""
    path = tmp_path / "corpus.jsonl"
    write_corpus(path, passages)
    return path
