"""The offline site served in this process (a data job or warm start without ``treegrpo
serve-web``), its pages addressed as ``http://wiki.test/...`` (``HOST``), never by port, so
every URL an agent sees is the same in every run (docs/real-model.md, "The web warm start").
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from treegrpo.tools.web.fetch import PageFetcher
from treegrpo.tools.web.search import SearxngSearch
from treegrpo.website.site import Site, create_site_app

HOST = "wiki.test"
"""The name the site's pages are addressed by (RFC 2606 reserves ``.test``)."""
START_TIMEOUT_S = 30.0


class LocalSite:
    """A site served by uvicorn in a background thread: ``address`` (``127.0.0.1:<port>``),
    ``url`` (``http://<address>``), ``host`` (its pages' public name), ``public_url``."""

    def __init__(self, server: Any, thread: threading.Thread, port: int, host: str) -> None:
        self._server, self._thread = server, thread
        self.address = f"127.0.0.1:{port}"
        self.url = f"http://{self.address}"
        self.host = host
        self.public_url = f"http://{host}"

    @classmethod
    def start(cls, site: Site, host: str = HOST, **app_kwargs: Any) -> LocalSite:
        """Serve ``site`` and return once it answers; RuntimeError past ``START_TIMEOUT_S``."""
        import uvicorn

        sock = socket.create_server(("127.0.0.1", 0))  # SO_REUSEADDR set, as uvicorn does
        port = int(sock.getsockname()[1])
        config = uvicorn.Config(
            create_site_app(site, **app_kwargs), log_level="warning", access_log=False
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="local-site", daemon=True
        )
        thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                server.should_exit = True
                sock.close()
                raise RuntimeError(f"the local site did not start on 127.0.0.1:{port}")
            time.sleep(0.01)
        return cls(server, thread, port, host)

    def search_client(self, **http: Any) -> SearxngSearch:
        """A SearXNG client of the site, result URLs on ``public_url`` (``HttpSearch`` options)."""
        headers = {**http.pop("headers", {}), "Host": self.host}
        return SearxngSearch(self.url, headers=headers, **http)

    def fetcher(self, **options: Any) -> PageFetcher:
        """A page fetcher that reaches ``public_url`` here (``options``: ``PageFetcher``'s)."""
        hosts = {**options.pop("hosts", {}), self.host: self.address}
        return PageFetcher(hosts=hosts, **options)

    def close(self) -> None:
        """Stop serving and wait for the thread (at most 10 s)."""
        self._server.should_exit = True
        self._thread.join(timeout=10)
