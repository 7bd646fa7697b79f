"""Reading demonstrations (``warmstart.reader_demos``): answer only spans that were retrieved,
search again when the first search misses, two hops through the bridge, masks on the agent's
steps only, the mix shares; and the reader warm start's key beside the protocol one's."""

from __future__ import annotations

from dataclasses import asdict, replace

import pytest

from treegrpo.agent.protocol import SearchProtocol
from treegrpo.core.rewards import normalize_answer
from treegrpo.data.lead_questions import HopPlan
from treegrpo.data.types import Question
from treegrpo.embedded.demos import Demo
from treegrpo.files import cache_key
from treegrpo.retrieval.base import Passage
from treegrpo.train.config import ConfigValueError
from treegrpo.warmstart import reader_demos as rd
from treegrpo.warmstart.protocol import ProtocolWarmStartConfig
from treegrpo.warmstart.reader import ReaderWarmStartConfig

LEADS = {
    "Nouakchott": "Nouakchott is the capital and largest city of Mauritania.",
    "Mauritania": "Mauritania, officially the Islamic Republic of Mauritania, is a country in "
    "Northwest Africa. Its capital is Nouakchott.",
    "Atar": "Atar is a town in northwestern Mauritania, known for its date palms.",
    "Jane Austen": "Jane Austen was an English novelist known for her six novels.",
    "Emma (novel)": "Emma is a novel written by Jane Austen, set in the village of Highbury.",
    "Village": "A village is a human settlement, larger than a hamlet.",
}
PASSAGES = {t: Passage(t, f'"{t}"\n{text}') for t, text in LEADS.items()}


class Tool:
    """Fixed results per query (the titles listed), the village article for any other query;
    records the queries."""

    def __init__(self, results: dict[str, list[str]]) -> None:
        self.results, self.queries = results, []  # type: ignore[var-annotated]

    def search(self, queries: list[str], topk: int = 3) -> list[list[Passage]]:
        self.queries += queries
        return [[PASSAGES[t] for t in self.results.get(q, ["Village"])][:topk] for q in queries]


CAPITAL = Question("s-0", "What is the capital of Mauritania?", ("Nouakchott",), "wiki-qa", 1)
HIGHBURY = Question(
    "s-1", "In which village is Emma set?", ("Highbury",), "wiki-qa", 1, kind="cloze-name"
)
PERU = Question("s-2", "What is the capital of Peru?", ("Lima",), "wiki-qa", 1)
EMMA_AUTHOR = Question(
    "d-0", "What nationality was the author of Emma?", ("English",), "wiki-qa2", 2
)
EMMA_PLAN = HopPlan("Jane Austen", "What nationality was Jane Austen?")
RESULTS = {
    CAPITAL.question: ["Atar", "Nouakchott"],
    HIGHBURY.question: ["Village"],  # misses: the rewrite "Emma" finds it
    "Emma": ["Emma (novel)", "Village"],
    EMMA_AUTHOR.question: ["Emma (novel)", "Village"],
    EMMA_PLAN.then: ["Jane Austen"],
}
SUBJECT = {"s-0": "Mauritania", "s-1": "Emma (novel)", "s-2": "Peru", "d-0": "Emma (novel)"}


def _text(tokenizer, demo: Demo, masked: int) -> str:  # type: ignore[no-untyped-def]
    """The demonstration's tokens after the prompt whose mask is ``masked``, decoded."""
    ids = [t for t, m in zip(demo.ids, demo.mask, strict=True) if m == masked]
    return str(tokenizer.decode(ids[demo.prompt_len :] if masked == 0 else ids))


def _single(tokenizer, question: Question):  # type: ignore[no-untyped-def]
    tool = Tool(RESULTS)
    oracle = rd.single_oracle(question, SUBJECT[question.uid])
    protocol = SearchProtocol(tokenizer, 200)
    made = rd._episode_demo(question, oracle, tool, protocol)
    return made, tool.queries


def test_a_demonstration_reads_the_doc_and_answers_the_span(tag_tokenizer) -> None:  # type: ignore[no-untyped-def]
    made, queries = _single(tag_tokenizer, CAPITAL)
    assert made is not None and made[1] == 1 and queries == [CAPITAL.question]
    steps = _text(tag_tokenizer, made[0], 1)
    assert 'Doc 2 (Nouakchott) says: "Nouakchott"' in steps  # the Doc that holds it
    assert steps.rstrip().endswith("<answer> Nouakchott </answer>")


def test_nothing_is_answered_that_was_not_retrieved(tag_tokenizer) -> None:  # type: ignore[no-untyped-def]
    made, queries = _single(tag_tokenizer, PERU)
    assert made is None  # searched the question, then "Peru": no passage holds "Lima"
    assert queries == [PERU.question, "Peru"]


def test_a_missed_first_search_is_searched_again(tag_tokenizer) -> None:  # type: ignore[no-untyped-def]
    made, queries = _single(tag_tokenizer, HIGHBURY)
    assert made is not None and made[1] == 2
    assert queries == [HIGHBURY.question, "Emma"]  # the subject's name, as the question writes it
    assert 'village of Highbury".' in _text(tag_tokenizer, made[0], 1)


def test_the_rewrite_is_the_subject_or_the_key_terms() -> None:
    assert rd.rewrite("In which village is Emma set?", "Emma (novel)") == "Emma"
    assert rd.rewrite("Who painted the ceiling?", "Sistine Chapel") == "painted ceiling"
    assert rd.key_terms("What is the capital of Mauritania?") == ["capital", "mauritania"]


def test_two_hop_demonstrations_search_the_bridge(tag_tokenizer) -> None:  # type: ignore[no-untyped-def]
    tool = Tool(RESULTS)
    oracle = rd.two_hop_oracle(EMMA_AUTHOR, EMMA_PLAN, "Emma (novel)")
    protocol = SearchProtocol(tag_tokenizer, 200)
    made = rd._episode_demo(EMMA_AUTHOR, oracle, tool, protocol)
    assert made is not None and made[1] == 2
    assert tool.queries == [EMMA_AUTHOR.question, EMMA_PLAN.then]
    steps = _text(tag_tokenizer, made[0], 1)
    assert 'written by Jane Austen".' in steps  # the bridge, read from the first article
    assert steps.rstrip().endswith("<answer> English </answer>")
    # no second hop retrieved: no demonstration
    tool = Tool({k: v for k, v in RESULTS.items() if k != EMMA_PLAN.then})
    oracle = rd.two_hop_oracle(EMMA_AUTHOR, EMMA_PLAN, "Emma (novel)")
    assert rd._episode_demo(EMMA_AUTHOR, oracle, tool, protocol) is None


def test_masks_are_one_on_the_agents_steps_only(tag_tokenizer) -> None:  # type: ignore[no-untyped-def]
    made, _ = _single(tag_tokenizer, HIGHBURY)
    assert made is not None
    demo = made[0]
    assert not any(demo.mask[: demo.prompt_len])
    steps, context = _text(tag_tokenizer, demo, 1), _text(tag_tokenizer, demo, 0)
    assert "<information>" not in steps and "human settlement" not in steps
    assert steps.count("<search>") == 2 and steps.count("<answer>") == 1
    assert context.count("<information>") == 2 and "<search>" not in context


def test_the_mix_keeps_its_shares(tag_tokenizer) -> None:  # type: ignore[no-untyped-def]
    protocol = SearchProtocol(tag_tokenizer, 200)
    kinds = ["nationality", "cloze-name"]
    single = [
        Question(f"s-{i}", f"Q{i}: capital of Mauritania?", ("Nouakchott",), "wiki-qa", 1)
        for i in range(40)
    ]
    single = [Question(**{**asdict(q), "kind": kinds[i % 2]}) for i, q in enumerate(single)]
    single += [replace(HIGHBURY, kind="alias"), PERU]
    titles = [
        Question(f"t-{i}", f"T{i}: capital of Mauritania?", ("Nouakchott",), "wiki", 1)
        for i in range(10)
    ]
    wh = [
        Question(f"w-{i}", f"W{i}: Mauritania's capital?", ("Nouakchott",), "wiki-read", 1)
        for i in range(6)
    ]
    results = RESULTS | {q.question: ["Nouakchott"] for q in single[:40] + titles + wh}
    mix = rd.ReaderMix(two_hop=0.2, title=0.2, wh=0.2, cloze=0.25, retry=0.1)
    demos = rd.build_reader_demos(
        single,
        [EMMA_AUTHOR],
        titles,
        Tool(results),
        protocol,
        20,
        mix,
        subject=lambda q: SUBJECT.get(q.uid, ""),
        plan=lambda q: EMMA_PLAN if q.uid == "d-0" else None,
        wh=wh,
    )
    count = {c: len(ds) for c, ds in demos.items()}
    # 4 titles; 1 two-hop (all there is); of the 15 single-hop: 3 wh (a fifth), and of the
    # 12 left: 3 cloze, the one re-search (its share of 1 is all there is), the reads the rest
    assert count == {
        "title": 4, "two-hop": 1, "wh": 3, "cloze": 3, "retry": 1, "read": 8, "direct": 0
    }  # fmt: skip
    for ds in demos.values():  # every answer is gold
        for d in ds:
            answer = _text(tag_tokenizer, d, 1).rsplit("<answer>", 1)[1].split("</answer>")[0]
            assert normalize_answer(answer) in {"nouakchott", "highbury", "english"}


def test_the_protocol_warm_start_key_is_unchanged() -> None:
    """The default protocol warm start keeps its settings, so its cache entry stays valid."""
    meta = {"format": 1, "base": "/m", "config": asdict(ProtocolWarmStartConfig())}
    assert cache_key(**meta, custom=False) == "9a6cdc49ba677799978ecfe1"
    reader = ReaderWarmStartConfig()
    assert asdict(reader.sft) != asdict(ProtocolWarmStartConfig())


def test_a_direct_demonstration_answers_what_the_model_said_without_searching(
    tag_tokenizer,  # type: ignore[no-untyped-def]
) -> None:
    protocol = SearchProtocol(tag_tokenizer, 200)
    tool = Tool(RESULTS | {CAPITAL.question: ["Nouakchott"]})
    known = [
        (PERU, "Lima is the capital of Peru."),  # known: the gold is in its sentence
        (CAPITAL, "The capital of Mauritania is Atar."),  # wrong: not a direct demonstration
    ]
    mix = rd.ReaderMix(two_hop=0.0, title=0.0, cloze=0.0, retry=0.0, direct=0.5)
    demos = rd.build_reader_demos([PERU, CAPITAL], [], [], tool, protocol, 2, mix, known=known)
    assert [len(demos["direct"]), len(demos["read"])] == [1, 1]
    steps = _text(tag_tokenizer, demos["direct"][0], 1)
    assert "<search>" not in steps and "I know this: Lima is the capital of Peru." in steps
    assert steps.rstrip().endswith("<answer> Lima </answer>")
    assert tool.queries == [CAPITAL.question]  # Peru, answered directly, is not read again


@pytest.mark.parametrize(
    ("shares", "message"),
    [
        ({"wh": 1.5}, r"^wh must be in \[0, 1\] \(got 1.5\)"),
        ({"direct": -0.1}, r"^direct must be in \[0, 1\]"),
        ({"two_hop": 0.6, "title": 0.3, "direct": 0.2}, r"^two_hop \+ title \+ direct must be at"),
        ({"cloze": 0.9, "retry": 0.2}, r"^cloze \+ retry must be at most 1"),
    ],
)
def test_a_mix_whose_shares_cannot_add_up_is_refused_where_it_is_given(
    shares: dict[str, float], message: str
) -> None:
    with pytest.raises(ConfigValueError, match=message):
        rd.ReaderMix(**shares)
    assert rd.ReaderMix(two_hop=0.5, title=0.3, direct=0.2, cloze=0.9, retry=0.1).wh == 0.3
