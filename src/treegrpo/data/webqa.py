"""Readers for public web-QA files as they ship (WebWalkerQA, SimpleQA, GAIA, BrowseComp):
questions in file order, uids ``<source>-<id>``, skipped rows counted by reason. Fields, kinds,
skips and BrowseComp's decryption: docs/data.md, "Public web-QA files".
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from treegrpo.data.errors import DataError
from treegrpo.data.types import Question
from treegrpo.data.webqa_rows import RowFields, first_row, read_rows

log = logging.getLogger(__name__)


@dataclass
class WebQARead:
    """What a reader got from a file: its questions and the rows it skipped, by reason."""

    questions: list[Question]
    skipped: Counter[str] = field(default_factory=Counter)


def read_webwalkerqa(
    path: str | Path, source: str | None = None, *, with_root_url: bool = True
) -> WebQARead:
    """WebWalkerQA rows (see the module docstring)."""
    return _read(path, source or "webwalkerqa", partial(_webwalkerqa, with_root_url=with_root_url))


def read_simpleqa(path: str | Path, source: str | None = None) -> WebQARead:
    """SimpleQA rows (see the module docstring)."""
    return _read(path, source or "simpleqa", _simpleqa)


def read_gaia(path: str | Path, source: str | None = None) -> WebQARead:
    """GAIA's text questions; rows with an attached file or no public answer are skipped."""
    return _read(path, source or "gaia", _gaia)


def read_browsecomp(path: str | Path, source: str | None = None) -> WebQARead:
    """BrowseComp rows, encrypted (decrypted with each row's canary) or not (module docstring)."""
    return _read(path, source or "browsecomp", _browsecomp)


Parsed = tuple[int | str, str, str, int, str]
"""What a reader takes from a row: (id, question, answer, hops, kind)."""


def _read(path: str | Path, source: str, parse: Callable[[RowFields], Parsed | str]) -> WebQARead:
    """Each row through ``parse``: a question, or why it is skipped (counted by reason, logged)."""
    path = Path(path)
    out = WebQARead([])
    for row in read_rows(path):
        got = parse(RowFields(path, row))
        if isinstance(got, str):
            out.skipped[got] += 1
        else:
            index, text, answer, hops, kind = got
            q = Question(f"{source}-{index}", text, (answer,), source, hops, index=index, kind=kind)
            out.questions.append(q)
    if out.skipped:
        counts = ", ".join(f"{n} {why}" for why, n in out.skipped.items())
        log.warning("%s: skipped %s", path, counts)
    if not out.questions:
        why = f" (skipped: {dict(out.skipped)})" if out.skipped else ""
        raise DataError(path, f"no questions{why}")
    return out


def _webwalkerqa(r: RowFields, *, with_root_url: bool) -> Parsed:
    question, answer = r.text("Question"), r.text("Answer")
    root = r.text("Root_Url")
    info = r.mapping("Info")
    hop = r.string("Info.Hop", info.get("Hop", ""))
    hops = 1 if hop.startswith("single") else 2 if hop.startswith("multi") else 0
    if with_root_url:
        question = f"{question}\nRoot URL: {root}"
    return r.row.row, question, answer, hops, hop


def _simpleqa(r: RowFields) -> Parsed:
    problem, answer = r.text("problem"), r.text("answer")
    meta = r.mapping("metadata")
    kind = meta.get("answer_type", r.row.fields.get("answer_type", ""))
    kind = r.string("metadata.answer_type", kind)
    return r.row.row, problem, answer, 0, kind


def _gaia(r: RowFields) -> Parsed | str:
    task, question = r.text("task_id"), r.text("Question")
    answer = r.text("Final answer")
    attached = r.row.fields.get("file_name") not in (None, "") and r.text("file_name")
    if attached:
        return "needs an attached file"
    if answer == "?":
        return "answer not public"
    level = r.row.fields.get("Level", "")
    kind = f"level-{level}" if level not in ("", None) else ""
    return task, question, answer, 0, kind


def _browsecomp(r: RowFields) -> Parsed:
    """A BrowseComp row, decrypted when it is encrypted."""
    problem, answer = r.text("problem"), r.text("answer")
    canary = r.text("canary", empty=True) if "canary" in r.row.fields else ""
    if canary and _is_base64(problem):
        problem, answer = (_decrypt(r, name, canary) for name in ("problem", "answer"))
    topic = r.text("problem_topic", empty=True) if "problem_topic" in r.row.fields else ""
    return r.row.row, problem, answer, 0, topic


def decrypt(ciphertext_b64: str, password: str) -> str:
    """BrowseComp's cipher (simple-evals): base64, XOR by ``password``'s SHA-256 digest, UTF-8."""
    data = base64.b64decode(ciphertext_b64)
    digest = hashlib.sha256(password.encode()).digest()
    key = digest * (len(data) // len(digest) + 1)
    return bytes(a ^ b for a, b in zip(data, key, strict=False)).decode("utf-8")


READERS: dict[str, Callable[..., WebQARead]] = {
    "webwalkerqa": read_webwalkerqa,
    "simpleqa": read_simpleqa,
    "gaia": read_gaia,
    "browsecomp": read_browsecomp,
}


def webqa_reader(path: str | Path) -> str | None:
    """The ``READERS`` name its first row's fields call for, or None (FlashRAG's, for one)."""
    row = first_row(path)
    if row is None:
        return None
    keys = set(row)
    if {"Question", "Answer", "Root_Url"} <= keys:
        return "webwalkerqa"
    if {"task_id", "Question", "Final answer"} <= keys:
        return "gaia"
    if {"problem", "answer"} <= keys:
        return "browsecomp" if keys & {"canary", "problem_topic"} else "simpleqa"
    return None


def read_webqa(path: str | Path, source: str | None = None) -> WebQARead:
    """A web-QA file read by the reader its first row calls for (``webqa_reader``)."""
    name = webqa_reader(path)
    if name is None:
        expected = "WebWalkerQA, SimpleQA, GAIA or BrowseComp"
        raise DataError(path, f"not a web-QA file: its first row has none of {expected}'s fields")
    return READERS[name](path, source)


def _is_base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _decrypt(r: RowFields, name: str, canary: str) -> str:
    try:
        return decrypt(r.text(name), canary)
    except (binascii.Error, UnicodeDecodeError):
        raise r.fail(name, "does not decrypt with the row's canary") from None
