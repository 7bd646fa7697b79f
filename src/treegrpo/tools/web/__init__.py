"""Web tools: an offline website over the wiki corpus, page fetching and web search clients."""
