"""Token sampling from logits: greedy, temperature, top-k and top-p (nucleus), with the random
numbers drawn from a ``torch.Generator`` or from per-request streams (``stream_uniforms``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch


@dataclass(frozen=True)
class SamplingParams:
    """How the next token is chosen. ``greedy`` ignores the other fields."""

    temperature: float = 1.0  # softmax temperature (the paper samples at 1.0)
    top_p: float = 1.0  # keep the smallest set of tokens whose probability reaches top_p
    top_k: int = 0  # keep the k most likely tokens (0 = all)
    greedy: bool = False  # argmax decoding, as in evaluation
    max_new_tokens: int = 500  # tokens per agent step (500 in the paper's runs)

    def __post_init__(self) -> None:
        if not self.greedy and self.temperature <= 0:
            raise ValueError("temperature must be > 0 (use greedy=True for argmax decoding)")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0 or self.max_new_tokens < 1:
            raise ValueError("top_k must be >= 0 and max_new_tokens >= 1")

    @property
    def logprob_temperature(self) -> float:
        """The temperature of the distribution tokens are drawn from (1 when greedy): log-probs
        in the engines and the trainer are taken under it (``policy_logprobs``)."""
        return 1.0 if self.greedy else self.temperature


def policy_logprobs(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log softmax(logits / T) over the last axis in float32, as verl takes them: the one definition
    of the log-probs of the distribution sampled at temperature T (docs/algorithm.md §4), for every
    engine and the trainer; top-k and top-p truncation are not part of it. (..., V) → (..., V)."""
    logits = logits.float()
    if temperature != 1.0:
        logits = logits / temperature
    return torch.log_softmax(logits, dim=-1)


def stream_uniforms(seeds: Sequence[int], counters: Sequence[int]) -> npt.NDArray[np.float64]:
    """u ∈ [0, 1) for draw ``counters[i]`` of stream ``seeds[i]``: the SplitMix64 output function
    (Steele, Lea & Flood 2014) of seed·φ64 + counter, top 53 bits, so a request samples the same
    tokens in any batch, on any worker. (B,) → (B,)."""
    with np.errstate(over="ignore"):  # uint64 arithmetic wraps, as SplitMix64 intends
        x = np.asarray(seeds, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        x = x + np.asarray(counters, dtype=np.uint64)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) * 2.0**-53


def sample(
    logits: torch.Tensor,
    params: SamplingParams,
    generator: torch.Generator | None,
    uniforms: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Choose one token per row. logits: (B, V); uniforms: (B,) in [0, 1) (``stream_uniforms``), or
    None to draw from ``generator``. Returns tokens (B,) and their ``policy_logprobs`` at the
    sampling temperature, before truncation (B,)."""
    logits = logits.float()
    logp = policy_logprobs(logits, params.logprob_temperature)  # (B, V)
    if params.greedy:
        tokens = logits.argmax(dim=-1)
    else:
        scores = logits / params.temperature
        if params.top_k > 0 and params.top_k < scores.shape[-1]:
            kth = torch.topk(scores, params.top_k, dim=-1).values[:, -1:]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        if params.top_p < 1.0:
            scores = nucleus(scores, params.top_p)
        tokens = _inverse_cdf(torch.softmax(scores, dim=-1), generator, uniforms)
    return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)


# Candidates among which the nucleus is looked for first (see ``nucleus``).
NUCLEUS_K = 1024


def nucleus(scores: torch.Tensor, top_p: float, k: int = NUCLEUS_K) -> torch.Tensor:
    """Top-p truncation (Holtzman et al. 2020): drop a token (-inf) when the mass of the tokens
    before it in descending order already reaches top_p (the best always stays). scores: (B, V) →
    (B, V). Looks among each row's k best first, sorting in full only where those fall short: the
    same kept set as sorting every row (docs/library.md, "The engine")."""
    k = min(k, scores.shape[-1])
    lse = torch.logsumexp(scores, dim=-1, keepdim=True)  # (B, 1)
    top, order = torch.topk(scores, k, dim=-1)  # (B, k), descending
    probs = (top - lse).exp()
    if not bool((probs.sum(dim=-1) >= top_p).all()):  # a row's nucleus goes past its k best
        top, order = torch.sort(scores, dim=-1, descending=True)  # (B, V)
        probs = (top - lse).exp()
    kept = top.masked_fill(probs.cumsum(dim=-1) - probs >= top_p, float("-inf"))
    return torch.full_like(scores, float("-inf")).scatter(-1, order, kept)


def _inverse_cdf(
    probs: torch.Tensor, generator: torch.Generator | None, uniforms: torch.Tensor | None
) -> torch.Tensor:
    """One draw per row of ``probs`` (B, V) → (B,): the first index whose cumulative probability
    exceeds u · (row total), u ~ U(0, 1), so token i comes with probability p_i / Σp and a token
    of probability 0 never; ``torch.multinomial``'s distribution, faster on CPU
    (docs/library.md, "The engine")."""
    cdf = probs.cumsum(dim=-1)  # (B, V)
    if uniforms is None:
        uniforms = torch.rand(probs.shape[0], generator=generator, device=probs.device)
    u = uniforms.to(cdf.device, cdf.dtype).reshape(-1, 1) * cdf[:, -1:]  # (B, 1)
    tokens = torch.searchsorted(cdf, u, right=True).squeeze(-1)  # (B,)
    return tokens.clamp_(max=probs.shape[-1] - 1)
