"""Reading questions on the offline Wikipedia corpus: the answer is a span of an article's lead.

The ``wiki`` questions of ``treegrpo.data.wiki`` always answer with the article's title, so a
model can score on them without reading the passage it found. These ask for something written
*inside* the passage: a nationality, a year, a capital, an author, another name, a blank in a
sentence. Each template is a regular expression over one article's lead that fires only on a
wording it reads reliably; where a lead says two things a template could mean (two death years,
co-authors, a nationality its short description contradicts) it makes no question. Precision of
the gold answers matters more than their number.

Single-hop kinds (source "wiki-qa"; ``Question.kind`` names the template):

- people: ``nationality`` and ``occupation`` ("X was an English social reformer"),
  ``full-name`` (the lead names "Robert Leroy Johnson" for the title "Robert Johnson"),
  ``birth-name``, ``courtesy-name``, ``alias`` ("also known as …"), ``birthplace`` and
  ``birth-year`` ("He was born in Pisa"), ``death-year`` ("… until his death in 1934");
- places: ``capital`` ("What is the capital of Mauritania?", from "Nouakchott is the capital of
  Mauritania" or from Mauritania's "Its capital is …"), ``capital-of`` (the reverse),
  ``country`` and ``region`` ("Mount Kilimanjaro is a large dormant volcano in Tanzania"),
  ``official-name`` ("Thailand, officially the Kingdom of Thailand");
- works and ideas: ``creator`` (who wrote / painted / composed / directed / sculpted it),
  ``originator`` (who founded / discovered / invented / proposed / developed it),
  ``release-year`` ("a 1972 American film"), ``founded-year``;
- things: ``abbreviation`` ("Low Earth orbit (LEO)"), ``family`` and ``order`` of an organism,
  ``symbol`` and ``atomic-number`` of an element;
- ``cloze-name`` / ``cloze-number``, the fallback for every article: one sentence of its lead
  with a proper name or a number blanked out ("Fill in the blank about Bertolt Brecht: …").

Two-hop questions (source "wiki-qa2", ``hops=2``) join a first fact whose answer is exactly the
title of another article (the bridge) to a fact about that article: "What nationality was the
director of the film 2001: A Space Odyssey?" (2001: A Space Odyssey → Stanley Kubrick →
American), "What is the official name of the country whose capital is Tbilisi?"; ``kind`` is
"<first>+<second>". A pair is not made when the first article already holds the answer ("a
novel by English author Jane Austen" answers "What nationality was the author of …?").

Every question passes the same checks. Each gold answer, after SQuAD normalization
(``normalize_answer``, what the reward compares), is a run of whole tokens of its article's
passage, and the first gold is verbatim in it (the others are other spellings of it: "BCE" for
"BC", the number in words, "English poet" for "poet"). No gold appears in the question (nor,
where the answer is another entity, shares a word stem with it, as ``title_questions.leaks``
judges). Two questions with one wording and different answers are both dropped, and no answer
is given to more than ``MAX_SAME_ANSWER`` questions (nor ``MAX_ANSWER_SHARE`` of them) of one
set, so guessing "American" or "English" earns little.

Articles are split as the wiki questions are (``wiki.split_of``): a question is train only if
every article it touches is train (those it reads and, for two-hop ones, the bridge's own
article, which searching for the bridge finds), so no train question needs a test passage.
The train questions that touch one train article in ten (a second hash) are also the
validation split, for choosing RL settings without looking at test (``splits``).

The package, one concept a file (each imports only those above it):

- ``patterns``: the regular expressions and word lists the templates read leads with;
- ``text``: reading a lead (``passage``, ``sentences``, ``after_title``,
  ``subject_name``, ``number_golds``, ``year_golds``, ``is_person``);
- ``facts``: the ``Fact`` a template makes and the ``Context`` of the whole corpus;
- the templates: ``people`` (``name_facts``, ``person_facts``), ``places`` (``place_facts``),
  ``works`` (``work_facts``), ``science`` (``science_facts``), ``cloze`` (``cloze_fact``);
- ``build``: ``build_questions``, the checks, the two-hop joins and the caps (``Built``,
  ``HopPlan``, ``SOURCE``, ``SOURCE_2HOP``, ``MAX_SAME_ANSWER``, …);
- ``wh``: wh-questions over any sentence of a lead, reworded so that they do not repeat the
  passage (source "wiki-read": who, when, where, what, how many, another name; ``build_read``,
  ``copies``), what the reader warm start learns reading from;
- ``splits``: the questions of one split of the offline corpus (``lead_questions``: train,
  val (a part of train, for choosing settings) or test; ``wh_questions`` the same of the
  wh-questions; ``hop_plan``, ``all_built``, ``all_wh``, cached).

Everything public is re-exported here: ``from treegrpo.data.lead_questions import X``.
"""

from __future__ import annotations

from treegrpo.core.rewards import is_span
from treegrpo.data.lead_questions.build import (
    MAX_ANSWER_SHARE,
    MAX_PER_BRIDGE,
    MAX_SAME_ANSWER,
    SOURCE,
    SOURCE_2HOP,
    Built,
    HopPlan,
    Row,
    article_facts,
    build_questions,
    is_valid,
)
from treegrpo.data.lead_questions.cloze import CLOZE_WORDS, cloze_fact
from treegrpo.data.lead_questions.facts import Context, Fact
from treegrpo.data.lead_questions.people import name_facts, occupations, person_facts
from treegrpo.data.lead_questions.places import place_facts
from treegrpo.data.lead_questions.science import science_facts
from treegrpo.data.lead_questions.splits import (
    VAL_SHARE,
    QuestionSplit,
    all_built,
    all_wh,
    hop_plan,
    is_val_article,
    lead_questions,
    question_split,
    split_questions,
    wh_questions,
)
from treegrpo.data.lead_questions.text import (
    after_title,
    is_person,
    number_golds,
    passage,
    sentences,
    subject_name,
    year_golds,
)
from treegrpo.data.lead_questions.works import work_facts

__all__ = [
    "CLOZE_WORDS",
    "MAX_ANSWER_SHARE",
    "MAX_PER_BRIDGE",
    "MAX_SAME_ANSWER",
    "SOURCE",
    "SOURCE_2HOP",
    "VAL_SHARE",
    "Built",
    "Context",
    "Fact",
    "HopPlan",
    "QuestionSplit",
    "Row",
    "after_title",
    "all_built",
    "all_wh",
    "article_facts",
    "build_questions",
    "cloze_fact",
    "hop_plan",
    "is_person",
    "is_span",
    "is_val_article",
    "is_valid",
    "lead_questions",
    "name_facts",
    "number_golds",
    "occupations",
    "passage",
    "person_facts",
    "place_facts",
    "question_split",
    "science_facts",
    "sentences",
    "split_questions",
    "subject_name",
    "wh_questions",
    "work_facts",
    "year_golds",
]
