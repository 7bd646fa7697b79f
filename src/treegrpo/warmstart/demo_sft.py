"""SFT on demonstrations, the steps every warm start shares: the tiny agent's
(``warmstart.tiny``) and the LoRA warm starts of pretrained models (``warmstart.protocol`` and
those built on it, ``warmstart.reader`` and ``warmstart.web``).

``pooled_demos`` pools a warm start's demonstrations over their categories; ``fit_demos``
trains on each demonstration's token ids and loss mask (``embedded.demos.Demo``) with the SFT
settings a warm start's configuration holds, so the settings mean the same in every warm start
(the warm-up, for one, never outlasts the updates).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from treegrpo.embedded.demos import Demo
from treegrpo.train.sft import SFTExample, SFTSettings, train_sft

log = logging.getLogger(__name__)


def fit_demos(
    model: Any,
    demos: Sequence[Demo],
    cfg: SFTSettings,
    pad_id: int,
    progress: bool = True,
    **options: Any,
) -> list[float]:
    """``train_sft`` of ``model`` on ``demos`` (their ``ids`` and ``mask``) with ``cfg``'s SFT
    settings; ``options``: ``train_sft``'s other arguments. Returns each update's loss."""
    examples = [SFTExample(d.ids, d.mask) for d in demos]
    return train_sft(model, examples, cfg, pad_id, progress, **options)


def pooled_demos(
    kind: str, cfg: Any, demos: Mapping[str, Sequence[Demo]]
) -> tuple[list[Demo], dict[str, Any]]:
    """Every demonstration of ``demos`` (category → its demonstrations) in category order, to
    tune on, and what ``warmstart.protocol.STATS_FILE`` says first: ``{kind: asdict(cfg)}`` (the
    warm start's settings, a dataclass) and the count per ``categories``; raises ``ValueError``
    naming the ``kind`` of warm start ("reader", "web") when there is none."""
    every = [d for ds in demos.values() for d in ds]
    if not every:
        raise ValueError(f"{kind} warm start: no question gave a demonstration")
    log.info("%s warm start: LoRA SFT on %d demonstrations", kind, len(every))
    return every, {kind: asdict(cfg), "categories": {c: len(ds) for c, ds in demos.items()}}
