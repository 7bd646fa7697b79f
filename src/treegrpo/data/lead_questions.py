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
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from treegrpo.core.rewards import normalize_answer
from treegrpo.data.title_questions import FUNCTION_WORDS, base_title, first_sentence, leaks
from treegrpo.data.types import Question
from treegrpo.data.wiki import Article, Split, load_articles, split_of
from treegrpo.tools.corpus import make_contents


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


SOURCE = "wiki-qa"
SOURCE_2HOP = "wiki-qa2"
MAX_SAME_ANSWER = 40
MAX_ANSWER_SHARE = 0.03
"""At most ``MAX_SAME_ANSWER`` questions of one set (single-hop or two-hop), and at most this
share of it, have the same first gold answer."""
MAX_PER_BRIDGE = 5
"""At most this many two-hop questions of one kind go through one bridge article (every city in
China would otherwise ask for Beijing)."""
CLOZE_WORDS = (8, 40)  # a cloze sentence's length in words: enough context, not a paragraph

_UPPER = "A-Z" + "".join(c for c in map(chr, range(0xC0, 0x250)) if c.isupper())
_WORD = rf"[{_UPPER}][\w'’\-]*(?<=\w)(?:(?<=\b\w)\.)?"  # a capitalized word or an initial
_PARTICLE = r"(?:de|da|di|del|della|der|den|van|von|du|le|la|of|ibn|bin|y|dei|des|zu|the)"
_NAME = rf"(?<![\w'’\-]){_WORD}(?:\s(?:{_PARTICLE}\s)*{_WORD})*"
"""A proper name: capitalized words, with the particles names use inside ("Miguel de
Cervantes", "John of Damascus"); an initial keeps its full stop ("Arthur C. Clarke")."""
_NAME_RE = re.compile(_NAME)
_YEAR = r"\d{3,4}(?: BCE| BC| AD)?|\d{1,2} BCE?"
_MONTH = "January|February|March|April|May|June|July|August|September|October|November|December"

_HONORIFICS = frozenset(
    _words(
        "sir saint st pope king queen emperor empress dom lord lady dame prince princess don "
        "sultan shah tsar czar count duke baron earl marquess viscount"
    )
)
_HONORIFIC = re.compile(r"^(?:Sir|Dame|Lord|Lady|Saint|St\.) ")
_NATIONALITY = re.compile(r"[A-Z][a-z]+(?:an|ish|ese|ch|i|k|ss|ai|ol|ab)")
"""The shape of a demonym ("American", "English", "Chinese", "French", "Iraqi", "Greek",
"Swiss", "Thai", "Mongol", "Arab")."""
_NOT_NATIONALITIES = frozenset(
    _words(
        "Christian Puritan Republican Carolingian Merovingian Elizabethan Victorian Edwardian "
        "Sunni Shia Hindu Lutheran Anglican Presbyterian Franciscan Dominican Augustinian "
        "Cistercian Confucian Pythagorean Marxian Hegelian Darwinian Newtonian Keynesian "
        "Jacobean Georgian Ancient Early Late South North New West East Hong Sri Saudi Neo "
        "Catholic Islamic Church Sufi"
    )
)
"""Words of that shape that name no nationality (a faith, an era), or only its first half."""
_OCCUPATION_STOPS = frozenset(
    _words(
        "who whose which that during known best in of from at for to with under between active "
        "born widely considered regarded famous noted credited whom as since until on by after "
        "before most one also"
    )
)
_NOT_OCCUPATION = re.compile(r"(?:ed|ing|\b(?:group|band|duo|trio|ensemble|orchestra|team))$")
"""The end of an "occupation" that is none: a participle ("hip-hop group formed in …"), a group."""
_COUNTRY_DESCRIPTION = re.compile(r"(?:\w+ )?country\b(?! within)", re.I)
"""A country's short description: "Country in East Asia", "Island country …"; not "Country
within the United Kingdom" (Glasgow is in Scotland and in the United Kingdom)."""
_REGION_DESCRIPTION = re.compile(
    r"(?:U\.S\. )?(State|Province|Region|Prefecture|Autonomous community)(?=\s|$)", re.I
)
_PEOPLE_DESCRIPTION = re.compile(r".*\((?:c\. ?)?\d{1,4}(?: BC)?[–-](?:c\. ?)?\d{1,4}(?: BC)?\)$")

# Works and who made them: the noun or participle before "by" → the question's verb.
_MADE_BY = {
    "wrote": "novel novella book poem play treatise essay tragedy comedy epic dialogue "
    "satire pamphlet story written authored",
    "painted": "painting fresco portrait painted",
    "composed": "opera symphony concerto ballet oratorio composition music composed",
    "directed": "directed",
    "sculpted": "sculpture statue sculpted",
    "founded": "founded co-founded established",
    "discovered": "discovered",
    "invented": "invented",
    "proposed": "proposed formulated",
    "developed": "developed",
    "introduced": "introduced",
    "designed": "designed",
}
_VERB_OF = {word: verb for verb, words in _MADE_BY.items() for word in _words(words)}
_ROLE_OF = {"wrote": "author", "painted": "painter", "composed": "composer"}
_ROLE_OF |= {"directed": "director", "sculpted": "sculptor"}
_ROLES = (
    "author writer novelist poet painter artist composer director playwright sculptor "
    "philosopher dramatist physicist chemist mathematician scientist"
)
_BY = re.compile(
    rf"\b(?P<word>{'|'.join(sorted(_VERB_OF, key=len, reverse=True))})"
    rf"(?: (?:in|around) (?:about |late |early )?\d{{4}}| and (?P<also>[a-z\-]+))? by "
    rf"(?:(?:[A-Z][\w\-–]+ )?(?:[a-z]+ )?(?:{'|'.join(_words(_ROLES))}) )?(?:Sir )?"
    rf"(?P<who>{_NAME})"
)
_CO_MAKER = re.compile(r",? and [A-Z]|, [A-Z]|\s+[a-z]+\s+[A-Z]")
"""After a maker's name: a second maker ("by Gene Kelly and Stanley Donen"), or the name was a
nationality before an unknown role ("by German theologian Martin Luther")."""
_RELEASE = {"film": "released", "album": "released", "song": "released"}
_RELEASE |= {"novel": "published", "novella": "published", "book": "published"}
_RELEASE_RE = re.compile(
    rf"^(?:,[^.]*?,)? (?:is|was) an? (?P<y>\d{{4}}) [^.,]*?\b(?P<n>{'|'.join(_RELEASE)})\b"
)
_NUMBER_WORDS = _words(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
)

_LEAD_IN = re.compile(r"(?:In [^,]{1,60}, )?(?P<article>(?:(?P<a>The|the|A|a|An|an) )?)")
_SUBJECT = re.compile(r"(?P<subj>.+?),? (?P<verb>is|was|are|were) (?P<rest>.+)")
_APPOSITION = re.compile(r",\s+|\s+\(")
_BORN_NAME = re.compile(rf"born ({_NAME}(?: or {_NAME})*)")
_COURTESY = re.compile(rf"(?:and )?(?:with the )?courtesy name ({_NAME})")
_OFFICIAL = re.compile(
    r"(?:officially|formally)(?: and also known as| known as| called)? (?:the )?(.+)"
)
_KNOWN_AS = re.compile(
    r"(?:and )?(?:also |commonly |more commonly |better |often |sometimes |formerly |originally )?"
    r"(?:known|called|referred to|spelled|nicknamed)(?: simply| mononymously| professionally)?"
    r"(?: as)? (.+)"
)
_NOT_IN_NAMES = frozenset(_words("called known referred named as by formerly professionally"))
_NAMES_SPLIT = re.compile(r",\s+(?:or\s+|and\s+)?|\s+or\s+|\s+and\s+")
_NATIONALITY_REST = re.compile(r"an? ([A-Z][a-z]+) (.*)")
_BORN = re.compile(
    rf"(?:^|\. )(?P<who>[\w'’\-]+) was born in (?P<place>{_NAME}(?:, {_NAME})*)"
    rf"(?:,? in (?P<year>{_YEAR}))?[,.]"
)
_DEATH = re.compile(
    rf"until (?:his|her) death (?:in|on) (?:\d{{1,2}} )?(?:(?:{_MONTH}) )?(?:early |late )?"
    rf"({_YEAR})\b"
)
_CAPITAL_OF = re.compile(
    r"(?:^|\. )(?P<who>[^.]+?) is the capital(?: city)?(?: and (?:the )?largest city)? of "
    r"(?P<y>(?:the )?[^,.;()]+?)(?=[,.;(]| and (?:the|one|its)\b| as well\b| with\b|$)"
)
_PLACE_PREFIX = re.compile(
    r"^(?:(?:[a-z\-]+|[A-Z][a-z]+(?:an|ish|ese|ch|i)) )*"
    r"(?:state|province|region|community|country|republic|district) of "
)
"""What comes before a place's name: "Indian state of", "autonomous community of" (not "West
Java province of Indonesia": Bandung is the capital of West Java, not of Indonesia)."""
_ITS_CAPITAL = re.compile(rf"Its capital(?: city)?(?: and largest city)? is ({_NAME})[,.;]")
_IN_COUNTRY = re.compile(
    rf"^(?:,[^.]*?,)? (?:is|lies) (?:an?|the) (?P<what>(?:[\w\-]+ ){{0,6}}?)(?:located |situated )?"
    rf"(?:in|of|on (?:the )?(?:[a-z\-]+ )*?(?:coast|shore|bank|border)s? of) (?:the )?"
    rf"(?:[a-z\-]+ ){{0,3}}(?:{_NAME}, )?(?P<c>{_NAME})[,.]"
)
"""A place in a country: "is a large city in southern Turkey.", "is a province of Pakistan.",
"is a city on the northeastern coast of Spain." (and a region between: "in Punjab, Pakistan")."""
_FOUNDED = re.compile(rf"(?:^|\. )It (?:was )?(founded|established) in ({_YEAR})\b")
_FOUNDED_FIRST = re.compile(rf"\b(founded|established) in ({_YEAR})\b")
_ABBREVIATION = re.compile(r"^ \(([A-Z][A-Z]{1,6})\)")
_TAXA = {
    "family": re.compile(r"\bfamily ([A-Z][a-z]+(?:idae|aceae))\b"),
    "order": re.compile(r"\border ([A-Z][a-z]+(?:formes|ales))\b"),
}
"""Ranks a lead names with their suffix ("family Rosaceae", "order Passeriformes"): a word after
"genus" or a bare "order" may be anything."""
_OTHER_ORGANISM = re.compile(
    r"\b(?:infect|caus|other|feed|parasit|host|transmit|pollinat|eat|prey|spread)\w*\b"
)
"""Before a taxon in its sentence: the taxon is of another organism ("a virus that infects
tobacco and other members of the family Solanaceae")."""
_ELEMENT = re.compile(
    r"^ is a chemical element(?:;| with)(?: it has)? (?:the )?symbol ([A-Z][a-z]?) "
    r"and atomic number (\d+)\b"
)
_NUMBER = re.compile(r"(?<![\w.,–\-/])\d+(?:,\d{3})*(?:\.\d+)?(?![\w–\-/%]|[.,]\d)")

_COMPOSABLE = frozenset(
    _words(
        "nationality occupation full-name birth-name courtesy-name alias birthplace birth-year "
        "death-year capital official-name founded-year family order country"
    )
)
"""Kinds a two-hop question may ask of its bridge article: their question names the subject so
that a description ("the author of X") can take its place."""
_NOT_COMPOSED = frozenset(
    _words(
        "capital+capital capital-of+capital country+capital-of capital+country country+country "
        "creator+occupation"
    )
)
"""Pairs whose second hop is no hop: "the capital of the country whose capital is X"."""
_ENTITY_ANSWERS = frozenset(
    _words("capital capital-of country region creator originator birthplace")
)
"""Kinds whose answer is another entity: it must not share a word stem with the question."""


@dataclass(frozen=True)
class Fact:
    """One thing a lead says, as a question template: ``ask`` holds "{s}" where the subject
    goes, ``about`` in a single-hop question, a bridge description ("the author of Heart of
    Darkness") in a two-hop one."""

    kind: str
    index: int  # the article whose passage holds the answer
    ask: str  # "What nationality was {s}?"
    about: str  # the subject as a single-hop question names it
    golds: tuple[str, ...]  # golds[0] is verbatim in the passage
    entity: str = ""  # title of the article the fact is about ("" if none): two-hop joins on it
    bridge: str = ""  # how a two-hop question names golds[0] through this fact ("" if it can't)


@dataclass(frozen=True)
class Context:
    """What the templates need to know of the whole corpus."""

    titles: frozenset[str]
    countries: frozenset[str]  # titles of articles whose short description says "country"
    regions: Mapping[str, str]  # title → "state", "province", … (from the short description)
    people: frozenset[str]  # titles of articles about a person

    @classmethod
    def of(cls, articles: Sequence[Article]) -> Context:
        countries = (a.title for a in articles if _COUNTRY_DESCRIPTION.match(a.description))
        regions = {
            a.title: m[1].lower()
            for a in articles
            if (m := _REGION_DESCRIPTION.match(a.description))
        }
        people = (a.title for a in articles if is_person(a))
        titles = frozenset(a.title for a in articles)
        return cls(titles, frozenset(countries), regions, frozenset(people))


@dataclass(frozen=True)
class Built:
    """A question, the articles whose passages it reads (the first hop's first), and every
    article it touches: those and the bridge's own article, which its search would find."""

    question: Question
    articles: tuple[int, ...]
    touches: tuple[int, ...]
    bridge: str = ""  # a two-hop question's bridge: the title the first hop answers ("" if none)
    then: str = ""  # the second hop asked of the bridge by name ("What nationality was …?")


class HopPlan(NamedTuple):
    """How a perfect reader answers a two-hop question: find ``bridge`` (an article's title,
    written in the first article's passage), then ask ``then`` of it."""

    bridge: str
    then: str


class Row(NamedTuple):
    """A question being built (``Built`` once it has a uid)."""

    kind: str
    question: str
    golds: tuple[str, ...]
    articles: tuple[int, ...]
    touches: tuple[int, ...]
    bridge: str = ""
    then: str = ""


def passage(article: Article) -> str:
    """The article's corpus passage, what a retriever returns: every gold is a span of it."""
    return make_contents(article.title, article.extract)


def is_span(gold: str, text: str) -> bool:
    """Whether ``gold`` is a run of whole tokens of ``text`` after SQuAD normalization."""
    g = normalize_answer(gold)
    return bool(g) and f" {g} " in f" {normalize_answer(text)} "


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, split as ``title_questions.first_sentence`` splits."""
    out = []
    text = text.strip()
    while text:
        first = first_sentence(text)
        out.append(first)
        text = text[len(first) :].strip()
    return out


def is_person(article: Article) -> bool:
    """Topic "People", or a short description ending in a life span ("… (1805–1865)")."""
    return article.topic == "People" or bool(_PEOPLE_DESCRIPTION.match(article.description))


def number_golds(number: str) -> tuple[str, ...]:
    """A number as written, without thousands commas, and in words up to twenty."""
    plain = number.replace(",", "")
    words = (_NUMBER_WORDS[int(plain)],) if plain.isdigit() and int(plain) <= 20 else ()
    return tuple(dict.fromkeys((number, plain, *words)))


def year_golds(year: str) -> tuple[str, ...]:
    """A year as written, with "BCE" for "BC" and back."""
    if year.endswith(" BC"):
        return (year, year + "E")
    if year.endswith(" BCE"):
        return (year, year[:-1])
    return (year,)


def _clean(span: str) -> str:
    """A span without surrounding quotes, a leading article or a sentence's full stop."""
    span = span.strip().strip("\"“”'‘’").strip()
    span = re.sub(r"^(?:the|a|an)\s+", "", span, flags=re.I)
    if span.endswith(".") and not re.search(r"\b\w\.$", span):
        span = span[:-1]
    return span.rstrip(",;:")


def after_title(sentence: str, title: str) -> tuple[str, str] | None:
    """(the subject as the lead writes it, the rest of the sentence) when ``sentence`` begins
    with the title, else None. The title may follow "In <field>, " and "The", "A" or "An", be
    quoted, and differ in case: "A low Earth orbit (LEO) is …" → ("low Earth orbit", " (LEO)
    is …"); "In geometry, an angle is …" → ("angle", " is …")."""
    m = _LEAD_IN.match(sentence)
    assert m is not None  # every group is optional
    for start, article in ((m.start("article"), None), (m.end("article"), m["a"])):
        quoted = sentence[start : start + 1] in '"“'
        begin = start + quoted
        end = begin + len(title)
        if sentence[begin:end].lower() != title.lower() or re.match(r"\w", sentence[end:][:1]):
            continue
        name = sentence[begin:end]
        if article and article.lower() == "the" and not name.lower().startswith("the "):
            name = "the " + name
        return name, sentence[end + quoted :]
    return None


def subject_name(article: Article) -> str:
    """How questions name the article: as its lead's first words do ("the poinsettia",
    "read-only memory"), else its title without a disambiguator."""
    title = base_title(article.title)
    found = after_title(first_sentence(article.extract), title)
    return found[0] if found else title


def _own(article: Article, kind: str, ask: str, golds: Sequence[str], bridge: str = "") -> Fact:
    """A fact about the article itself, read from its own passage."""
    about = subject_name(article)
    golds = tuple(dict.fromkeys(golds))
    return Fact(kind, article.index, ask, about, golds, article.title, bridge)


def _names(text: str) -> list[str]:
    """The names of "A, B or C" / "A and B", quotes and "simply" dropped; [] when a piece is
    more than five words or holds other characters (the parse ran past the list)."""
    out = []
    for piece in _NAMES_SPLIT.split(text.strip()):
        piece = _clean(re.sub(r"^(?:simply|just|sometimes|also)\s+", "", piece.strip()))
        if (
            not piece
            or len(piece.split()) > 5
            or not re.fullmatch(r"[\w'’.\- ]+", piece)
            or set(piece.lower().split()) & _NOT_IN_NAMES
        ):
            return []
        out.append(piece)
    return out


def name_facts(article: Article) -> list[Fact]:
    """full-name, birth-name, courtesy-name, alias and official-name, from the subject of the
    first sentence and the appositions after it ("Cao Cao, courtesy name Mengde, was …")."""
    parts = _SUBJECT.match(first_sentence(article.extract))
    if parts is None:
        return []
    title = base_title(article.title)
    past = parts["verb"] in ("was", "were")
    segments = [s.strip() for s in _APPOSITION.split(parts["subj"])]
    heads = [h.strip() for h in re.sub(r"^(?:The|A|An)\s+", "", segments[0]).split(" or ")]
    alias = [h for h in heads[1:] if _NAME_RE.fullmatch(h)]
    out = []
    main, title_tokens = heads[0], set(normalize_answer(title).split())
    main_tokens = set(normalize_answer(main).split())
    if (
        is_person(article)
        and _NAME_RE.fullmatch(main)
        and (main_tokens - title_tokens) - _HONORIFICS
        and not title_tokens - main_tokens
    ):
        ask = f"What {'was' if past else 'is'} the full name of {{s}}?"
        out.append(_own(article, "full-name", ask, [main, _HONORIFIC.sub("", main)]))
    for segment, after in zip(segments[1:], [*segments[2:], ""], strict=False):
        if after[:1].isupper():  # "officially the Special District of Science, Technology …"
            continue
        if (m := _BORN_NAME.fullmatch(segment)) and is_person(article) and _names(m[1]):
            out.append(_own(article, "birth-name", "What was the birth name of {s}?", _names(m[1])))
        elif m := _COURTESY.fullmatch(segment):
            out.append(_own(article, "courtesy-name", "What was the courtesy name of {s}?", [m[1]]))
        elif (m := _OFFICIAL.fullmatch(segment)) and _NAME_RE.fullmatch(m[1]):
            out.append(_own(article, "official-name", "What is the official name of {s}?", [m[1]]))
        elif m := _KNOWN_AS.fullmatch(segment):
            alias += _names(m[1])
    known_as_title = any(normalize_answer(a) == normalize_answer(title) for a in alias)
    if (
        known_as_title
        and is_person(article)
        and len(main.split()) >= 2
        and _NAME_RE.fullmatch(main)
        and not (main_tokens & title_tokens)
    ):  # "Marshall Bruce Mathers III, known professionally as Eminem, is …"
        ask = f"What {'was' if past else 'is'} the full name of {{s}}?"
        out.append(_own(article, "full-name", ask, [main, _HONORIFIC.sub("", main)]))
    alias = [a for a in alias if normalize_answer(a) != normalize_answer(title)]
    if alias and not any(is_span(a, title) for a in alias):
        out.append(_own(article, "alias", "What is another name for {s}?", alias))
    return out


def _nationality(word: str) -> bool:
    return bool(_NATIONALITY.fullmatch(word)) and word not in _NOT_NATIONALITIES


def _described_nationality_differs(description: str, nationality: str) -> bool:
    """Whether the short description starts with another nationality, or a compound one
    ("Austrian–British psychoanalyst" for a lead that says "British")."""
    first = description.split(" ", 1)[0]
    parts = re.split(r"[-–]", first)
    if not any(_nationality(p) for p in parts):
        return False
    return first != nationality


def occupations(text: str) -> list[str]:
    """The lowercase noun list after a nationality: "theatre practitioner, playwright, and poet
    who …" → ["theatre practitioner", "playwright", "poet"]. An item followed by "of" or "to"
    ("co-founder of …") is left out: it is half of a longer phrase."""
    items: list[str] = []
    words: list[str] = []
    for token in re.findall(r"[\w\-']+|[^\w\s]", text):
        if token in (",", "and", "or"):
            if words:
                items.append(" ".join(words))
            words = []
            continue
        if token.lower() in _OCCUPATION_STOPS or not re.fullmatch(r"[a-z][a-z\-]*", token):
            if words and token not in ("of", "to"):
                items.append(" ".join(words))
            words = []
            break
        words.append(token)
    if words:
        items.append(" ".join(words))
    return [i for i in items if len(i.split()) <= 3 and not _NOT_OCCUPATION.search(i)]


def person_facts(article: Article) -> list[Fact]:
    """nationality and occupation ("X was an English social reformer, …"), birthplace and
    birth-year ("He was born in Pisa in 1564"), death-year ("… until his death in 1934",
    checked against the life span of the short description when it gives one)."""
    if not is_person(article):
        return []
    out = []
    title = base_title(article.title)
    parts = _SUBJECT.match(first_sentence(article.extract))
    if parts and parts["verb"] in ("is", "was") and " who " not in parts["subj"]:
        verb = parts["verb"]
        m = _NATIONALITY_REST.match(parts["rest"])
        if (
            m
            and _nationality(m[1])
            and not _described_nationality_differs(article.description, m[1])
            and not re.match(r"(?:and|or)\b", m[2])
        ):
            out.append(_own(article, "nationality", f"What nationality {verb} {{s}}?", [m[1]]))
            jobs = occupations(m[2])
            if jobs:
                one = "one of the occupations" if len(jobs) > 1 else "the occupation"
                golds = jobs + [f"{m[1]} {j}" for j in jobs]
                out.append(_own(article, "occupation", f"What {verb} {one} of {{s}}?", golds))
    who = {"He", "She", title, title.split()[-1], title.split()[0]}
    born = [b for b in _BORN.finditer(article.extract) if b["who"] in who]
    if len(born) == 1 and not re.search(r"\b(?:House|Duchy|Kingdom|Empire)\b", born[0]["place"]):
        place = born[0]["place"]
        golds = [place] + ([place.split(", ")[0]] if ", " in place else [])
        out.append(_own(article, "birthplace", "Where was {s} born?", golds))
        if born[0]["year"]:
            ask = "In which year was {s} born?"
            out.append(_own(article, "birth-year", ask, year_golds(born[0]["year"])))
    deaths = set(_DEATH.findall(article.extract))
    lived = re.search(r"[–-](?:c\. ?)?(\d{1,4}(?: BC)?)\)$", article.description)
    if len(deaths) == 1 and (lived is None or lived[1] == next(iter(deaths))):
        ask = "In which year did {s} die?"
        out.append(_own(article, "death-year", ask, year_golds(deaths.pop())))
    return out


def place_facts(article: Article, ctx: Context) -> list[Fact]:
    """capital, capital-of, country, founded-year."""
    title = base_title(article.title)
    out = []
    lead = sentences(article.extract)
    first, two = (lead[0] if lead else ""), " ".join(lead[:2])
    m = _CAPITAL_OF.search(two)
    if m and (m["who"] == "It" or after_title(m["who"], title)):
        place = m["y"].removeprefix("the ")
        core = re.sub(
            r" (?:[Pp]rovince|[Ss]tate|[Rr]egion|Prefecture|Governorate)$",
            "",
            _PLACE_PREFIX.sub("", place),
        )
        if _NAME_RE.fullmatch(core):
            entity = core if core in ctx.titles else ""
            noun = "country" if entity in ctx.countries else ctx.regions.get(entity, "")
            bridge = f"the {noun} whose capital is {title}" if noun else ""
            out.append(
                Fact(
                    "capital",
                    article.index,
                    "What is the capital of {s}?",
                    m["y"],
                    (title,),
                    entity,
                    bridge=f"the capital of {m['y']}",
                )
            )
            out.append(
                _own(article, "capital-of", "What is {s} the capital of?", [core, place], bridge)
            )
    m = _ITS_CAPITAL.search(article.extract)
    if m:
        ask, bridge = "What is the capital of {s}?", f"the capital of {subject_name(article)}"
        out.append(_own(article, "capital", ask, [m[1]], bridge))
    rest = after_title(first, title)
    m = _IN_COUNTRY.match(rest[1]) if rest else None
    if (
        m
        and (m["c"] in ctx.countries or m["c"] in ctx.regions)
        and not re.search(r"\bcapital\b|\w(?:ed|ing) ", m["what"])
        and article.topic not in ("People", "Biology and health sciences")
        and article.title not in ctx.countries
        and sum(bool(re.search(rf"\b{re.escape(c)}\b", first)) for c in ctx.countries) <= 1
    ):
        kind, noun = (
            ("country", "country") if m["c"] in ctx.countries else ("region", ctx.regions[m["c"]])
        )
        bridge = f"the {noun} where {subject_name(article)} is located"
        out.append(_own(article, kind, f"In which {noun} is {{s}}?", [m["c"]], bridge))
    founded = _FOUNDED.findall(article.extract)
    founded += _FOUNDED_FIRST.findall(rest[1]) if rest else []
    if len(set(founded)) == 1:
        verb, year = founded[0]
        ask = f"In which year was {{s}} {verb}?"
        out.append(_own(article, "founded-year", ask, year_golds(year)))
    return out


def work_facts(article: Article, ctx: Context) -> list[Fact]:
    """creator / originator ("a novel by English author Jane Austen", "discovered in 1932 by
    James Chadwick"), a bridge when the maker has an article; release-year ("a 1972 American
    epic gangster film")."""
    first = first_sentence(article.extract)
    rest = after_title(first, base_title(article.title))
    if rest is None:
        return []
    out = []
    name = subject_name(article)
    found = list(_BY.finditer(rest[1]))
    m = found[0] if len(found) == 1 else None
    if (
        m
        and not _CO_MAKER.match(rest[1][m.end("who") :])
        and not _nationality(m["who"])
        and (" " in _clean(m["who"]) or _clean(m["who"]) in ctx.titles)  # not "by Berry"
    ):
        verb, who = _VERB_OF[m["word"]], _clean(m["who"])
        if m["also"] == "directed":  # "a film written and directed by …": its director
            verb = "directed"
        golds = [who]  # the name as written: a surname alone fails for "Liu Bang", "De Sica"
        what = "the film " if verb == "directed" else ""
        if verb in _ROLE_OF:
            kind, bridge = "creator", f"the {_ROLE_OF[verb]} of {what}{name}"
        else:
            kind, bridge = "originator", f"the person who {verb} {name}"
        bridge = bridge if who in ctx.people else ""
        out.append(_own(article, kind, f"Who {verb} {what}{{s}}?", golds, bridge))
    m = _RELEASE_RE.match(rest[1])
    if m:
        ask = f"In which year was the {m['n']} {{s}} {_RELEASE[m['n']]}?"
        out.append(_own(article, "release-year", ask, [m["y"]]))
    return out


def science_facts(article: Article) -> list[Fact]:
    """abbreviation ("Low Earth orbit (LEO)"), family and order of an organism, symbol and
    atomic number of a chemical element."""
    title = base_title(article.title)
    lead = sentences(article.extract)
    rest = after_title(lead[0], title) if lead else None
    if rest is None:
        return []
    out = []
    m = _ABBREVIATION.match(rest[1])
    if m and _initials_match(rest[0], m[1]):
        out.append(_own(article, "abbreviation", "What is the abbreviation of {s}?", [m[1]]))
    if article.topic == "Biology and health sciences":
        two = " ".join(lead[:2])
        for rank, pattern in _TAXA.items():
            found = list(pattern.finditer(two))
            taxa = {m[1] for m in found}
            other = any(_OTHER_ORGANISM.search(two[: m.start()].rsplit(". ", 1)[-1]) for m in found)
            if len(taxa) == 1 and not other:
                ask = f"To which {rank} does {{s}} belong?"
                out.append(_own(article, rank, ask, [taxa.pop()], f"the {rank} of {{s}}"))
    m = _ELEMENT.match(rest[1])
    if m:
        out.append(_own(article, "symbol", "What is the chemical symbol of {s}?", [m[1]]))
        ask = "What is the atomic number of {s}?"
        out.append(_own(article, "atomic-number", ask, number_golds(m[2])))
    return out


def _initials_match(phrase: str, abbreviation: str) -> bool:
    """Whether an abbreviation is the phrase's initials, with or without its small words."""
    words = [w for w in re.split(r"[\s\-,]+", phrase) if w and w.lower() != "the"]
    every = "".join(w[0] for w in words).upper()
    big = "".join(w[0] for w in words if w.lower() not in FUNCTION_WORDS | {"of", "and"}).upper()
    return abbreviation in (every, big)


def cloze_fact(article: Article) -> Fact | None:
    """One sentence of the lead with a proper name or a number blanked out, or None. The
    candidates are the names (not a sentence's first word, no word shared with the title) and
    numbers that occur once in sentences of ``CLOZE_WORDS`` words; a hash of the title picks
    one, so the choice is fixed."""
    title = base_title(article.title)
    candidates: list[tuple[str, str, str]] = []  # (kind, sentence with a blank, gold)
    for sentence in sentences(article.extract):
        if not CLOZE_WORDS[0] <= len(sentence.split()) <= CLOZE_WORDS[1] or "_" in sentence:
            continue
        spans = [("cloze-name", m) for m in _NAME_RE.finditer(sentence) if m.start() > 0]
        spans += [
            ("cloze-number", m)
            for m in _NUMBER.finditer(sentence)
            if sentence[m.start() - 1 : m.start()] != "("
        ]
        for kind, m in spans:
            gold = re.sub(r"['’]s$", "", m[0]).rstrip(".") if kind == "cloze-name" else m[0]
            norm = normalize_answer(gold)
            rest = sentence[: m.start()] + " " + sentence[m.start() + len(gold) :]
            if (
                len(norm) < 2
                or norm in FUNCTION_WORDS
                or leaks(gold, title)
                or is_span(gold, rest)
                or (kind == "cloze-name" and sentence[m.start() - 1] not in ' "“(')
            ):
                continue
            blanked = sentence[: m.start()] + "___" + sentence[m.start() + len(gold) :]
            candidates.append((kind, blanked, gold))
    if not candidates:
        return None
    kind, blanked, gold = candidates[_hash(article.title) % len(candidates)]
    golds = number_golds(gold) if kind == "cloze-number" else (gold,)
    return Fact(kind, article.index, f"Fill in the blank about {{s}}: {blanked}", title, golds)


def _hash(text: str) -> int:
    """A stable hash (not Python's salted ``hash``): fixed choices that look random."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def article_facts(article: Article, ctx: Context) -> list[Fact]:
    """Every templated fact of one article, its cloze last (see the module docstring)."""
    facts = name_facts(article) + person_facts(article) + place_facts(article, ctx)
    facts += work_facts(article, ctx) + science_facts(article)
    cloze = cloze_fact(article)
    return facts + ([cloze] if cloze else [])


def is_valid(kind: str, question: str, golds: Sequence[str], text: str) -> bool:
    """The checks every question passes: the golds are spans of ``text`` (the first one
    verbatim), none is in the question, and an entity answer shares no word stem with it."""
    asked = f" {normalize_answer(question)} "
    return (
        bool(golds)
        and golds[0] in text
        and all(is_span(g, text) for g in golds)
        and not any(f" {normalize_answer(g)} " in asked for g in golds)
        and not (kind in _ENTITY_ANSWERS and leaks(question, golds[0]))
    )


def build_questions(
    articles: Sequence[Article],
    max_same_answer: int = MAX_SAME_ANSWER,
    max_answer_share: float = MAX_ANSWER_SHARE,
) -> tuple[Built, ...]:
    """All single- and two-hop questions over ``articles`` (both splits), single-hop first,
    each set in article order. Of one set, at most ``max_same_answer`` questions and at most
    ``max_answer_share`` of them (at least one) share a first gold answer."""
    ctx = Context.of(articles)
    text = {a.index: passage(a) for a in articles}
    index_of = {a.title: a.index for a in articles}
    facts = [f for a in articles for f in article_facts(a, ctx)]
    facts = [f for f in facts if is_valid(f.kind, _ask(f, f.about), f.golds, text[f.index])]
    single = [Row(f.kind, _ask(f, f.about), f.golds, (f.index,), (f.index,)) for f in facts]
    about: dict[str, list[Fact]] = defaultdict(list)
    for f in facts:
        if f.entity and f.kind in _COMPOSABLE:
            about[f.entity].append(f)
    double: list[tuple[Row, str]] = []
    for first in facts:
        bridge = first.golds[0]
        if not first.bridge or bridge not in ctx.titles:
            continue
        for second in about[bridge]:
            kind = f"{first.kind}+{second.kind}"
            question = _ask(second, first.bridge.replace("{s}", first.about))
            if (
                second.index == first.index
                or kind in _NOT_COMPOSED
                or leaks(question, bridge)
                or not is_valid(second.kind, question, second.golds, text[second.index])
                or any(is_span(g, text[first.index]) for g in second.golds)
            ):  # the last: "a novel by English author Jane Austen" needs no second hop
                continue
            read = (first.index, second.index)
            touches = tuple(dict.fromkeys((*read, index_of[bridge])))
            then = _ask(second, second.about)
            double.append((Row(kind, question, second.golds, read, touches, bridge, then), bridge))
    out: list[Built] = []
    for source, rows in ((SOURCE, single), (SOURCE_2HOP, _per_bridge(double))):
        counter: Counter[str] = Counter()
        rows = _unambiguous(rows)
        limit = min(max_same_answer, max(1, int(max_answer_share * len(rows))))
        for row in _cap_answers(rows, limit):
            prefix = f"{source}-" + "-".join(map(str, row.articles))
            uid = f"{prefix}-{counter[prefix]}"
            counter[prefix] += 1
            hops, index = len(row.articles), row.articles[0]
            q = Question(uid, row.question, row.golds, source, hops, index, kind=row.kind)
            out.append(Built(q, row.articles, row.touches, row.bridge, row.then))
    return tuple(out)


def _ask(fact: Fact, subject: str) -> str:
    return fact.ask.replace("{s}", subject)


def _per_bridge(rows: Sequence[tuple[Row, str]]) -> list[Row]:
    """At most ``MAX_PER_BRIDGE`` rows per (bridge, kind), a hash of the question choosing
    which, in article order."""
    count: Counter[tuple[str, str]] = Counter()
    keep = []
    for row, bridge in sorted(rows, key=lambda rb: _hash(rb[0].question)):
        count[(bridge, row.kind)] += 1
        if count[(bridge, row.kind)] <= MAX_PER_BRIDGE:
            keep.append(row)
    return sorted(keep, key=lambda r: (r.articles, r.question))


def _unambiguous(rows: Sequence[Row]) -> list[Row]:
    """``rows`` without the questions asked twice with different answers; of one asked twice
    with the same answers, the first."""
    answers: dict[str, set[frozenset[str]]] = defaultdict(set)
    for row in rows:
        answers[normalize_answer(row.question)].add(frozenset(map(normalize_answer, row.golds)))
    seen: set[str] = set()
    out = []
    for row in rows:
        key = normalize_answer(row.question)
        if len(answers[key]) == 1 and key not in seen:
            seen.add(key)
            out.append(row)
    return out


def _cap_answers(rows: Sequence[Row], limit: int) -> list[Row]:
    """``rows`` with at most ``limit`` per first gold answer, a hash of the question choosing
    which, in their order."""
    count: Counter[str] = Counter()
    keep = set()
    for i in sorted(range(len(rows)), key=lambda i: _hash(rows[i].question)):
        answer = normalize_answer(rows[i].golds[0])
        count[answer] += 1
        if count[answer] <= limit:
            keep.add(i)
    return [row for i, row in enumerate(rows) if i in keep]


def split_questions(
    built: Sequence[Built], articles: Sequence[Article], split: Split
) -> list[Question]:
    """The questions of one split: train when every article touched is train, else test."""
    title = {a.index: a.title for a in articles}
    return [b.question for b in built if question_split(b, title) == split]


def question_split(built: Built, title: Mapping[int, str]) -> Split:
    """ "test" when the question touches a test article (``title``: index → title), else "train"."""
    return "test" if any(split_of(title[i]) == "test" for i in built.touches) else "train"


def lead_questions(split: Split, hops: int | None = None) -> list[Question]:
    """The reading questions of one split of the offline corpus: single-hop then two-hop,
    each in article order; ``hops`` 1 or 2 keeps those only."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if hops not in (None, 1, 2):
        raise ValueError(f"hops must be 1, 2 or None, got {hops!r}")
    return [q for q in _split(split) if hops is None or q.hops == hops]


@lru_cache(maxsize=2)
def _split(split: Split) -> tuple[Question, ...]:
    return tuple(split_questions(all_built(), load_articles(), split))


def hop_plan(uid: str) -> HopPlan | None:
    """The bridge and second hop of the two-hop question ``uid`` (None for a single-hop one)."""
    return _plans().get(uid)


@lru_cache(maxsize=1)
def _plans() -> dict[str, HopPlan]:
    return {b.question.uid: HopPlan(b.bridge, b.then) for b in all_built() if b.bridge}


@lru_cache(maxsize=1)
def all_built() -> tuple[Built, ...]:
    """Every question over the offline corpus with the articles it reads and touches (both
    splits; ``lead_questions`` splits them)."""
    return build_questions(load_articles())
