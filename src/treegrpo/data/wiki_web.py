"""The offline wiki as a website in this process (``data.search_url: "wiki:web"``), started on
first use and kept (docs/real-model.md, "The web warm start").
"""

from __future__ import annotations

import threading

from treegrpo.data.web_view import web_article
from treegrpo.data.wiki import load_articles
from treegrpo.website.local import LocalSite
from treegrpo.website.site import Site

WIKI_WEB = "wiki:web"
"""The built-in search URL: the offline wiki served in-process."""

_lock = threading.Lock()
_running: LocalSite | None = None


def wiki_web() -> LocalSite:
    """The site, started on first use (thread-safe); its positions are the articles' indices."""
    global _running
    with _lock:
        if _running is None:
            _running = LocalSite.start(Site([web_article(a) for a in load_articles()]))
        return _running
