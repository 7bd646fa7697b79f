"""Title-question demonstrations: search the question, answer the retrieved gold title, and
nothing for a question whose article was not retrieved."""

from __future__ import annotations

from treegrpo.agent.protocol import SearchProtocol
from treegrpo.data.types import Question
from treegrpo.retrieval.base import Passage
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.warmstart.reader_demos import build_title_demos, found_title

ARTICLES = {
    "Mercury (planet)": "the smallest planet of the solar system and the closest to the sun",
    "Danube": "the second-longest river in Europe, flowing through Vienna and Budapest",
    "Kraków": "a city in southern Poland on the Vistula, a former royal capital",
    "Saturn": "the sixth planet from the sun, known for its prominent ring system",
}


def _tool() -> BM25Retriever:
    passages = [
        Passage(str(i), f'"{t}"\n{t} is {text}.') for i, (t, text) in enumerate(ARTICLES.items())
    ]
    return BM25Retriever(passages, use_cache=False)


def test_found_title_reads_quoted_titles_with_parentheses() -> None:
    obs = 'Doc 1(Title: "Saturn") x\nDoc 2(Title: "Mercury (planet)") the smallest planet'
    assert found_title(obs, ["mercury (planet)"]) == (2, "Mercury (planet)")
    assert found_title(obs, ["Saturn", "Mercury (planet)"]) == (1, "Saturn")
    assert found_title(obs, ["Venus"]) is None


def test_demonstrations_search_then_answer_the_retrieved_title(tag_tokenizer) -> None:  # type: ignore[no-untyped-def]
    protocol = SearchProtocol(tag_tokenizer, 200)
    asked = {
        "Which planet is the smallest and the closest to the sun?": "Mercury (planet)",
        "Which river flows through Vienna and Budapest?": "Danube",
        "Which city was a royal capital on the Vistula?": "Kraków",
        "Which ocean borders Chile?": "Pacific Ocean",  # not in the corpus
    }
    questions = [Question(f"t-{i}", q, (t,), "wiki", 1) for i, (q, t) in enumerate(asked.items())]
    demos = build_title_demos(questions, _tool(), protocol, n=10, seed=0)
    assert len(demos) == 3  # the Pacific question has no retrieved article: no demonstration
    search, answer = (tag_tokenizer.convert_tokens_to_ids(t) for t in ("<search>", "<answer>"))
    for d in demos:
        assert d.reward == 1.0 and len(d.ids) == len(d.mask)
        actions = [t for t, m in zip(d.ids, d.mask, strict=True) if m]
        assert actions.count(search) == 1 and actions.count(answer) == 1
        text = protocol.decode(d.ids[d.prompt_len :])
        assert "<information>" in text  # the real observation, masked out
        assert "<information>" not in protocol.decode(actions)
    assert len(build_title_demos(questions, _tool(), protocol, n=2)) == 2
