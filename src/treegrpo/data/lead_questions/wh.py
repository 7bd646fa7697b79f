"""Wh-questions over a lead's sentences but the first, reworded so as not to repeat the passage
(source "wiki-read"): they teach reading, not where a template puts its answer. Kinds, rules,
checks (``wh_rows``) and counts: docs/data.md, "Reworded wh-questions".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence

from treegrpo.data.lead_questions.build import Built, Row, answer_capped, as_built, is_valid
from treegrpo.data.lead_questions.facts import Context
from treegrpo.data.lead_questions.patterns import _MONTH, _NAME, _NAME_RE, _YEAR, _words
from treegrpo.data.lead_questions.text import number_golds, passage, sentences, year_golds
from treegrpo.data.title_questions import FUNCTION_WORDS, base_title
from treegrpo.data.wiki import Article

SOURCE_READ = "wiki-read"
COPY_WORDS = 5  # a question may not repeat this many consecutive words of its passage
QUESTION_WORDS = (5, 30)

_WORD = re.compile(r"\w+")
_PRONOUN = re.compile(r"^(He|She|It|They|His|Her|Its|Their) ")
_POSSESSIVE = frozenset({"His", "Her", "Its", "Their"})
_ADVERB = r"(?:first|also|later|then|originally|initially|eventually|subsequently|largely|mainly)"
_LEAD_WORDS = (
    "When|While|After|Before|Although|Because|Many|Some|Most|This|These|That|Those|Such|Both|"
    "Each|All|One|Other|There|Here|Since|During|As|If|However|Despite|Following|According|"
    "Today|Now|Later|Then|Thus|Also|Only|In|On|At|By|For|From|With|Under|Over|Between|About|"
    "First|Around|Nearly|Over|Approximately|Some|Several|Few|Its|His|Her|Their"
)
_INNER_WORDS = (
    "after|before|when|while|into|from|at|in|on|by|with|for|to|as|that|which|who|was|were"
)
_SUBJECT = (
    rf"(?P<subj>(?!(?:{_LEAD_WORDS})\b)[A-Z][\w'’\-.]*"
    rf"(?: (?!(?:{_INNER_WORDS})\b)[\w'’\-.]+){{0,5}}?)"
)
"""The sentence's subject: up to six words, none a preposition or a clause's conjunction, not
opening with a word that opens a clause or a quantifier ("When …", "Many of …")."""
_END = r"(?=[,.;]|$| and | in | on | at | as | after | before | with | for | to )"

_PAST_TO_ROOT = {
    "won": "win", "received": "receive", "became": "become", "moved": "move",
    "married": "marry", "died": "die", "published": "publish", "released": "release",
    "founded": "found", "joined": "join", "wrote": "write", "left": "leave",
    "returned": "return", "began": "begin", "completed": "complete", "discovered": "discover",
    "introduced": "introduce", "signed": "sign", "launched": "launch", "opened": "open",
    "graduated": "graduate", "served": "serve", "retired": "retire", "gained": "gain",
    "lost": "lose", "invented": "invent", "proposed": "propose", "formed": "form",
    "built": "build", "created": "create", "established": "establish", "developed": "develop",
    "produced": "produce", "directed": "direct", "composed": "compose", "painted": "paint",
    "recorded": "record", "played": "play", "visited": "visit", "settled": "settle",
    "emigrated": "emigrate", "converted": "convert", "succeeded": "succeed",
    "defeated": "defeat", "conquered": "conquer", "captured": "capture", "declared": "declare",
    "achieved": "achieve", "entered": "enter", "reached": "reach", "adopted": "adopt",
    "acquired": "acquire", "held": "hold", "led": "lead", "made": "make", "took": "take",
    "gave": "give", "met": "meet", "taught": "teach", "studied": "study", "attended": "attend",
    "earned": "earn", "obtained": "obtain", "debuted": "debut", "premiered": "premiere",
    "appeared": "appear", "starred": "star", "lived": "live", "worked": "work",
    "fled": "flee", "travelled": "travel", "traveled": "travel", "toured": "tour",
    "sold": "sell", "killed": "kill", "ruled": "rule",
    "reigned": "reign", "invaded": "invade", "annexed": "annex", "hosted": "host",
    "issued": "issue", "had": "have",
}  # fmt: skip
"""Past tenses a question may turn back to their root ("did X win …?"): a fixed list, so that
no rule guesses a root."""
_PARTICIPLE_TO_PAST = {
    "written": "wrote", "built": "built", "made": "made", "given": "gave", "taken": "took",
    "drawn": "drew", "sung": "sang", "begun": "began", "shown": "showed", "driven": "drove",
    "chosen": "chose", "held": "held", "led": "led", "found": "found", "won": "won",
    "sold": "sold", "taught": "taught", "brought": "brought", "bought": "bought",
    "seen": "saw", "spoken": "spoke", "sent": "sent", "struck": "struck", "run": "ran",
    "grown": "grew", "thrown": "threw", "laid": "laid", "paid": "paid", "told": "told",
    "known": "knew", "set": "set", "put": "put", "kept": "kept",
}  # fmt: skip
"""Irregular past participles and their past tense ("written by" → "Who wrote …?"); a
regular one ("composed") is its own past tense."""
_PASSIVE_PLACE = _words("""born buried located based founded built held crowned married educated
raised imprisoned killed executed exiled""")
_DATE = rf"(?:\d{{1,2}} )?(?:{_MONTH}) (?:\d{{1,2}}, )?(?:{_YEAR})"
_WHEN = rf"(?:in|on) (?P<answer>{_DATE}|{_YEAR})"
_WHO = re.compile(
    rf"^{_SUBJECT} (?:was|were|had been|has been|have been) (?:(?P<adv>{_ADVERB}) )?"
    rf"(?P<verb>[a-z]+) (?P<mid>(?:[^,;()]*? )?)by (?:(?:the|a|an) "
    rf"(?P<desc>[a-z][a-z\- ]{{2,30}}?) )?(?P<answer>{_NAME}){_END}"
)
_WHEN_PASSIVE = re.compile(
    rf"^{_SUBJECT} (?P<aux>was|were) (?:(?P<adv>{_ADVERB}) )?(?P<verb>[a-z]+) "
    rf"(?P<mid>(?:[^,;()]*? )?){_WHEN}{_END}"
)
_WHEN_ACTIVE = re.compile(
    rf"^{_SUBJECT} (?:(?P<adv>{_ADVERB}) )?(?P<verb>[a-z]+) "
    rf"(?P<mid>(?:[^,;()]*? )?){_WHEN}{_END}"
)
_WHERE_PASSIVE = re.compile(
    rf"^{_SUBJECT} (?P<aux>was|were|is|are) (?:(?P<adv>{_ADVERB}) )?(?P<verb>[a-z]+) "
    rf"(?P<mid>(?:[^,;()]*? )?)(?:in|at) (?P<answer>{_NAME}){_END}"
)
_WHERE_ACTIVE = re.compile(
    rf"^{_SUBJECT} (?:(?P<adv>{_ADVERB}) )?(?P<verb>[a-z]+) "
    rf"(?P<mid>(?:[^,;()]*? )?)(?:in|at|to) (?P<answer>{_NAME}){_END}"
)
_HOW_MANY = re.compile(
    rf"^{_SUBJECT} (?:(?P<adv>{_ADVERB}) )?(?P<verb>has|have|contains|includes|[a-z]+) "
    rf"(?:(?:about|around|over|more than|nearly|some|approximately|at least) )?"
    r"(?P<answer>\d[\d,]*|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve) "
    r"(?P<noun>(?:[a-z\-]+ ){0,2}[a-z\-]+s)\b(?P<rest>[^,;()]*?)(?=[,.;]|$)"
)
_ALIAS = re.compile(
    rf"^{_SUBJECT} (?P<aux>is|was|are|were) (?:also |commonly |often |sometimes |widely )?"
    rf"(?:known|called|referred to) (?:as|by (?:his|her|its|their|the) (?P<desc>[a-z]+)) "
    rf"(?P<answer>{_NAME}){_END}"
)

_AGENT = re.compile(
    rf"^(?P<answer>{_NAME}) (?:(?P<adv>{_ADVERB}) )?(?P<verb>[a-z]+) (?P<mid>[^,;()]+?){_END}"
)
"""A name doing something to the article: "Ernst Zermelo formulated the axiom …" → "Who
formulated the axiom …?"."""
_OBJECT = re.compile(
    rf"^{_SUBJECT} (?:(?P<adv>{_ADVERB}) )?(?P<verb>[a-z]+) (?:the )?(?P<answer>{_NAME})"
    r"(?=[.;]|$| in | on | at | after | before )"
)
_OBJECT_VERBS = _words(
    "married succeeded defeated founded joined attended conquered captured invaded annexed hosted"
)
"""Verbs whose object names one thing ("What did X found?"), unlike "won" or "wrote"."""
_OWNER = re.compile(
    rf"^(?P<owner>{_NAME})['’]s (?P<attr>(?:[a-z\-]+ ){{0,3}}[a-z\-]+) (?P<aux>is|was) "
    rf"(?:the )?(?P<answer>{_NAME}){_END}"
)
"""An attribute of the article: "Chad's capital and largest city is N'Djamena" → "What is the
capital and largest city of Chad?"."""


def resolve(sentence: str, name: str) -> str:
    """``sentence`` with a leading pronoun replaced by ``name`` ("Its capital …" → "Chad's
    capital …"), without a final full stop or parentheses."""
    sentence = re.sub(r"\s*\([^()]*\)", "", sentence).strip().removesuffix(".")
    m = _PRONOUN.match(sentence)
    if m:
        owner = f"{name}'s" if m[1] in _POSSESSIVE else name
        sentence = owner + sentence[m.end(1) :]
    return sentence


def copies(question: str, text: str, n: int = COPY_WORDS) -> bool:
    """Whether ``question`` repeats ``n`` consecutive ``\\w+`` runs (lowercased) of ``text``."""
    q, t = _WORD.findall(question.lower()), " ".join(_WORD.findall(text.lower()))
    t = f" {t} "
    return any(f" {' '.join(q[i : i + n])} " in t for i in range(len(q) - n + 1))


def _object(subject: str) -> str:
    """A sentence-initial subject as it reads inside a question ("The score" → "the score")."""
    first, _, rest = subject.partition(" ")
    return f"{first.lower()} {rest}" if first in ("The", "A", "An") and rest else subject


def _join(*parts: str | None) -> str:
    """The words of a question, joined, with its question mark."""
    return " ".join(p.strip() for p in parts if p and p.strip()) + "?"


_NOUN_STOP = _words("in its of the and or his her their a an on at to by for with")
_ADJUNCT = re.compile(r"(?:in|at|from|to|into) ")
_ANSWER_OF_KIND = {"when": re.compile(rf"\b(?:{_YEAR})\b"), "how-many": re.compile(r"\d")}
_INTRO_YEAR = re.compile(rf"^In (?P<year>{_YEAR}), (?P<rest>.+)$")
Turn = tuple[str, str, list[str], str, tuple[str, ...]]
"""(kind, the answer as written, the question's words before the optional part, the optional
part (the words between verb and answer, last in the question), golds)."""


def _candidates(s: str, name: str, ctx: Context) -> Iterator[tuple[str, str, tuple[str, ...]]]:
    """(kind, question, golds) for each way ``s`` turns around, a leading "In 1882, " moved to
    the end; also without the words between verb and answer when they open with a preposition
    of place and hold no other answer of the kind (the shorter copies less)."""
    if m := _INTRO_YEAR.match(s):
        s = f"{m['rest']} in {m['year']}"
    for kind, answer, head, mid, golds in _turns(s, name, ctx):
        if _another(kind, answer, " ".join(filter(None, [*head, mid]))):
            continue
        yield kind, _join(*head, mid), golds
        if _ADJUNCT.match(mid) and len(_ANSWER_OF_KIND.get(kind, _NAME_RE).findall(s)) == 1:
            yield kind, _join(*head), golds


def _turns(s: str, name: str, ctx: Context) -> Iterator[Turn]:
    if m := _WHO.match(s):
        past = _PARTICIPLE_TO_PAST.get(m["verb"], m["verb"] if m["verb"].endswith("ed") else "")
        after = s[m.end("answer") :]
        if past and not after.startswith((" and ", ",")):
            wh = f"Which {m['desc']}" if m["desc"] else "Who"
            head = [wh, m["adv"], past, _object(m["subj"])]
            yield "who", m["answer"], head, m["mid"], (m["answer"],)
    for pattern in (_WHEN_PASSIVE, _WHERE_PASSIVE):
        if not (m := pattern.match(s)) or not _participle(m["verb"]):
            continue
        kind = "when" if pattern is _WHEN_PASSIVE else "where"
        if kind == "where" and (m["answer"] not in ctx.places or m["verb"] not in _PASSIVE_PLACE):
            continue
        wh = "Where" if kind == "where" else _when(m["answer"])
        head = [wh, m["aux"], _object(m["subj"]), m["adv"], m["verb"]]
        yield kind, m["answer"], head, m["mid"], _golds(kind, m["answer"])
    for pattern in (_WHEN_ACTIVE, _WHERE_ACTIVE):
        m = pattern.match(s)
        if not m or m["verb"] not in _PAST_TO_ROOT or m["verb"] == "had":
            continue
        kind = "when" if pattern is _WHEN_ACTIVE else "where"
        if kind == "where" and m["answer"] not in ctx.places:
            continue
        wh = "Where did" if kind == "where" else f"{_when(m['answer'])} did"
        head = [wh, _object(m["subj"]), m["adv"], _PAST_TO_ROOT[m["verb"]]]
        yield kind, m["answer"], head, m["mid"], _golds(kind, m["answer"])
    if (m := _HOW_MANY.match(s)) and not _NOUN_STOP & set(m["noun"].split()):
        verb, rest = m["verb"], m["rest"]
        roots = {"has": ("have", "does"), "have": ("have", "do"), "contains": ("contain", "does")}
        roots["includes"] = ("include", "does")
        root, do = roots.get(verb, (_PAST_TO_ROOT.get(verb, ""), "did"))
        quantity = m["noun"].startswith(("million", "billion", "thousand", "percent"))
        if root and not quantity and not rest.startswith((" and ", " or ")):
            head = ["How many", m["noun"], do, _object(m["subj"]), m["adv"], root]
            yield "how-many", m["answer"], head, rest, number_golds(m["answer"])
    if m := _ALIAS.match(s):
        what = f"By what {m['desc']}" if m["desc"] else "By what other name"
        head = [what, m["aux"], _object(m["subj"]), "known"]
        yield "alias", m["answer"], head, "", (m["answer"],)
    if (m := _AGENT.match(s)) and m["verb"] in _PAST_TO_ROOT and m["answer"] in ctx.people:
        yield "who", m["answer"], ["Who", m["adv"], m["verb"], m["mid"]], "", (m["answer"],)
    if (m := _OBJECT.match(s)) and m["verb"] in _OBJECT_VERBS:
        wh = "Whom did" if m["answer"] in ctx.people else "What did"
        head = [wh, _object(m["subj"]), m["adv"], _PAST_TO_ROOT[m["verb"]]]
        yield "what", m["answer"], head, "", (m["answer"],)
    if (m := _OWNER.match(s)) and m["owner"] == name and m["attr"] not in ("name", "title"):
        wh = "Who" if m["answer"] in ctx.people else "What"
        head = [wh, m["aux"], "the", m["attr"], "of", m["owner"]]
        yield "what", m["answer"], head, "", (m["answer"],)


def _when(answer: str) -> str:
    """ "In what year" for a year, "When" for a date."""
    return "In what year" if re.fullmatch(_YEAR, answer) else "When"


def _golds(kind: str, answer: str) -> tuple[str, ...]:
    return year_golds(answer) if kind == "when" and re.fullmatch(_YEAR, answer) else (answer,)


def _another(kind: str, answer: str, question: str) -> bool:
    """Whether the question holds another answer of its kind (a year in a "when" question, an
    agent in a "who" one), which would make it ambiguous."""
    if kind == "when":
        return bool(re.search(r"\b\d{3,4}\b", question))
    return kind == "who" and " by " in f" {question} "


def _participle(verb: str) -> bool:
    return verb in _PARTICIPLE_TO_PAST or verb == "born" or verb.endswith("ed")


def _names_article(question: str, title: str) -> bool:
    words = _WORD.findall(base_title(title).lower())
    asked = set(_WORD.findall(question.lower()))
    return any(w in asked for w in words if len(w) >= 3 and w not in FUNCTION_WORDS)


def wh_rows(article: Article, ctx: Context, rejected: Counter[str] | None = None) -> list[Row]:
    """One article's wh-questions, checked; rejections counted as "<kind>: <reason>"."""
    text = passage(article)
    name = base_title(article.title)
    out: list[Row] = []
    for sentence in sentences(article.extract)[1:]:
        for kind, question, golds in _candidates(resolve(sentence, name), name, ctx):
            reason = (
                "length"
                if not QUESTION_WORDS[0] <= len(question.split()) <= QUESTION_WORDS[1]
                else "not named"
                if not _names_article(question, article.title)
                else "copies the passage"
                if copies(question, text)
                else "gold check"
                if not is_valid(kind, question, golds, text)
                else ""
            )
            if reason:
                if rejected is not None:
                    rejected[f"{kind}: {reason}"] += 1
                continue
            question = question[0].upper() + question[1:]
            out.append(Row(kind, question, golds, (article.index,), (article.index,)))
    return out


def build_read(
    articles: Sequence[Article], rejected: Counter[str] | None = None
) -> tuple[Built, ...]:
    """Every article's wh-questions in order, ``answer_capped``; rejections counted in
    ``rejected``. Why no two-hop ones: docs/data.md, "Reworded wh-questions"."""
    ctx = Context.of(articles)
    rows = [r for a in articles for r in wh_rows(a, ctx, rejected)]
    return tuple(as_built(SOURCE_READ, answer_capped(rows)))
