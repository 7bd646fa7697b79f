"""Rollout engine benchmark: prefix caching vs re-prefill, and our chain steps vs HF `generate`.

Everything is measured side by side in one run, each timing the median of --repeats runs (in B,
one run of every configuration per round, so that drift in the machine's speed hits all alike):

A. token efficiency: positions the model computed (prefill + decode, padding included) ÷
   distinct tokens of the finished forest, tree (2,2,1), cache on vs off (tiny trained agent);
B. tree speed: wall time of tree rollouts (2,2,1), cache on vs re-prefill, on a bigger
   random-weight Qwen2 (its text is noise, so lengths are set by the limits), two workloads:
   "feedback": every step runs to the token limit and gets the short invalid-action feedback;
   "search": every step is treated as a search whose observation is three ~130-word passages
   (cut at 500 tokens, the paper's limit): the shape of a real search agent's context;
   and four more cached runs, each with one engine speed-up off: the linear layers on MKL
   instead of packed oneDNN weights, the model's own forward at decode instead of the
   lean decode step (``engine.cpu.lean``), no sharing of the prompts' common start in
   prefill (``engine.prefix``), and prefill chunks by feed padding alone, blind to context
   padding (``engine.chunks``). Each B row also records the seconds the engine spent in prefill
   and in decode, and the "bound": re-prefill's wall time over the cached run's wall time less
   its prefill, the speed-up a cache whose prefill cost nothing would reach (decode costs the
   same in both modes, so no prefix cache can beat it on that workload);
R. with --real (or --only real): the real preset's rollouts (configs/real-smollm2-wiki.yaml:
   SmolLM2-135M-Instruct after the protocol warm start, its LoRA adapters, BM25 over the 10,033
   Wikipedia leads, 96 new tokens per step, temperature 1.0, top-p 0.95) for 8 held-out
   questions, tree (2,2,1), cache on vs re-prefill, and cached with peft's LoRA modules in
   prefill instead of folded weights (``engine.cpu.lora``); needs the warm start and the corpus
   built once (the first run builds them: about 10 minutes);
C. chain speed: one agent step for a batch of prompts, our engine vs transformers'
   `model.generate` (stop strings on, so both stop on the same tags; `generate` keeps finished
   rows in the batch), and full multi-turn chain rollouts vs a loop of `generate` calls that
   re-feeds the whole context every turn (what Search-R1-style loops do).

    .venv/bin/python bench/rollout.py            # writes bench/results/rollout.json
    .venv/bin/python bench/rollout.py --only real
    .venv/bin/python bench/rollout.py --only feedback --prompts 16   # B on a bigger batch
    python bench/rollout.py --only search --device cuda --b-hidden 2048 --b-layers 24  # a GPU
    bash bench/gpu_check.sh   # on a GPU machine: that, "feedback", and the engine tests on CUDA

B runs 8 questions by default (--prompts: up to 32, each about another name). The batch's size
matters for the ratio: each decode step reads the weights once for all its rows, so a wider
batch makes decoded tokens cheaper, and re-prefill's extra positions weigh more.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the tiny trained agent used by the tests

from agent_fixtures import PEOPLE, WordTool, trained_agent  # noqa: E402
from treegrpo.agent.protocol import Action, SearchProtocol  # noqa: E402
from treegrpo.agent.stops import STEP_END_TAGS, StepStopper  # noqa: E402
from treegrpo.core.budget import TreeShape  # noqa: E402
from treegrpo.engine.hf import HFEngine, StepRequest  # noqa: E402
from treegrpo.engine.sampling import SamplingParams  # noqa: E402
from treegrpo.models.tiny import tiny_qwen2  # noqa: E402
from treegrpo.retrieval.base import Passage  # noqa: E402
from treegrpo.rollout.sampler import AgentLimits, sample_forest  # noqa: E402

warnings.filterwarnings("ignore")

# B's questions: the tiny agent's 8 people, then other names, so that a larger batch holds no
# two equal prompts (equal prompts would share their whole prefill)
NAMES = [
    *PEOPLE,
    "Ines", "Jonas", "Karla", "Lukas", "Mirja", "Nils", "Olga", "Piet", "Quinn", "Rosa", "Sven",
    "Tilda", "Ulla", "Vidar", "Wilma", "Xaver", "Yrsa", "Zeno", "Agnes", "Bruno", "Clara",
    "Dario", "Elsa", "Fritz",
]  # fmt: skip


class AlwaysSearch(SearchProtocol):
    """Every step counts as a search (the benchmark's "search" workload)."""

    def parse(self, action_ids: Any) -> Action:
        return Action("search", "benchmark query")


class LongPassages:
    """Three fixed ~130-word passages for any query."""

    def __init__(self) -> None:
        words = [
            "river",
            "city",
            "museum",
            "author",
            "election",
            "album",
            "bridge",
            "winter",
            "science",
            "painter",
        ]
        self.hits = [
            Passage(
                str(i), f'"Title {i}"\n' + " ".join(words[(i + j) % len(words)] for j in range(130))
            )
            for i in range(3)
        ]

    def search(self, queries: list[str], topk: int = 3) -> list[list[Passage]]:
        return [self.hits[:topk] for _ in queries]


def median_time(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def tree_run(
    model: Any,
    agent: Any,
    reuse: bool,
    prompts: list[list[int]],
    sampling: SamplingParams,
    limits: AgentLimits,
    search: bool = False,
    packed: bool | None = None,
    lean: bool | None = None,
    share: bool = True,
    context_chunks: bool = True,
) -> Any:
    eng = HFEngine(
        model,
        agent.tokenizer,
        StepStopper(agent.tokenizer),
        reuse_cache=reuse,
        packed_linear=packed,
        lean_decode=lean,
        min_shared_prefix=16 if share else 0,
    )
    if not context_chunks:  # chunk prefill rows by feed padding alone (context padding free)
        eng._att_per_token = 0.0
    proto = AlwaysSearch(agent.tokenizer, max_obs_tokens=500) if search else agent.protocol
    tool = LongPassages() if search else WordTool()
    return timed_forest(eng, proto, tool, prompts, sampling, limits)


def timed_forest(
    eng: HFEngine,
    proto: Any,
    tool: Any,
    prompts: list[list[int]],
    sampling: SamplingParams,
    limits: AgentLimits,
) -> tuple[Any, dict[str, float]]:
    """A tree (2,2,1) forest, and the seconds the engine spent in prefill and in decode."""
    phases = {"prefill_s": 0.0, "decode_s": 0.0}

    def clocked(fn: Callable[..., Any], key: str) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args)
            finally:
                phases[key] += time.perf_counter() - t

        return run

    # instance attributes shadow the methods, so every internal call is clocked
    eng._prefill = clocked(eng._prefill, "prefill_s")
    eng._decode = clocked(eng._decode, "decode_s")
    ro = sample_forest(eng, proto, tool, prompts, TreeShape(2, 2, 1), sampling, limits, seed=0)
    return ro, phases


def generate_step(model: Any, tok: Any, prompts: list[list[int]], sampling: SamplingParams) -> int:
    """One batched `generate` call with left padding; returns tokens produced (pads excluded)."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), tok.pad_token_id)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p)
        mask[i, width - len(p) :] = 1
    out = model.generate(
        input_ids=ids,
        attention_mask=mask,
        do_sample=True,
        top_k=0,
        top_p=1.0,
        temperature=1.0,
        max_new_tokens=sampling.max_new_tokens,
        stop_strings=list(STEP_END_TAGS),
        tokenizer=tok,
        pad_token_id=tok.pad_token_id,
    )
    new = out[:, width:]
    return int((new != tok.pad_token_id).sum())


def generate_chains(
    model: Any, agent: Any, prompts: list[list[int]], sampling: SamplingParams, limits: AgentLimits
) -> int:
    """Multi-turn chains with `generate`, re-feeding the whole context each turn."""
    tok, proto, tool = agent.tokenizer, agent.protocol, WordTool()
    contexts = [list(p) for p in prompts]
    active = list(range(len(prompts)))
    produced = 0
    for turn in range(limits.max_turns + 1):
        if not active:
            break
        width = max(len(contexts[i]) for i in active)
        ids = torch.full((len(active), width), tok.pad_token_id)
        mask = torch.zeros_like(ids)
        for r, i in enumerate(active):
            ids[r, width - len(contexts[i]) :] = torch.tensor(contexts[i])
            mask[r, width - len(contexts[i]) :] = 1
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            do_sample=True,
            top_k=0,
            top_p=1.0,
            max_new_tokens=sampling.max_new_tokens,
            stop_strings=list(STEP_END_TAGS),
            tokenizer=tok,
            pad_token_id=tok.pad_token_id,
        )
        nxt = []
        for r, i in enumerate(active):
            step = [t for t in out[r, width:].tolist() if t != tok.pad_token_id]
            produced += len(step)
            action = proto.parse(step)
            if action.kind == "answer" or turn == limits.max_turns:
                continue
            obs = (
                proto.observation_ids([p.contents for p in tool.search([action.text])[0]])
                if action.kind == "search"
                else proto.invalid_ids()
            )
            contexts[i] += step + obs
            if len(contexts[i]) + sampling.max_new_tokens < limits.max_context:
                nxt.append(i)
        active = nxt
    return produced


def real_workload(repeats: int, paper_limits: bool = False) -> dict[str, Any]:
    """R: the real preset's rollouts, cached vs re-prefill (interleaved, medians)."""
    from treegrpo.agent.prompt import render_prompt
    from treegrpo.data.wiki import wiki_questions
    from treegrpo.jobs.data import evenly_spaced, make_tool, resolve_model
    from treegrpo.jobs.presets import TRAIN_SECTIONS
    from treegrpo.models.load import load_model
    from treegrpo.train.policy import prepare_policy
    from treegrpo.train.yaml_config import load_config

    cfg = load_config(ROOT / "configs" / "real-smollm2-wiki.yaml", TRAIN_SECTIONS)
    data = cfg["data"]
    model, tok = load_model(resolve_model(data.model))
    policy = prepare_policy(model, cfg["model"], seed=0).eval()  # LoRA adapters, as in training
    tool = make_tool(data)
    questions = evenly_spaced(wiki_questions("test"), 8)
    prompts = [render_prompt(tok, q.question) for q in questions]
    # the preset's CPU-sized limits, or the paper's for observations and context (steps stay 96)
    obs_tokens, context = (500, 4096) if paper_limits else (data.max_obs_tokens, data.max_context)
    proto = SearchProtocol(tok, max_obs_tokens=obs_tokens)
    sampling = SamplingParams(
        temperature=data.temperature, top_p=data.top_p, max_new_tokens=data.max_new_tokens
    )
    limits = AgentLimits(data.max_turns, data.topk, context)
    out: dict[str, Any] = {"R_limits": {"max_obs_tokens": obs_tokens, "max_context": context}}
    # (reuse_cache, fold_lora, name); the last: cached, but peft's LoRA modules in prefill
    runs = [(True, None, "cache"), (False, None, "reprefill"), (True, False, "cache_lora_modules")]
    times: dict[str, list[float]] = {name: [] for *_, name in runs}
    phases: dict[str, list[dict[str, float]]] = {name: [] for *_, name in runs}
    forests: dict[str, Any] = {}
    # one untimed cached run first, which pays the one-time work (packing and folding weights,
    # the allocator's first growth); on the AVX-512 AMD EPYC, without it and with the test
    # suite running beside it, the first round's cached run took 3.5x the others
    warm = HFEngine(policy, tok, StepStopper(tok))
    timed_forest(warm, proto, tool, prompts, sampling, limits)
    for _ in range(repeats):
        for reuse, fold, name in runs:
            eng = HFEngine(policy, tok, StepStopper(tok), reuse_cache=reuse, fold_lora=fold)
            t0 = time.perf_counter()
            forests[name], ph = timed_forest(eng, proto, tool, prompts, sampling, limits)
            times[name].append(time.perf_counter() - t0)
            phases[name].append(ph)
    for *_, name in runs:
        spend = forests[name].spend.total()
        out[f"R_real_tree_{name}"] = {
            "seconds": statistics.median(times[name]),
            "runs": times[name],
            "phases": phases[name],
            "processed": spend.processed,
            "distinct": forests[name].distinct_tokens(),
            "generated": spend.generated,
            "tool_calls": spend.tool_calls,
            "leaves": spend.leaves,
        }
    return out


def speedup_row(label: str, on: dict[str, Any], off: dict[str, Any]) -> str:
    """A table row: cached and re-prefill wall s, their ratio, and the bound (re-prefill over
    the cached run without its prefill time, medians over the runs)."""
    prefill = statistics.median(p["prefill_s"] for p in on["phases"])
    bound = off["seconds"] / (on["seconds"] - prefill)
    return (
        f"| {label} | {on['seconds']:.2f} | {off['seconds']:.2f} | "
        f"{off['seconds'] / on['seconds']:.2f}× faster (bound {bound:.2f}×) |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "rollout.json"))
    ap.add_argument(
        "--only",
        choices=["feedback", "search", "real"],
        help="time only this B workload (or R), cached vs re-prefill (no A, C or one-speed-up-off "
        "rows)",
    )
    ap.add_argument("--real", action="store_true", help="also run R (the real preset's rollouts)")
    ap.add_argument(
        "--real-paper-limits",
        action="store_true",
        help="R with the paper's 500-token observations and 4,096-token context (the preset: 256 "
        "and 2,048)",
    )
    ap.add_argument(
        "--prompts",
        type=int,
        default=8,
        help=f"questions per B rollout batch, each about another name (at most {len(NAMES)}; "
        "A and C keep the tiny agent's 8)",
    )
    ap.add_argument(
        "--device",
        default="cpu",
        help="where B's model runs (cuda: only with --only feedback or search; A, C and R stay "
        "where they are)",
    )
    ap.add_argument("--b-hidden", type=int, default=512, help="B's model width (heads of 64)")
    ap.add_argument("--b-layers", type=int, default=8, help="B's model depth")
    args = ap.parse_args()
    if args.device != "cpu" and args.only not in ("feedback", "search"):
        ap.error("--device other than cpu needs --only feedback or --only search")
    if not 1 <= args.prompts <= len(NAMES):
        ap.error(f"--prompts must be between 1 and {len(NAMES)}, got {args.prompts}")
    torch.set_num_threads(args.threads)
    agent = trained_agent()
    prompts = [agent.prompt(p) for p in PEOPLE]  # 8 prompts
    limits = AgentLimits(max_turns=3, topk=3, max_context=2048)
    res: dict[str, Any] = {
        "machine": f"{platform.processor() or platform.machine()}, "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}",
        "B_device": torch.cuda.get_device_name(args.device)
        if args.device.startswith("cuda")
        else args.device,
        "B_shape": {"hidden": args.b_hidden, "layers": args.b_layers},
    }

    # A. token efficiency, tiny trained agent (after one untimed run: A comes first in the
    # process, and earlier A timings read 50% above an ad-hoc A/B's)
    sampling = SamplingParams(max_new_tokens=48)
    if not args.only:
        tree_run(agent.model, agent, True, prompts, sampling, limits)
    for reuse in () if args.only else (True, False):
        t, (ro, _) = median_time(
            lambda r=reuse: tree_run(agent.model, agent, r, prompts, sampling, limits), args.repeats
        )
        spend = ro.spend.total()
        res[f"A_tiny_tree_{'cache' if reuse else 'reprefill'}"] = {
            "seconds": t,
            "processed": spend.processed,
            "distinct": ro.distinct_tokens(),
            "ratio": spend.processed / ro.distinct_tokens(),
            "generated": spend.generated,
            "leaves": spend.leaves,
            "tool_calls": spend.tool_calls,
        }

    # B. tree speed on a bigger random-weight model (steps run to the token limit)
    prompts_b = [agent.prompt(name) for name in NAMES[: args.prompts]]
    res["B_prompts"] = args.prompts
    heads = max(1, args.b_hidden // 64)
    big = None  # built only when a B workload runs
    if args.only != "real":
        big = tiny_qwen2(
            len(agent.tokenizer),
            hidden=args.b_hidden,
            layers=args.b_layers,
            heads=heads,
            kv_heads=max(1, heads // 2),
            seed=0,
        ).to(args.device)
    n_params = 0 if big is None else sum(p.numel() for p in big.parameters())
    for workload, sampling_b, search in (
        ("feedback", SamplingParams(max_new_tokens=96), False),
        ("search", SamplingParams(max_new_tokens=64), True),
    ):
        if args.only not in (None, workload):
            continue
        limits_b = AgentLimits(max_turns=3, topk=3, max_context=4096)
        # (reuse, packed, lean, share, context chunks, name): cached and re-prefill, then cached
        # with one speed-up off: MKL linear layers; the model's forward at decode; no
        # prompt-start sharing (neither in prefill nor in decode attention); chunks by feed only
        runs = [
            (True, None, None, True, True, "cache"),
            (False, None, None, True, True, "reprefill"),
        ]
        if not args.only:
            runs += [
                (True, False, None, True, True, "cache_mkl"),
                (True, None, False, True, True, "cache_model_forward"),
                (True, None, None, False, True, "cache_no_sharing"),
                (True, None, None, True, False, "cache_feed_chunks"),
            ]
        # interleaved (one run of each configuration per round), so that a machine whose speed
        # drifts during the benchmark slows every configuration alike
        times: dict[str, list[float]] = {name: [] for *_, name in runs}
        phases: dict[str, list[dict[str, float]]] = {name: [] for *_, name in runs}
        outs: dict[str, Any] = {}
        # one untimed cached run first, as R has: the first run in a process pays one-time work
        # (packing weights, the allocator's growth): without it, the first timed cached
        # "feedback" run took about 40% longer than the repeats after it (42.9 s against 31 s)
        tree_run(big, agent, True, prompts_b, sampling_b, limits_b, search)
        for _ in range(args.repeats):
            for reuse, pk, lean, share, ctx, name in runs:
                t0 = time.perf_counter()
                outs[name], ph = tree_run(
                    big, agent, reuse, prompts_b, sampling_b, limits_b, search, pk, lean, share, ctx
                )
                times[name].append(time.perf_counter() - t0)
                phases[name].append(ph)
        for *_, name in runs:
            t, ro = statistics.median(times[name]), outs[name]
            spend = ro.spend.total()
            res[f"B_{workload}_tree_{name}"] = {
                "seconds": t,
                "runs": times[name],
                "phases": phases[name],
                "processed": spend.processed,
                "distinct": ro.distinct_tokens(),
                "ratio": spend.processed / ro.distinct_tokens(),
                "generated": spend.generated,
                "tool_calls": spend.tool_calls,
                "params": n_params,
            }

    # R. the real preset's rollouts (SmolLM2 + LoRA, BM25 over Wikipedia)
    if args.real or args.only == "real":
        res.update(real_workload(args.repeats, args.real_paper_limits))

    # C. chain speed vs HF generate, 32 prompts (the 8 questions × 4)
    batch = prompts * 4
    for name, model in () if args.only else (("tiny_agent", agent.model), ("big_random", big)):
        sp = SamplingParams(max_new_tokens=64)
        eng = HFEngine(model, agent.tokenizer, StepStopper(agent.tokenizer))
        gen = torch.Generator().manual_seed(0)
        t_ours, out = median_time(
            lambda e=eng, g=gen, s=sp: e.step([StepRequest(e.root(), p) for p in batch], s, g),
            args.repeats,
        )
        t_hf, hf_tokens = median_time(
            lambda m=model, s=sp: generate_step(m, agent.tokenizer, batch, s), args.repeats
        )
        res[f"C_step_{name}"] = {
            "ours_s": t_ours,
            "generate_s": t_hf,
            "ours_tokens": sum(len(r.tokens) for r in out),
            "generate_tokens": hf_tokens,
        }
        t_ours, ro = median_time(
            lambda m=model, s=sp: sample_forest(
                HFEngine(m, agent.tokenizer, StepStopper(agent.tokenizer)),
                agent.protocol,
                WordTool(),
                batch,
                TreeShape(1),
                s,
                limits,
                seed=0,
            ),
            args.repeats,
        )
        t_hf, hf_tokens = median_time(
            lambda m=model, s=sp: generate_chains(m, agent, batch, s, limits), args.repeats
        )
        res[f"C_chains_{name}"] = {
            "ours_s": t_ours,
            "generate_s": t_hf,
            "ours_tokens": ro.spend.total().generated,
            "generate_tokens": hf_tokens,
        }

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))
    print(
        f"\n| tree (2,2,1), B: {args.prompts} prompts | cache s | re-prefill s | speed-up |"
        "\n|---|---|---|---|"
    )
    for key in ("B_feedback", "B_search", "R_real"):
        if f"{key}_tree_cache" in res:
            on, off = res[f"{key}_tree_cache"], res[f"{key}_tree_reprefill"]
            print(speedup_row(key, on, off))
    if "R_real_tree_cache_lora_modules" in res:
        on, mod = res["R_real_tree_cache"], res["R_real_tree_cache_lora_modules"]
        pre = [statistics.median(p["prefill_s"] for p in r["phases"]) for r in (mod, on)]
        print(
            f"| R cached, prefill s: peft's LoRA modules vs folded | {pre[0]:.2f} | {pre[1]:.2f} "
            f"| {pre[0] / pre[1]:.2f}× (wall {mod['seconds'] / on['seconds']:.2f}×) |"
        )
    if args.only:
        return
    a_on, a_off = res["A_tiny_tree_cache"], res["A_tiny_tree_reprefill"]
    print("\n| measure | cache | re-prefill | ratio |\n|---|---|---|---|")
    print(
        f"| A tiny agent (2,2,1): processed ÷ distinct | {a_on['ratio']:.3f} | "
        f"{a_off['ratio']:.3f} | {a_off['ratio'] / a_on['ratio']:.2f}× |"
    )
    for workload in ("feedback", "search"):
        b_on, b_off = res[f"B_{workload}_tree_cache"], res[f"B_{workload}_tree_reprefill"]
        print(speedup_row(f"B {n_params / 1e6:.1f}M random, {workload}: wall s", b_on, b_off))
        print(
            f"| B {workload}: processed ÷ distinct | {b_on['ratio']:.3f} | {b_off['ratio']:.3f} | |"
        )
        mkl = res[f"B_{workload}_tree_cache_mkl"]["seconds"]
        print(
            f"| B {workload}: cached wall s, MKL linear vs packed | {mkl:.2f} | "
            f"{b_on['seconds']:.2f} | {mkl / b_on['seconds']:.2f}× faster packed |"
        )
        fwd = res[f"B_{workload}_tree_cache_model_forward"]["seconds"]
        print(
            f"| B {workload}: cached wall s, model forward vs lean decode | {fwd:.2f} | "
            f"{b_on['seconds']:.2f} | {fwd / b_on['seconds']:.2f}× faster lean |"
        )
        alone = res[f"B_{workload}_tree_cache_no_sharing"]["seconds"]
        print(
            f"| B {workload}: cached wall s, prompt start not shared vs shared | {alone:.2f} | "
            f"{b_on['seconds']:.2f} | {alone / b_on['seconds']:.2f}× faster shared |"
        )
        feed = res[f"B_{workload}_tree_cache_feed_chunks"]
        print(
            f"| B {workload}: cached prefill s, chunks by feed vs feed and context | "
            f"{statistics.median(p['prefill_s'] for p in feed['phases']):.2f} | "
            f"{statistics.median(p['prefill_s'] for p in b_on['phases']):.2f} | |"
        )
    print("\n| chain job (32 prompts) | ours s | generate s | speed-up |\n|---|---|---|---|")
    for key in (
        "C_step_tiny_agent",
        "C_chains_tiny_agent",
        "C_step_big_random",
        "C_chains_big_random",
    ):
        r = res[key]
        print(
            f"| {key[2:]} | {r['ours_s']:.2f} | {r['generate_s']:.2f} | "
            f"{r['generate_s'] / r['ours_s']:.2f}× |"
        )


if __name__ == "__main__":
    main()
