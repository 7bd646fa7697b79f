"""The regexes and word lists templates read leads with (names, years, nationalities, jobs,
descriptions, makers of works, places, taxa, elements), private to the package.
"""

from __future__ import annotations

import re


def _words(text: str) -> frozenset[str]:
    """The words of ``text`` (ruff's SIM905 would turn ``"…".split()`` into a list literal)."""
    return frozenset(text.split())


_UPPER = "A-Z" + "".join(c for c in map(chr, range(0xC0, 0x250)) if c.isupper())
_WORD = rf"[{_UPPER}][\w'’\-]*(?<=\w)(?:(?<=\b\w)\.)?"  # a capitalized word or an initial
_PARTICLE = r"(?:de|da|di|del|della|der|den|van|von|du|le|la|of|ibn|bin|y|dei|des|zu|the)"
_NAME = rf"(?<![\w'’\-]){_WORD}(?:\s(?:{_PARTICLE}\s)*{_WORD})*"
"""A proper name: capitalized words, with the particles names use inside ("Miguel de
Cervantes", "John of Damascus"); an initial keeps its full stop ("Arthur C. Clarke")."""
_NAME_RE = re.compile(_NAME)
_YEAR = r"\d{3,4}(?: BCE| BC| AD)?|\d{1,2} BCE?"
_MONTH = "January|February|March|April|May|June|July|August|September|October|November|December"

_HONORIFICS = _words("""sir saint st pope king queen emperor empress dom lord lady dame prince
princess don sultan shah tsar czar count duke baron earl marquess viscount""")
_HONORIFIC = re.compile(r"^(?:Sir|Dame|Lord|Lady|Saint|St\.) ")
_NATIONALITY = re.compile(r"[A-Z][a-z]+(?:an|ish|ese|ch|i|k|ss|ai|ol|ab)")
"""The shape of a demonym ("American", "English", "Chinese", "French", "Iraqi", "Greek",
"Swiss", "Thai", "Mongol", "Arab")."""
_NOT_NATIONALITIES = _words("""Christian Puritan Republican Carolingian Merovingian Elizabethan
Victorian Edwardian Sunni Shia Hindu Lutheran Anglican Presbyterian Franciscan Dominican
Augustinian Cistercian Confucian Pythagorean Marxian Hegelian Darwinian Newtonian Keynesian
Jacobean Georgian Ancient Early Late South North New West East Hong Sri Saudi Neo Catholic Islamic
Church Sufi""")
"""Words of that shape that name no nationality (a faith, an era), or only its first half."""
_OCCUPATION_STOPS = _words("""who whose which that during known best in of from at for to with under
between active born widely considered regarded famous noted credited whom as since until on by
after before most one also""")
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
_VERB_OF = {word: verb for verb, words in _MADE_BY.items() for word in words.split()}
_ROLE_OF = {"wrote": "author", "painted": "painter", "composed": "composer"}
_ROLE_OF |= {"directed": "director", "sculpted": "sculptor"}
_ROLES = (
    "author writer novelist poet painter artist composer director playwright sculptor "
    "philosopher dramatist physicist chemist mathematician scientist"
)
_BY = re.compile(
    rf"\b(?P<word>{'|'.join(sorted(_VERB_OF, key=len, reverse=True))})"
    rf"(?: (?:in|around) (?:about |late |early )?\d{{4}}| and (?P<also>[a-z\-]+))? by "
    rf"(?:(?:[A-Z][\w\-–]+ )?(?:[a-z]+ )?(?:{'|'.join(_ROLES.split())}) )?(?:Sir )?"
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
_NUMBERS = """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen
fifteen sixteen seventeen eighteen nineteen twenty"""
_NUMBER_WORDS = _NUMBERS.split()

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
_NOT_IN_NAMES = _words("called known referred named as by formerly professionally")
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
_PLACE_DESCRIPTION = re.compile(  # what a short description calls a place
    r"\b(?:country|city|town|capital|state|province|region|island|county|village|river|"
    r"mountain|sea|ocean|continent|municipality|territory|kingdom|empire|republic)\b",
    re.I,
)
