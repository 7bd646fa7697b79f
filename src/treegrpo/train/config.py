"""Configuration of the RL step: what is optimized (algorithm), how (optimizer), the run, the model
being trained, the cluster and the run's health.

Frozen dataclasses whose attribute docstrings are the help text; defaults follow the paper
(docs/algorithm.md §4); each checks its fields when built (docs/configuration.md, "Checked values").
"""

from __future__ import annotations

import contextlib
import re
import types
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from treegrpo.core.advantage import Mode
from treegrpo.core.budget import TreeShape
from treegrpo.core.expansion import Budget as ExpansionBudget
from treegrpo.core.expansion import Expansion
from treegrpo.core.expansion import Rule as ExpansionRule

Aggregation = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum"]
KLEstimator = Literal["k1", "k2", "k3"]
Correction = Literal["none", "tis", "mis"]  # sampler–trainer importance weights (train.offpolicy)
Level = Literal["token", "sequence"]

DEVICE = re.compile(r"auto|cpu|mps|(cuda|xpu)(:\d+)?")
"""The devices ``model.device`` takes (``models.load.resolve_device`` hands them to torch)."""


class ConfigValueError(ValueError):
    """A config field holds a value it cannot take. ``field`` is its name in the dataclass
    (``m``), so the command line can name the flag (``--algo.m``) and a config file the key."""

    def __init__(self, field: str, problem: str, value: Any) -> None:
        super().__init__(f"{field} {problem} (got {value!r})")
        self.field = field
        self.problem = problem
        self.value = value


_CHECKING: ContextVar[bool] = ContextVar("treegrpo_config_checks", default=True)


@contextlib.contextmanager
def checks_deferred() -> Iterator[None]:
    """Config objects built inside skip their checks; call ``check()`` on each afterwards. The
    command line parses its flags this way: its parser (tyro) would fold a failed check into a
    box of its own that does not name the flag, where ``treegrpo train`` answers in one line,
    ``--algo.m: must be >= 1 (got 0)``."""
    token = _CHECKING.set(False)
    try:
        yield
    finally:
        _CHECKING.reset(token)


class Checked:
    """Base of the config dataclasses: building one (or ``dataclasses.replace``) runs ``check``,
    so a bad value stops where it is given, not steps later inside the trainer or ``core``."""

    def __post_init__(self) -> None:
        if _CHECKING.get():
            self.check()

    def check(self) -> None:
        """Raise ConfigValueError for the first field whose value this config cannot take: a
        choice outside its ``Literal`` type, then the class's own rules (``_check``)."""
        for name, choices in _choices(type(self)).items():
            value = getattr(self, name)
            if value not in choices:
                shown = ", ".join("null" if c is None else str(c) for c in choices)
                raise ConfigValueError(name, f"must be one of {shown}", value)
        self._check()

    def _check(self) -> None:
        """Ranges and fields that depend on each other (none here)."""


def check_ranges(cfg: Any, **rules: str) -> None:
    """Raise ConfigValueError for the first field of ``cfg`` outside its rule: ``">= 1"``,
    ``"> 0"``, or an interval ``"in [0, 1)"``. None passes (an optional field left off); a tuple
    passes when every item does. NaN fails every rule."""
    for name, rule in rules.items():
        value = getattr(cfg, name)
        items = value if isinstance(value, tuple) else (value,)
        if not all(v is None or _holds(v, rule) for v in items):
            each = "each " if isinstance(value, tuple) else ""
            raise ConfigValueError(name, f"must {each}be {rule}", value)


def _holds(v: float, rule: str) -> bool:
    op, _, bound = rule.partition(" ")
    if op == ">=":
        return v >= float(bound)
    if op == ">":
        return v > float(bound)
    low, high = (float(b) for b in bound[1:-1].split(", "))  # "in [0, 1)" -> 0, 1
    above = low <= v if bound[0] == "[" else low < v
    below = v <= high if bound[-1] == "]" else v < high
    return above and below


_CHOICES: dict[type, dict[str, tuple[Any, ...]]] = {}


def _choices(cls: type) -> dict[str, tuple[Any, ...]]:
    """The fields of ``cls`` typed ``Literal[...]`` (or ``Literal[...] | None``): their values."""
    if cls not in _CHOICES:
        out = {}
        for name, tp in get_type_hints(cls).items():
            members = get_args(tp) if get_origin(tp) in (Union, types.UnionType) else (tp,)
            literals = [m for m in members if get_origin(m) is Literal]
            if literals:
                none = (None,) if type(None) in members else ()
                out[name] = tuple(v for m in literals for v in get_args(m)) + none
        _CHOICES[cls] = out
    return _CHOICES[cls]


@dataclass(frozen=True)
class AlgorithmConfig(Checked):
    """Sampling shape, credit assignment and policy loss."""

    algo: Literal["tree", "chain"] = "tree"
    """tree: Tree-GRPO (tree sampler, intra+inter advantage); chain: GRPO on m chains."""
    m: int = 2
    """Trees (tree) or chains (chain) per prompt."""
    n: int = 2
    """Expansions per tree per round (tree only)."""
    l: int = 1  # noqa: E741
    """Expansion rounds (tree only)."""
    k: int | None = None
    """Leaves kept per tree (None: all 1 + n·l)."""
    expansion: ExpansionRule = "uniform"
    """Where trees branch (docs/expansion.md): uniform (the paper's), no-root, entropy, informed."""
    expansion_tokens: int = 8
    """entropy: first tokens of the step after a node whose mean −log p scores the node."""
    expansion_temperature: float = 1.0
    """entropy: softmax temperature over those scores (small: the most uncertain node)."""
    expansion_repeat_penalty: float = 0.5
    """entropy: weight factor per earlier expansion of a node and under a high-entropy pick."""
    expansion_threshold: float = 0.5
    """informed, difficulty budget: a leaf whose reward is at least this counts as a success."""
    expansion_bonus: float = 0.25
    """informed: exploration bonus c of c/√(1 + scored leaves below the node)."""
    expansion_prior: float = 2.0
    """informed, difficulty budget: strength, in leaves, of the prior at the success rate."""
    expansion_budget: ExpansionBudget = "per-tree"
    """per-tree: n per tree and round (the paper's); difficulty: trees·n go to uncertain trees."""
    expansion_budget_floor: int = 0
    """difficulty budget: expansions per tree and round, at least (at most n)."""
    expansion_budget_cap: int | None = None
    """difficulty budget: expansions per tree and round, at most (None: 4·n; at least n)."""
    advantage_mode: Mode | None = None
    """None: "intra+inter" for tree, "inter" for chain."""
    scale_std: bool = True
    """Divide by the group's standard deviation (False: Dr. GRPO)."""
    batch_baseline: float = 0.0
    """Weight w of a batch-relative term added to every leaf's advantage, w·(R − mean_B R) /
    std_B R over the whole batch (REINFORCE++'s global baseline, arXiv 2501.03262;
    docs/algorithm.md §9). 0: off, the paper's advantages."""
    demo_coef: float = 0.0
    """Weight γ of a demonstration term added to every optimizer step's loss: γ × the mean
    NLL per action token of ``demo_batch`` demonstrations drawn for the step (PPO-ptx, Ouyang
    et al. 2022, eq. 2; docs/algorithm.md §9). Needs ``TrainTask.demos``. 0: off."""
    demo_batch: int = 8
    """Demonstrations per optimizer step of the demonstration term."""
    reward: Literal["em", "f1"] = "em"
    """Search-R1 reward with format score, on exact match or on F1."""
    format_score: float = 0.2
    """Search-R1's format bonus: a wrong answer in valid format earns this, in invalid format
    half of it (0: the reward is the answer's score alone)."""
    clip_eps: float = 0.2
    """PPO clip range ε."""
    dual_clip: float | None = 3.0
    """Dual-clip bound c for negative advantages (None: off)."""
    kl_coef: float = 0.001
    """Weight of the KL-to-reference loss term (0: no reference model is loaded)."""
    kl_estimator: KLEstimator = "k3"
    """KL estimator: k1, k2 or k3 (low variance, the authors' choice)."""
    entropy_coef: float = 0.001
    """Weight of the entropy bonus."""
    aggregation: Aggregation = "token-mean"
    """How per-token losses are reduced."""
    skip_uniform_prompts: bool = False
    """Leave out of the update the prompts whose leaves all have zero advantage (all rewarded
    alike): they carry only the KL and entropy terms, and the update's compute goes to the
    prompts that teach something. DAPO's dynamic-sampling filter (Yu et al. 2025), without
    re-sampling; token means then run over the kept prompts' tokens."""
    format_gate: bool = False
    """A leaf whose path holds a broken turn, a step that is not one well-formed
    think-then-action block (``core.rewards.is_well_formed_step``), scores as a wrong answer in
    invalid format, whatever it answered (docs/algorithm.md, "Learning that does not collapse")."""
    void_turn_filter: bool = False
    """Leave out of the update the leaves whose path holds a void turn, a step with neither a
    tool call nor an answer (SimpleTIR, Xue et al. 2025, arXiv 2509.02479); their group's
    advantages are computed with them."""
    sampler_correction: Correction = "none"
    """Importance-sampling correction for the gap between the engine's log-probs of the
    sampled tokens and the trainer's (``train.offpolicy``): none; tis (truncated, min(ρ, C));
    mis (masked, ρ·1[ρ ≤ C])."""
    sampler_correction_level: Level = "token"
    """token: one ratio per token; sequence: one per leaf, the product of its tokens' ratios
    (trains each path whole: not packed by shared_prefix)."""
    sampler_correction_cap: float = 2.0
    """C of tis and mis; the gap metric ``offpolicy/over_cap`` counts tokens with ρ outside
    [1/C, C]."""
    shared_prefix: bool = True
    """Train each prompt's kept paths packed once (``train.shared``): a step shared by k leaves
    is computed once, not k times, with loss weights that give the same update; needs a model
    whose attention takes a custom mask (eager or sdpa; others train each path whole, with a
    warning)."""

    def _check(self) -> None:
        check_ranges(self, m=">= 1", n=">= 0", l=">= 0", k=">= 1", format_score="in [0, 1)")
        check_ranges(self, clip_eps="in (0, 1)", dual_clip="> 1", kl_coef=">= 0")
        check_ranges(self, batch_baseline=">= 0", demo_coef=">= 0", demo_batch=">= 1")
        check_ranges(self, entropy_coef=">= 0", expansion_tokens=">= 1")
        check_ranges(self, sampler_correction_cap="> 1")
        check_ranges(self, expansion_temperature="> 0", expansion_repeat_penalty="in (0, 1]")
        check_ranges(self, expansion_bonus=">= 0", expansion_prior="> 0")
        check_ranges(self, expansion_budget_floor=">= 0", expansion_budget_cap=">= 1")
        if self.algo == "chain" and self.mode() != "inter":
            raise ConfigValueError(
                "advantage_mode",
                "must be inter (or null) with algo chain: a chain is a tree of one leaf, a "
                "group of one for the intra-tree term",
                self.advantage_mode,
            )
        if self.algo == "chain":
            return
        one_leaf = self.l == 0 or self.n == 0 or self.k == 1
        if one_leaf and self.mode() != "inter":
            field = "l" if self.l == 0 else "n" if self.n == 0 else "k"
            raise ConfigValueError(
                field,
                f"leaves one leaf per tree (algo tree, n={self.n}, l={self.l}, k={self.k}), so "
                "each tree is a group of one and the intra-tree term adds the raw reward "
                "(rewards [1, 0, 0, 0] give [2.5, -0.5, -0.5, -0.5], not chain GRPO's "
                "[1.5, -0.5, -0.5, -0.5]); use algo: chain for chain GRPO, or give every tree "
                "more than one leaf",
                getattr(self, field),
            )
        leaves = 1 + self.n * self.l
        if self.k is not None and self.k > leaves:
            raise ConfigValueError("k", f"must be at most the 1 + n·l = {leaves} leaves", self.k)
        if self.expansion_budget == "difficulty" and self.n * self.l:  # T·n fits floor, cap
            floor, cap = self.expansion_budget_floor, self.expansion_budget_cap
            if floor > self.n:
                raise ConfigValueError("expansion_budget_floor", f"must be <= n = {self.n}", floor)
            if cap is not None and cap < self.n:
                raise ConfigValueError("expansion_budget_cap", f"must be >= n = {self.n}", cap)

    def shape(self) -> TreeShape:
        if self.algo == "chain":
            return TreeShape(self.m)
        if self.l == 0 or self.n == 0:  # no expansion: chains (inter-only credit, see _check)
            return TreeShape(self.m, k=self.k)
        return TreeShape(self.m, self.n, self.l, self.k, self.expansion_rule())

    def expansion_rule(self) -> Expansion:
        """The expansion rule and its parameters (``core.expansion``)."""
        return Expansion(
            self.expansion,
            k=self.expansion_tokens,
            temperature=self.expansion_temperature,
            repeat_penalty=self.expansion_repeat_penalty,
            threshold=self.expansion_threshold,
            bonus=self.expansion_bonus,
            prior_strength=self.expansion_prior,
            budget=self.expansion_budget,
            floor=self.expansion_budget_floor,
            cap=self.expansion_budget_cap,
        )

    def mode(self) -> Mode:
        if self.advantage_mode is not None:
            return self.advantage_mode
        return "intra+inter" if self.algo == "tree" else "inter"


@dataclass(frozen=True)
class OptimConfig(Checked):
    """Optimizer and update schedule."""

    lr: float = 1e-6
    """AdamW learning rate (1e-6 in the paper for 1.5B–14B models)."""
    warmup_steps: int = 0
    """Linear warm-up steps, then constant."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW betas."""
    grad_clip: float = 1.0
    """Clip the gradient norm; a step whose norm is not finite is skipped."""
    mini_batch_prompts: int = 64
    """Prompts per optimizer update (several updates per rollout batch)."""
    micro_batch_tokens: int = 8192
    """Padded positions per forward/backward (gradient accumulation inside a mini-batch)."""
    packed_row_span: int | None = None
    """With ``algo.shared_prefix``: the row width (tokens) at which a packed row's dense
    attention costs as much as its other layers; a prompt's paths are cut into rows where that
    is cheaper (``train.shared``). None: from the model's shape, (4H + 3I) / 2."""
    ppo_epochs: int = 1
    """Passes over the rollout batch."""

    def _check(self) -> None:
        check_ranges(self, lr="> 0", warmup_steps=">= 0", weight_decay=">= 0", betas="in [0, 1)")
        check_ranges(self, grad_clip="> 0", mini_batch_prompts=">= 1", micro_batch_tokens=">= 1")
        check_ranges(self, ppo_epochs=">= 1", packed_row_span=">= 1")


@dataclass(frozen=True)
class RunConfig(Checked):
    """Where the run writes and how long it lasts."""

    out_dir: str = "runs/default"
    """Run directory (created)."""
    steps: int = 20
    """RL steps."""
    prompts_per_step: int = 16
    """Prompts sampled per RL step (512 in the paper)."""
    seed: int = 0
    """Seeds data order, sampling and expansion choice."""
    save_every: int = 10
    """Checkpoint every this many steps (and at the end)."""
    keep_checkpoints: int = 2
    """Complete checkpoints kept on disk."""
    eval_every: int = 0
    """Evaluate every this many steps (0: only when the caller asks). ``treegrpo train`` skips
    the last step's, as it evaluates the final checkpoint anyway."""
    forests_every: int = 10
    """Keep a sample of the step's forests every this many steps (and the first step) in
    ``forests/step-NNNNNN.json`` for ``treegrpo view`` (0: never)."""
    forests_prompts: int = 4
    """Prompts per kept step (their trees, decoded, with rewards and advantages)."""
    resume: bool = False
    """Continue from the newest complete checkpoint in out_dir."""
    overwrite: bool = False
    """Start afresh in an out_dir that holds a previous run, deleting its checkpoints, metrics
    and TensorBoard events first (without it, or resume, such a directory is refused)."""

    def _check(self) -> None:
        if not self.out_dir.strip():
            raise ConfigValueError("out_dir", "must name a directory", self.out_dir)
        check_ranges(self, steps=">= 0", prompts_per_step=">= 1", seed=">= 0", save_every=">= 1")
        check_ranges(self, keep_checkpoints=">= 1", eval_every=">= 0", forests_every=">= 0")
        check_ranges(self, forests_prompts=">= 1")


@dataclass(frozen=True)
class ModelConfig(Checked):
    """What is trained and where: LoRA or full fine-tuning, memory savers, device, precision."""

    lora_rank: int = 0
    """LoRA rank r (0: full fine-tuning; > 0: only LoRA adapters train, through peft)."""
    lora_alpha: float = 16.0
    """LoRA scaling α (updates are scaled by α / r)."""
    lora_dropout: float = 0.0
    """Dropout on the LoRA branch's input during updates."""
    lora_targets: tuple[str, ...] = (
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    )
    """Module names that get adapters (Qwen2 / Llama / Mistral linear layers)."""
    frozen: tuple[str, ...] = ()
    """Full fine-tuning: parameters whose names start with one of these stay fixed (e.g.
    "model.embed_tokens"). The embedded preset keeps the warm start's copying circuits fixed."""
    grad_checkpointing: bool = False
    """Recompute activations in the backward pass: less memory, about a third more compute."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """Autocast dtype of the update's forward passes on CUDA (auto: bfloat16 if supported).
    CPU runs ignore it and compute float32; float16 runs without loss scaling."""
    device: str = "auto"
    """Device of the policy and reference (auto: cuda if available, else cpu)."""
    engine: Literal["hf", "vllm"] = "hf"
    """Rollout backend: hf (transformers, with the prefix KV cache of segments) or vllm (vLLM in
    the same process, weights pushed after every update, LoRA adapters merged into them;
    install it with `make setup-vllm`)."""
    cpu_speedups: bool | None = None
    """The CPU speed-ups (``engine.cpu``; docs/library.md, "CPU speed-ups"): None = on where the
    model runs on CPU, off on CUDA (not measured there)."""

    def _check(self) -> None:
        check_ranges(self, lora_rank=">= 0", lora_alpha="> 0", lora_dropout="in [0, 1)")
        if self.lora_rank > 0 and not self.lora_targets:
            raise ConfigValueError(
                "lora_targets",
                "must name at least one module when lora_rank > 0",
                self.lora_targets,
            )
        if not DEVICE.fullmatch(self.device):
            raise ConfigValueError(
                "device", "must be auto, cpu, cuda, cuda:N, mps, xpu or xpu:N", self.device
            )


@dataclass(frozen=True)
class ClusterConfig(Checked):
    """Scaling out on Ray (``treegrpo.distributed``; `pip install ray`): rollout workers, and the
    update's FSDP2 ranks."""

    rollout_workers: int = 0
    """Rollout workers on Ray (0: sample in this process), each with its own engine on its own
    copy of the policy; a step's prompts are split over them, a whole prompt per worker."""
    ray_address: str | None = None
    """The Ray cluster to join ("auto" on a node of a cluster started with `ray start`; None:
    start a local one in this process)."""
    cpus_per_worker: float | None = None
    """CPU cores Ray reserves for each worker (its torch threads: the whole cores, at least
    one; fractions such as 0.5 share a core). None: on a local cluster (no ray_address) an equal
    share of its CPUs for every worker and rank, else 1."""
    gpus_per_worker: float = 0.0
    """GPUs Ray reserves for each worker (1 for vLLM on a GPU each); > 0 puts the workers' models
    on CUDA."""
    max_restarts: int = 3
    """How often a worker whose process dies is restarted (its prompts are sampled again)."""
    train_ranks: int = 0
    """Ranks of the update on Ray, the policy sharded over them with FSDP2
    (``treegrpo.distributed.fsdp``; 0: the update runs in this process)."""
    cpus_per_rank: float | None = None
    """CPU cores Ray reserves for each rank (its torch threads: the whole cores, at least one;
    fractions share a core). None: as cpus_per_worker."""
    gpus_per_rank: float = 0.0
    """GPUs Ray reserves for each rank (1 each for NCCL; > 0 puts the ranks on CUDA)."""

    def _check(self) -> None:
        check_ranges(self, rollout_workers=">= 0", max_restarts=">= 0", train_ranks=">= 0")
        check_ranges(self, cpus_per_worker=">= 0", gpus_per_worker=">= 0")
        check_ranges(self, cpus_per_rank=">= 0", gpus_per_rank=">= 0")


@dataclass(frozen=True)
class HealthConfig(Checked):
    """What counts as an unhealthy step and what happens after ``patience`` in a row."""

    action: Literal["warn", "stop", "rollback"] = "warn"
    """warn: log and go on; stop: end the run; rollback: resume from the last healthy
    checkpoint with a smaller learning rate."""
    patience: int = 3
    """Unhealthy steps in a row before the alarm."""
    kl_max: float | None = 1.0
    """Largest mean per-token KL to the reference (``loss/kl``; None: not checked)."""
    entropy_min: float | None = None
    """Smallest mean per-token entropy of the trained tokens (None: not checked; a tiny model
    on a deterministic task legitimately goes near 0)."""
    entropy_max: float | None = None
    """Largest mean per-token entropy (None: not checked)."""
    format_drop: float | None = 0.1
    """A format collapse: the mean valid-format share of the last ``window`` steps' leaves
    more than this below the best such mean so far (None: not checked; docs/algorithm.md, "Learning
    that does not collapse")."""
    kl_drift: float | None = 0.15
    """KL drifting: the mean ``loss/kl`` of the last ``window`` steps with an update above
    this, a warning well before ``kl_max`` (None: not checked)."""
    reward_collapse: float | None = 0.25
    """A collapse: the last ``window`` steps' mean reward below this fraction of the best such
    mean so far (None: not checked)."""
    window: int = 5
    """Steps in the reward's rolling mean."""
    max_failed_searches: float = 0.25
    """Largest share of a step's searches that may fail (retriever down or refusing) before the
    run stops, ahead of that step's update; failed searches below it become observations that
    say so (``rollout.sampler``)."""
    rollback_lr_scale: float = 0.5
    """Learning-rate factor applied at each rollback."""
    max_rollbacks: int = 2
    """Rollbacks before the run stops instead."""

    def _check(self) -> None:
        check_ranges(self, patience=">= 1", kl_max="> 0", entropy_min=">= 0", entropy_max="> 0")
        check_ranges(self, reward_collapse="in (0, 1)", window=">= 1")
        check_ranges(self, format_drop="in (0, 1)", kl_drift="> 0")
        check_ranges(self, max_failed_searches="in [0, 1]", rollback_lr_scale="in (0, 1]")
        check_ranges(self, max_rollbacks=">= 0")
        low, high = self.entropy_min, self.entropy_max
        if low is not None and high is not None and low > high:
            raise ConfigValueError("entropy_max", f"must be >= entropy_min = {low}", high)
