"""What the offline website shows of a corpus, as the web questions check it: ``SiteView``
computes the site's pages, links (``website.corpus.LinkIndex``) and search snippets for a list
of ``wiki.Article``, so a question's claim about the site holds on what the server really sends
(docs/data.md, "Web questions").
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from treegrpo.core.rewards import is_span
from treegrpo.data.wiki import Article
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.website.corpus import LinkIndex, WebArticle, first_sentence, site_passages


def web_article(article: Article) -> WebArticle:
    """A wiki article as a page of the site: its title, lead and short description."""
    return WebArticle(article.title, article.extract, article.description)


class SiteView:
    """The site over ``articles`` (numbered by position): snippets, page texts, links and search;
    ``use_cache``: keep the BM25 index on disk under ``cache_dir`` (worth it for 10k)."""

    def __init__(
        self,
        articles: Sequence[Article],
        *,
        cache_dir: str | Path | None = None,
        use_cache: bool = False,
    ) -> None:
        self.articles = {a.index: a for a in articles}
        self._order = [a.index for a in articles]
        self.by_title = {a.title: a.index for a in articles}
        index = LinkIndex(a.title for a in articles)
        self.links: dict[int, tuple[int, ...]] = {
            a.index: tuple(self.by_title[x.title] for x in index.links(a.extract, a.title))
            for a in articles
        }
        """Article → the articles its page links to, in the order of the lead."""
        self.snippets = {a.index: first_sentence(a.extract) for a in articles}
        passages = site_passages([web_article(a) for a in articles])
        self._retriever = BM25Retriever(passages, cache_dir=cache_dir, use_cache=use_cache)

    def page_text(self, index: int) -> str:
        """Everything article ``index``'s page says: title, short description, lead."""
        a = self.articles[index]
        return f"{a.title}\n{a.description}\n{a.extract}"

    def search(self, queries: Sequence[str], topk: int) -> list[list[int]]:
        """For each query, the articles of its first ``topk`` results, best first."""
        hits = self._retriever.search(list(queries), topk)
        return [[self._order[int(p.id)] for p in found] for found in hits]

    def in_snippets(self, golds: Sequence[str], results: Sequence[int]) -> bool:
        """Whether any gold is a span of the snippet of any of ``results``."""
        return any(is_span(g, self.snippets[i]) for i in results for g in golds)
