"""Every document the code, tests, benchmarks and docs refer to is in the repository, and so is
every section they name: ``docs/algorithm.md §3``, ``docs/algorithm.md, section 9`` and
``docs/design.md, "Layers"`` need the file and a heading numbered 3 or 9, or titled "Layers";
a markdown link ``[x](docs/data.md#anchor)`` needs the file and the anchor's heading. A
reference whose section name continues on the next line is read across the break.

Names of files that runs write (``report.md``, ``eval-after.md``…) are not references; a
reference is a path under ``docs/`` or ``bench/results/``, a document at the root
(``README.md``, ``BENCHMARKS.md``; upper-case names), or a markdown link. A failure names the
file, the line and the reference.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("src", "tests", "docs", "bench", "configs", "README.md", "BENCHMARKS.md", "Makefile")
SUFFIXES = {".py", ".md", ".yaml", ".toml", ".sh", ""}

# A path to a document, then optionally the section: "§ 3", "section 3" or ', "Heading"'.
REFERENCE = re.compile(
    r"(?<![\w/.-])(?P<path>(?:\.\./)*(?:docs/|bench/results/)?[\w-]+\.md)"
    r"(?:,? ?(?:§ ?(?P<num>\d+)|section (?P<sec>\d+)|\"(?P<title>[^\"\n]{3,80})\"))?"
)
BROKEN = re.compile(  # the same, with a heading's name that may span a line break
    r"(?<![\w/.-])(?P<path>(?:\.\./)*(?:docs/|bench/results/)?[\w-]+\.md)"
    r"(?:, ?| )\"(?P<title>[^\"]{3,80})\""
)
LINK = re.compile(r"\]\((?P<path>[^)\s#]+\.md)(?:#(?P<anchor>[\w-]+))?\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.M)


def _files() -> list[Path]:
    out: list[Path] = []
    for name in SCANNED:
        p = ROOT / name
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            out += [f for f in sorted(p.rglob("*")) if f.is_file() and f.suffix in SUFFIXES]
    return [f for f in out if "__pycache__" not in f.parts and f != Path(__file__).resolve()]


def _is_reference(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return "/" in path or name[:-3].isupper()


def _resolve(path: str, source: Path) -> Path | None:
    """The document ``path`` names, seen from ``source``: relative to the source's folder (a
    markdown link), to the repository root, or inside docs/ (docs name each other by file)."""
    for base in (source.parent, ROOT, ROOT / "docs"):
        p = (base / path).resolve()
        if p.is_file() and ROOT in p.parents:
            return p
    return None


def _headings(doc: Path) -> list[str]:
    return HEADING.findall(doc.read_text(encoding="utf-8"))


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.lower())
    return text.replace(" ", "-")


def _problem(path: str, source: Path, num: str | None, title: str | None) -> str | None:
    doc = _resolve(path, source)
    if doc is None:
        return f"{path}: no such file in the repository"
    heads = _headings(doc)
    if num is not None and not any(re.match(rf"{num}\.? ", h) for h in heads):
        return f"{path}: no section numbered {num}"
    if title is not None and not any(title.lower() in h.lower() for h in heads):
        return f'{path}: no heading "{title}"'
    return None


def references() -> list[tuple[Path, int, str, str | None, str | None]]:
    """(file, line, path, section number, heading) of every reference found."""
    found = []
    for f in _files():
        lines = f.read_text(encoding="utf-8", errors="replace").splitlines()
        for i, line in enumerate(lines, 1):
            for m in REFERENCE.finditer(line):
                if _is_reference(m["path"]):
                    num = m["num"] or m["sec"]
                    found.append((f, i, m["path"], num, m["title"]))
            # a heading's name that runs onto the next line: read across the break
            following = lines[i].strip().lstrip("#").strip() if i < len(lines) else ""
            for m in BROKEN.finditer(f"{line} {following}"):
                if m.start("title") < len(line) < m.end("title") and _is_reference(m["path"]):
                    found.append((f, i, m["path"], None, m["title"]))
            if f.suffix == ".md":
                for m in LINK.finditer(line):
                    if not m["path"].startswith("http"):
                        found.append((f, i, m["path"], None, None))
    return found


def test_the_scan_sees_the_references() -> None:
    """The scan finds the references we know are there (a regex that matches nothing would
    pass the test below)."""
    got = {(r[2], r[3]) for r in references()}
    assert ("BENCHMARKS.md", None) in got
    assert any(path.endswith("algorithm.md") and num is not None for path, num in got)


def test_a_heading_name_broken_across_lines_is_read_whole() -> None:
    spans = [
        (f, i, title)
        for f, i, _, _, title in references()
        if title and title not in f.read_text(encoding="utf-8").splitlines()[i - 1]
    ]
    assert spans  # e.g. a docstring's 'docs/embedded.md, "The warm\n start"'


def test_a_missing_file_or_section_is_reported() -> None:
    src = ROOT / "docs" / "design.md"
    missing = "docs/nowhere.md: no such file in the repository"
    assert _problem("docs/nowhere.md", src, None, None) == missing
    no_section = "docs/algorithm.md: no section numbered 42"
    assert _problem("docs/algorithm.md", src, "42", None) == no_section
    assert _problem("docs/design.md", src, None, "No such heading") is not None
    assert _problem("docs/algorithm.md", src, "3", None) is None
    assert _problem("design.md", src, None, "Layers") is None


def test_every_file_and_section_referred_to_exists() -> None:
    bad = []
    for f, line, path, num, title in references():
        problem = _problem(path, f, num, title)
        if problem:
            bad.append(f"{f.relative_to(ROOT)}:{line}: {problem}")
    assert not bad, "references to what the repository does not hold:\n" + "\n".join(bad)


def test_every_link_anchor_names_a_heading() -> None:
    bad = []
    for f in (f for f in _files() if f.suffix == ".md"):
        for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            for m in LINK.finditer(line):
                doc = _resolve(m["path"], f)
                if doc is None or m["anchor"] is None:
                    continue
                if m["anchor"] not in {_anchor(h) for h in _headings(doc)}:
                    where = f"{f.relative_to(ROOT)}:{i}"
                    bad.append(f"{where}: {m['path']}#{m['anchor']}: no such heading")
    assert not bad, "links to headings that do not exist:\n" + "\n".join(bad)


def test_the_readme_lists_every_document() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = {m["path"] for m in LINK.finditer(readme)}
    missing = [f"docs/{p.name}" for p in sorted((ROOT / "docs").glob("*.md"))]
    missing = [p for p in missing if p not in linked]
    assert not missing, f"README.md links no page for: {missing}"
