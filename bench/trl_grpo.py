"""Our RL step against TRL's `GRPOTrainer` on the same single-turn job, side by side.

The job (no tools): the same tiny random-weight Qwen2 (built once, saved, loaded by both), the
same P prompts every step, G completions per prompt, exactly L new tokens per completion (TRL
with ``min_new_tokens = L``; ours with no stop tag and no end-of-text), temperature 1, one
optimizer update per step over all P·G completions (TRL: per-device batch P·G, one generation
batch per step, one iteration; ours: one mini-batch of P prompts), no KL term (TRL's default
beta 0; our kl_coef 0, so neither loads a reference model), no entropy bonus, the Search-R1
F1 reward in both (F1, not EM, so that random completions get rewards that vary). Ours is
chain GRPO (``--algo.algo chain --algo.m G``): the tree machinery is not used. One difference stays:
TRL skips the old log-prob forward when it makes one update per generation (the ratio is 1),
our step always computes old log-probs in a separate no-grad pass.

Each trainer runs ``--steps`` steps ``--repeats`` times, alternating; the first step of a run
is a warm-up and is not timed. Reported: median seconds per step and steps per second. Goal:
ours at least 1.5× TRL's steps per second on 2 CPU cores.

TRL is not a dependency of the package: ``pip install -e ".[bench]"`` (or ``pip install trl``).

    .venv/bin/python bench/trl_grpo.py          # writes bench/results/trl_grpo.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
warnings.filterwarnings("ignore")

WORDS = ["capital", "river", "mountain", "founded", "born", "city", "country", "band", "school"]


def build_model(out: Path, hidden: int, layers: int) -> None:
    """A tokenizer and a random tiny Qwen2, saved in Hugging Face format."""
    from treegrpo.core.rewards import PROTOCOL_TAGS
    from treegrpo.models.tiny import tiny_qwen2, train_bpe_tokenizer

    texts = [f"Question: what is the {w} of item {i}?" for w in WORDS for i in range(50)]
    tok = train_bpe_tokenizer(texts * 4, vocab_size=512, special_tokens=PROTOCOL_TAGS)
    model = tiny_qwen2(
        len(tok),
        hidden=hidden,
        layers=layers,
        heads=4,
        kv_heads=2,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    model.save_pretrained(out)
    tok.save_pretrained(out)


def prompts_and_golds(p: int) -> tuple[list[str], list[list[str]]]:
    prompts = [f"Question: what is the {WORDS[i % len(WORDS)]} of item {i}?\n" for i in range(p)]
    return prompts, [[f"item {i}"] for i in range(p)]


def run_ours(path: Path, p: int, g: int, length: int, steps: int, lr: float) -> list[float]:
    """Seconds of each step after the first."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from treegrpo.agent.protocol import SearchProtocol
    from treegrpo.agent.stops import StepStopper
    from treegrpo.engine.hf import HFEngine
    from treegrpo.engine.sampling import SamplingParams
    from treegrpo.retrieval.base import Passage
    from treegrpo.retrieval.bm25 import BM25Retriever
    from treegrpo.rollout.sampler import AgentLimits
    from treegrpo.rollout.source import LocalRollout
    from treegrpo.train.config import AlgorithmConfig, OptimConfig
    from treegrpo.train.step import Batch, Learning, Rollouts, StepSettings, rl_step

    policy = AutoModelForCausalLM.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    # No step-end tag and no end-of-text: every completion is exactly `length` tokens, as TRL's.
    engine = HFEngine(policy, tok, StepStopper(tok, tags=("<never-ends>",)), eos_ids=[])
    optimizer = torch.optim.AdamW(policy.parameters(), lr=lr, weight_decay=0.0)
    algo = AlgorithmConfig(algo="chain", m=g, kl_coef=0.0, entropy_coef=0.0, reward="f1")
    optim = OptimConfig(lr=lr, weight_decay=0.0, mini_batch_prompts=p, micro_batch_tokens=65536)
    sampling = SamplingParams(temperature=1.0, max_new_tokens=length)
    limits = AgentLimits(max_turns=0, topk=3, max_context=4096)  # one final step: no search
    tool = BM25Retriever([Passage("0", '"A"\nnever searched')], use_cache=False)
    prompts, golds = prompts_and_golds(p)
    batch = Batch([tok(x)["input_ids"] for x in prompts], golds, [str(i) for i in range(p)])
    protocol = SearchProtocol(tok, 64)
    times = []
    for step in range(steps + 1):
        t0 = time.perf_counter()
        rollouts = Rollouts(LocalRollout(engine, protocol, tool), protocol, sampling, limits)
        learning = Learning(policy, None, optimizer)
        m = rl_step(learning, rollouts, batch, StepSettings(algo, optim), seed=step)
        times.append(time.perf_counter() - t0)
        assert m["spend/generated_per_prompt"] == g * length, m["spend/generated_per_prompt"]
    return times[1:]


def run_trl(path: Path, p: int, g: int, length: int, steps: int, lr: float) -> list[float]:
    """Seconds of each step after the first (generation, reward, loss, update)."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from treegrpo.core.rewards import search_r1_f1_reward

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []
            self._t = 0.0

        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self._t = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.times.append(time.perf_counter() - self._t)

    def reward(completions: list[str], golds: list[list[str]], **kw: Any) -> list[float]:
        return [search_r1_f1_reward(c, gs) for c, gs in zip(completions, golds, strict=True)]

    prompts, golds = prompts_and_golds(p)
    data = Dataset.from_list(
        [{"prompt": x, "golds": y} for x, y in zip(prompts, golds, strict=True)]
    )
    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(
            output_dir=out,
            per_device_train_batch_size=p * g,
            gradient_accumulation_steps=1,
            num_generations=g,
            steps_per_generation=1,
            num_iterations=1,
            max_completion_length=length,
            generation_kwargs={"min_new_tokens": length},
            temperature=1.0,
            top_p=1.0,
            beta=0.0,
            learning_rate=lr,
            lr_scheduler_type="constant",
            weight_decay=0.0,
            max_grad_norm=1.0,
            max_steps=steps + 1,
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            use_cpu=True,
            bf16=False,
            disable_tqdm=True,
            shuffle_dataset=False,
            dataloader_num_workers=0,
            seed=0,
        )
        timer = StepTimer()
        trainer = GRPOTrainer(
            model=AutoModelForCausalLM.from_pretrained(path),
            reward_funcs=reward,
            args=args,
            train_dataset=data,
            processing_class=AutoTokenizer.from_pretrained(path),
            callbacks=[timer],
        )
        trainer.train()
    return timer.times[1:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--length", type=int, default=64, help="completion tokens")
    ap.add_argument("--steps", type=int, default=5, help="timed steps per run (+1 warm-up)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "trl_grpo.json"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    import trl

    job = (a.prompts, a.group, a.length, a.steps, a.lr)
    ours: list[float] = []
    theirs: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        build_model(path, a.hidden, a.layers)
        for r in range(a.repeats):
            ours += run_ours(path, *job)
            theirs += run_trl(path, *job)
            print(
                f"repeat {r}: ours {statistics.median(ours):.3f} s/step, "
                f"TRL {statistics.median(theirs):.3f} s/step",
                flush=True,
            )
    med_ours, med_trl = statistics.median(ours), statistics.median(theirs)
    result = {
        "job": {
            "prompts": a.prompts,
            "group": a.group,
            "completion_tokens": a.length,
            "timed_steps_per_run": a.steps,
            "repeats": a.repeats,
            "hidden": a.hidden,
            "layers": a.layers,
        },
        "machine": f"{platform.machine()}, {torch.get_num_threads()} threads, "
        f"torch {torch.__version__}, trl {trl.__version__}",
        "ours_s_per_step": ours,
        "trl_s_per_step": theirs,
        "median_ours_s": med_ours,
        "median_trl_s": med_trl,
        "speedup": med_trl / med_ours,
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=2))
    print(
        f"| trainer | s/step (median of {len(ours)}) | steps/s |\n|---|---:|---:|\n"
        f"| treegrpo `rl_step` (chain, m={a.group}) | {med_ours:.3f} | {1 / med_ours:.2f} |\n"
        f"| TRL {trl.__version__} `GRPOTrainer` | {med_trl:.3f} | {1 / med_trl:.2f} |\n"
        f"speed-up: {med_trl / med_ours:.2f}×"
    )


if __name__ == "__main__":
    main()
