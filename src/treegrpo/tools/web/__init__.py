"""Web tools: pages fetched and read (``fetch``, ``text``), web search clients and the ``search``
tool (``search``), ``visit`` and ``find`` (``browse``), and an offline website over the wiki
corpus (``site``)."""
