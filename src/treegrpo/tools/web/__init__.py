"""Web tools: pages fetched and read (``fetch``, ``text``), web search clients and the ``search``
tool (``search``), ``visit`` and ``find`` (``browse``). The offline website they are trained on
is ``treegrpo.website``."""
