"""Shared fixtures: tokenizers with and without the protocol tags as single tokens, the tiny
agent as a model directory, and question files with a corpus for the data-driven job."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from agent_fixtures import CORPUS, FACTS, PEOPLE, TAGS, trained_agent
from treegrpo.models.tiny import train_bpe_tokenizer

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
    from treegrpo.tools.corpus import write_corpus

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


# Test tiers. `slow` marks tests that train, build a warm start or run a job (seconds to
# minutes each); `pytest -m "not slow"` is the fast tier for development. `make test` runs all
# of them with --fail-on-skip: a test skipped there for a missing extra or resource fails CI,
# unless it carries one of the markers named by --allow-skip (the vLLM tests, which run in
# their own environment).
def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fail-on-skip",
        action="store_true",
        help="fail the run if any test was skipped (see --allow-skip)",
    )
    parser.addoption(
        "--allow-skip",
        default="",
        help="comma-separated markers whose tests may skip under --fail-on-skip",
    )


_SKIPPED: list[str] = []


def _record_skip(report: pytest.TestReport | pytest.CollectReport, config: pytest.Config) -> None:
    """Remember a skip that --fail-on-skip does not allow: one whose markers and reason name none
    of the --allow-skip words."""
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    allowed = {w for w in config.getoption("--allow-skip").split(",") if w}
    reason = str(report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr)
    names = set(getattr(report, "keywords", {})) | set(reason.lower().split())
    if not any(w in names or w in reason.lower() for w in allowed):
        _SKIPPED.append(f"{report.nodeid}: {reason}")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _record_skip(report, _CONFIG[0])


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _record_skip(report, _CONFIG[0])


_CONFIG: list[pytest.Config] = []


def pytest_configure(config: pytest.Config) -> None:
    _CONFIG[:] = [config]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if session.config.getoption("--fail-on-skip") and _SKIPPED and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if terminalreporter.config.getoption("--fail-on-skip") and _SKIPPED:
        terminalreporter.write_line(
            f"--fail-on-skip: {len(_SKIPPED)} test(s) skipped that this run must execute "
            "(install what their skip reason names):",
            red=True,
        )
        for nodeid in _SKIPPED:
            terminalreporter.write_line(f"  {nodeid}")
