"""Web questions (``data.web_questions``) on a small in-memory corpus: each question of each kind
meets its definition on the site the server would send, the split is disjoint by article and
deterministic, and the questions write and read back as FlashRAG jsonl."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from treegrpo.core.rewards import is_span
from treegrpo.data.flashrag import read_flashrag, write_flashrag
from treegrpo.data.lead_questions import subject_name
from treegrpo.data.web_questions import (
    KINDS,
    SOURCE,
    WebQuestion,
    build_web_questions,
    is_held_out,
    split_web_questions,
)
from treegrpo.data.web_view import SiteView, web_article
from treegrpo.data.wiki import Article
from treegrpo.website.corpus import first_sentence, slug
from treegrpo.website.site import Site, create_site_app

TOPK = 2
ROWS = [
    ("Brontia", "Country in Northern Europe", "Geography",
     "Brontia, officially the Republic of Brontia, is a country in Northern Europe. Its capital "
     "is Velm. Brontia is bordered by Norland to the north and by the Ostra Sea to the south. "
     "The country has about four million inhabitants and its currency is the krona."),
    ("Norland", "Country in Northern Europe", "Geography",
     "Norland, officially the Kingdom of Norland, is a country in Northern Europe. Its capital "
     "is Haldor. Norland borders Brontia to the south. Its economy is based on fishing."),
    ("Velm", "Capital city of Brontia", "Geography",
     "Velm is the capital of Brontia. The city lies at the mouth of the river Ostra. It was a "
     "trading port of the Hanseatic League and has a famous cathedral built by Osric Dane."),
    ("John Harrow", "English painter (1801–1870)", "People",
     "John Harrow was an English painter known for harbour scenes. He was born in Dover. Harrow "
     "studied in Velm under Osric Dane and later taught at the Royal Academy until his death "
     "in 1870."),
    ("Osric Dane", "Brontian architect (1760–1832)", "People",
     "Osric Dane was a Brontian architect and painter. He designed the cathedral of Velm and "
     "trained many younger artists, among them John Harrow."),
    ("Dover School", "Group of painters", "Arts",
     "The Dover School was a group of painters active on the south coast in the 19th century. "
     "Its best known member was John Harrow, whose students included Mary Lytton and Peter "
     "Crane."),
    ("Harbour at Velm", "1840 painting by John Harrow", "Arts",
     "Harbour at Velm is an oil painting by the English painter John Harrow, finished in 1840. "
     "It shows fishing boats in the port of Velm at dawn and hangs in the National Gallery."),
    ("Ostra Sea", "Sea in Northern Europe", "Geography",
     "The Ostra Sea is a shallow marginal sea in Northern Europe between Brontia and the open "
     "ocean. Its largest island is Kell, and its waters freeze in most winters."),
    ("Haldor", "Capital city of Norland", "Geography",
     "Haldor is the capital and largest city of Norland. It lies on a fjord in the west of the "
     "country and was founded by fishermen in the 11th century."),
    ("Kingdom Trading Company", "Former trading company", "History",
     "The Kingdom Trading Company was a merchant company chartered in 1602. It traded timber and "
     "fish between Haldor and the ports of Brontia, whose capital it helped to grow."),
]  # fmt: skip
ARTICLES = tuple(
    Article(index=10 + i, title=t, extract=x, description=d, topic=top)
    for i, (t, d, top, x) in enumerate(sorted(ROWS))
)  # indices that are not positions, as in a part of the real corpus


@pytest.fixture(scope="module")
def web() -> list[WebQuestion]:
    return build_web_questions(ARTICLES, topk=TOPK)


@pytest.fixture(scope="module")
def view() -> SiteView:
    return SiteView(ARTICLES)


def test_every_kind_is_made(web: list[WebQuestion]) -> None:
    counts = Counter(w.question.kind for w in web)
    assert set(counts) == set(KINDS)
    assert all(counts[k] >= 2 for k in KINDS), counts
    uids = [w.question.uid for w in web]
    assert len(set(uids)) == len(uids)
    assert all(w.question.source == SOURCE and w.question.uid.startswith(f"{SOURCE}-") for w in web)


def test_in_snippet_questions(web: list[WebQuestion], view: SiteView) -> None:
    for w in (w for w in web if w.question.kind == "in-snippet"):
        (index,) = w.touches
        snippet = first_sentence(view.articles[index].extract)
        assert w.question.golds[0] in snippet and is_span(w.question.golds[0], snippet)
        assert w.question.hops == 1


def test_in_page_questions(web: list[WebQuestion], view: SiteView) -> None:
    for w in (w for w in web if w.question.kind == "in-page"):
        (index,) = w.touches
        q = w.question
        lead = view.articles[index].extract
        assert q.golds[0] in lead and is_span(q.golds[0], lead)
        (results,) = view.search([q.question], TOPK)
        for shown in {index, *results}:  # the page's own snippet and every result's
            snippet = first_sentence(view.articles[shown].extract)
            assert not any(is_span(g, snippet) for g in q.golds), (q, snippet)


def test_link_questions(web: list[WebQuestion], view: SiteView) -> None:
    links = [w for w in web if w.question.kind == "link"]
    site = Site([web_article(a) for a in ARTICLES], use_cache=False)
    position = {a.index: i for i, a in enumerate(ARTICLES)}
    with TestClient(create_site_app(site)) as client:
        for w in links:
            first, second = w.touches
            q = w.question
            a, b = view.articles[first], view.articles[second]
            assert q.hops == 2
            assert subject_name(a) in q.question  # the question names A ...
            (results,) = view.search([q.question], TOPK)
            assert first in results  # ... which a search for it finds
            page = client.get(f"/wiki/{slug(a.title)}").text
            assert f'href="/wiki/{slug(b.title)}"' in page  # A's page links to B
            assert site.links[position[first]]  # (the site's own link list agrees)
            assert q.golds[0] in b.extract  # the answer is on B ...
            page_a = f"{a.title} {a.description} {a.extract}"
            assert not any(is_span(g, page_a) for g in q.golds)  # ... not on A's page
            for shown in results:
                snippet = first_sentence(view.articles[shown].extract)
                assert not any(is_span(g, snippet) for g in q.golds)  # nor in a snippet


def test_first_linked_of_a_category_is_that_page(web: list[WebQuestion], view: SiteView) -> None:
    """'The first person linked from the page on A' is B: no earlier link of A is a person."""
    people = {a.index for a in ARTICLES if a.topic == "People"}
    for w in web:
        if w.question.kind == "link" and "first person" in w.question.question:
            first, second = w.touches
            before = view.links[first][: view.links[first].index(second)]
            assert second in people and not people & set(before)


def test_split_is_disjoint_by_article_and_deterministic(web: list[WebQuestion]) -> None:
    train, held_out = split_web_questions(web, ARTICLES, seed=3, held_out_share=0.3)
    assert (train, held_out) == split_web_questions(web, ARTICLES, seed=3, held_out_share=0.3)
    assert train and held_out
    touches = {w.question.uid: w.touches for w in web}
    title = {a.index: a.title for a in ARTICLES}
    train_articles = {i for q in train for i in touches[q.uid]}
    held_articles = {i for q in held_out for i in touches[q.uid]}
    assert not train_articles & held_articles
    assert all(is_held_out(title[i], 3, 0.3) for i in held_articles)
    assert not any(is_held_out(title[i], 3, 0.3) for i in train_articles)
    other = split_web_questions(web, ARTICLES, seed=4, held_out_share=0.3)
    assert other != (train, held_out)  # the seed moves the split
    assert build_web_questions(ARTICLES, topk=TOPK) == web  # building is deterministic
    with pytest.raises(ValueError, match="held_out_share"):
        split_web_questions(web, ARTICLES, held_out_share=1.0)


def test_written_as_flashrag(web: list[WebQuestion], tmp_path: Path) -> None:
    questions = [w.question for w in web]
    path = tmp_path / "wiki-web-train.jsonl"
    assert write_flashrag(path, questions) == len(questions)
    assert read_flashrag(path) == questions
