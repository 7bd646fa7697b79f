"""The names of the linear-layer paths an fp32 model can train on CPU (``onednn``), without
torch: configs name them, and the command line parses them before anything heavy loads."""

from __future__ import annotations

from typing import Literal

LinearPath = Literal["auto", "mkl", "onednn"]
"""``F.linear`` (MKL's sgemm), oneDNN (``onednn.trainable_linear``), or auto: ``onednn.preferred``
's choice on this CPU."""
