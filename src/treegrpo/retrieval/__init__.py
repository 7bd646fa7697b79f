"""Retrieval: the search interface (``base``: passages, ``SearchTool``, how a call fails),
Search-R1 corpora, the BM25 and dense retrievers, the ``/retrieve`` wire format, our server
(``treegrpo serve``) and the client for any Search-R1 compatible server."""
