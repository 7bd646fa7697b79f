"""The embedded search world of the CPU default job: a generated multi-hop world (``names``,
``relations``, ``synthetic``: people, facts, one passage per fact, questions of 1-4 hops), the
scripted agents that play it (``oracle``: the episode loop; ``demos``: agents with decision
flaws, the oracle being the one without, and their demonstrations), the tokenizer that holds
every name as one token (``search_tokenizer``) and the hand-built copying circuits of its tiny
model (``induction``). No training here: the warm start that fits the tiny model to the
demonstrations is ``treegrpo.warmstart.tiny``."""
