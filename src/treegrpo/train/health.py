"""Training health: catch a run that is going wrong early, from the metrics of its steps (the
rules: docs/configuration.md, "The `health` section"). ``patience`` unhealthy steps in a row raise
an alarm, and ``HealthConfig.action`` warns, stops or rolls back. Non-finite gradients are skipped
step by step (``train.update``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from treegrpo.train.config import HealthConfig


class TrainingUnhealthy(RuntimeError):
    """The run stopped on a health alarm."""


class SearchOutage(RuntimeError):
    """Too many of a step's searches failed (``HealthConfig.max_failed_searches``); raised
    before the step's update, so the policy never learns from an outage."""


class Rollback(Exception):
    """The run asks to go back to ``checkpoint`` (``HealthConfig.action`` = rollback)."""

    def __init__(self, checkpoint: str, reason: str) -> None:
        super().__init__(f"rolling back to {checkpoint}: {reason}")
        self.checkpoint, self.reason = checkpoint, reason


def _rolling_mean(values: list[float], value: float, window: int) -> float | None:
    """Append ``value`` to ``values``; the mean of their last ``window`` (None while fewer)."""
    values.append(value)
    return sum(values[-window:]) / window if len(values) >= window else None


@dataclass
class HealthMonitor:
    """Judges each step's metrics (``check``); rebuilt on resume from the logged steps."""

    cfg: HealthConfig
    rewards: list[float] = field(default_factory=list)
    best: float = float("-inf")  # best rolling mean reward so far
    formats: list[float] = field(default_factory=list)  # valid-format share per step
    best_format: float = float("-inf")  # best rolling mean of it so far
    kls: list[float] = field(default_factory=list)  # KL of the steps with an update
    streak: int = 0  # unhealthy steps in a row
    streak_start: int = 0  # first step of the current streak (0: none)

    @classmethod
    def replay(cls, cfg: HealthConfig, logged: Iterable[Mapping[str, float]]) -> HealthMonitor:
        """The monitor as it was after the steps ``logged`` (metrics.jsonl lines, in order)."""
        monitor = cls(cfg)
        for m in logged:
            monitor.check(int(m["step"]), m)
        return monitor

    def problems(self, metrics: Mapping[str, float]) -> list[str]:
        """What is wrong with one step's metrics (updates the reward history)."""
        cfg, out = self.cfg, []
        if metrics.get("train/updates", 0) > 0 and metrics.get("train/prompts_updated", 1) > 0:
            kl, ent = metrics.get("loss/kl"), metrics.get("loss/entropy")
            if cfg.kl_max is not None and kl is not None and kl > cfg.kl_max:
                out.append(f"KL to the reference {kl:.3g} > kl_max {cfg.kl_max:g}")
            if cfg.entropy_min is not None and ent is not None and ent < cfg.entropy_min:
                out.append(f"entropy {ent:.3g} < entropy_min {cfg.entropy_min:g}")
            if cfg.entropy_max is not None and ent is not None and ent > cfg.entropy_max:
                out.append(f"entropy {ent:.3g} > entropy_max {cfg.entropy_max:g}")
            if kl is not None:
                mean = _rolling_mean(self.kls, float(kl), cfg.window)
                if cfg.kl_drift is not None and mean is not None and mean > cfg.kl_drift:
                    out.append(
                        f"KL drifting: mean of the last {cfg.window} updates {mean:.3g} > "
                        f"kl_drift {cfg.kl_drift:g}"
                    )
        if "reward/valid_format" in metrics:
            mean = _rolling_mean(self.formats, float(metrics["reward/valid_format"]), cfg.window)
            if mean is not None:
                drop = cfg.format_drop
                if drop is not None and mean < self.best_format - drop:
                    out.append(
                        f"format collapsing: valid-format share of the last {cfg.window} steps "
                        f"{mean:.2f}, more than format_drop {drop:g} below the best "
                        f"{self.best_format:.2f}"
                    )
                self.best_format = max(self.best_format, mean)
        mean = _rolling_mean(self.rewards, float(metrics["reward/mean"]), cfg.window)
        if mean is not None:
            limit = None if cfg.reward_collapse is None else cfg.reward_collapse * self.best
            if limit is not None and self.best > 0 and mean < limit:
                out.append(
                    f"reward collapsed: mean of the last {cfg.window} steps {mean:.3f} < "
                    f"{cfg.reward_collapse:g} × the best {self.best:.3f}"
                )
            self.best = max(self.best, mean)
        return out

    def check(self, step: int, metrics: Mapping[str, float]) -> list[str]:
        """The step's problems; counts the unhealthy streak (``alarm``: it reached ``patience``)."""
        found = self.problems(metrics)
        if found:
            self.streak_start = self.streak_start if self.streak else step
            self.streak += 1
        else:
            self.streak, self.streak_start = 0, 0
        return found

    @property
    def alarm(self) -> bool:
        return self.streak >= self.cfg.patience

    @property
    def healthy(self) -> bool:
        """No unhealthy step since the last healthy one (a checkpoint now counts as good)."""
        return self.streak == 0
