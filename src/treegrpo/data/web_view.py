"""What the offline website shows of a corpus, as the web questions check it: the server's own
``Site`` seen by article index, so a question's claim holds on what the server really sends
(docs/data.md, "Web questions").
"""

from __future__ import annotations

from collections.abc import Sequence

from treegrpo.core.rewards import is_span
from treegrpo.data.wiki import Article
from treegrpo.website.corpus import WebArticle, first_sentence
from treegrpo.website.site import Site


def web_article(article: Article) -> WebArticle:
    """A wiki article as a page of the site: its title, lead and short description."""
    return WebArticle(article.title, article.extract, article.description)


class SiteView:
    """The site over ``articles``: snippets, page texts, links, search (``use_cache``: on disk)."""

    def __init__(self, articles: Sequence[Article], *, use_cache: bool = False) -> None:
        self.articles = {a.index: a for a in articles}
        self._order = [a.index for a in articles]
        self.site = Site([web_article(a) for a in articles], use_cache=use_cache)
        by_title = {a.title: a.index for a in articles}
        self.links: dict[int, tuple[int, ...]] = {
            i: tuple(by_title[x.title] for x in links)
            for i, links in zip(self._order, self.site.links, strict=True)
        }
        """Article → the articles its page links to, in the order of the lead."""
        self.snippets = {a.index: first_sentence(a.extract) for a in articles}

    def page_text(self, index: int) -> str:
        """Everything article ``index``'s page says: title, short description, lead."""
        a = self.articles[index]
        return f"{a.title}\n{a.description}\n{a.extract}"

    def search(self, queries: Sequence[str], topk: int) -> list[list[int]]:
        """For each query, the articles of its first ``topk`` results, best first."""
        hits = self.site.retriever.search(list(queries), topk)
        return [[self._order[int(p.id)] for p in found] for found in hits]

    def in_snippets(self, golds: Sequence[str], results: Sequence[int]) -> bool:
        """Whether any gold is a span of the snippet of any of ``results``."""
        return any(is_span(g, self.snippets[i]) for i in results for g in golds)
