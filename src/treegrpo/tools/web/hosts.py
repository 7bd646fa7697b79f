"""Host names that resolve to a fixed address for one HTTP client: a site reached by a name no
resolver knows (``http://wiki.test/wiki/Ada_Lovelace``) while it listens on a loopback port
chosen at start-up. The request's URL and ``Host`` header stay as they were, so the server builds
its links on the public name and nothing the client reports carries the port.
"""

from __future__ import annotations

from typing import Any

import httpx


class RoutedTransport(httpx.BaseTransport):
    """Sends each request to ``address`` (``"127.0.0.1:41234"``) over plain HTTP, keeping its own
    URL and ``Host`` header; ``**transport``: options of the ``httpx.HTTPTransport`` underneath."""

    def __init__(self, address: str, **transport: Any) -> None:
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"address must be host:port, got {address!r}")
        self.host, self.port = host, int(port)
        self._inner = httpx.HTTPTransport(**transport)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        # A new request: the caller's keeps its URL, which becomes the response's URL.
        url = request.url.copy_with(scheme="http", host=self.host, port=self.port)
        routed = httpx.Request(
            request.method,
            url,
            headers=request.headers,  # Host: the public name
            stream=request.stream,
            extensions=request.extensions,
        )
        return self._inner.handle_request(routed)

    def close(self) -> None:
        self._inner.close()


def host_mounts(hosts: dict[str, str] | None) -> dict[str, httpx.BaseTransport]:
    """httpx ``mounts`` that route each host name (any scheme, any port) to its address."""
    return {f"all://{name}": RoutedTransport(address) for name, address in (hosts or {}).items()}
