"""Reading questions on the offline Wikipedia corpus, answered by a span of an article's lead:
templates over one lead (source "wiki-qa", ``Question.kind`` the template) and two-hop joins
through a bridge article ("wiki-qa2"); docs/data.md, "The wiki reading questions". Modules, each
importing only those before it: ``patterns``, ``text`` (reading a lead), ``facts``, the
templates (``people``, ``places``, ``works``, ``science``, ``cloze``), ``build`` (checks, joins,
caps), ``wh`` ("wiki-read") and ``splits``; what others use is re-exported here.
"""

from __future__ import annotations

from treegrpo.core.rewards import is_span
from treegrpo.data.lead_questions.build import (
    MAX_PER_BRIDGE,
    MAX_SAME_ANSWER,
    Built,
    HopPlan,
    article_facts,
    build_questions,
    is_valid,
)
from treegrpo.data.lead_questions.cloze import cloze_fact
from treegrpo.data.lead_questions.facts import Context
from treegrpo.data.lead_questions.people import occupations, person_facts
from treegrpo.data.lead_questions.splits import (
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
    "MAX_PER_BRIDGE",
    "MAX_SAME_ANSWER",
    "Built",
    "Context",
    "HopPlan",
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
    "number_golds",
    "occupations",
    "passage",
    "person_facts",
    "question_split",
    "sentences",
    "split_questions",
    "subject_name",
    "wh_questions",
    "work_facts",
    "year_golds",
]
