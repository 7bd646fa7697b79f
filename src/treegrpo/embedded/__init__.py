"""The CPU default job's search world: a generated multi-hop world (``names``, ``relations``,
``synthetic``), its scripted agents (``oracle``: the episode loop; ``demos``: flawed agents and
their demonstrations), the tokenizer holding every name as one token (``search_tokenizer``) and
the tiny model's copying circuits (``induction``). No training: ``warmstart.tiny`` fits it."""
