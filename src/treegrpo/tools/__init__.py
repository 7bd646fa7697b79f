"""Search tools: the interface the agent calls, retrievers (BM25, dense), an HTTP client for any
Search-R1 ``/retrieve`` server, and our own server (``treegrpo serve``)."""
