import math

import pytest
import torch

from treegrpo.train.losses import aggregate, entropy_from_logits, kl_penalty, ppo_clip_loss


def _loss_at(ratio: float, adv: float, dual: float | None = 3.0) -> float:
    logp = torch.tensor([[math.log(ratio)]])
    loss, _ = ppo_clip_loss(
        logp,
        torch.zeros(1, 1),
        torch.tensor([[adv]]),
        torch.ones(1, 1),
        clip_eps=0.2,
        dual_clip=dual,
    )
    return loss.item()


@pytest.mark.parametrize(
    ("ratio", "adv", "expected"),
    [
        (1.0, 2.0, -2.0),  # on-policy: −A
        (1.5, 1.0, -1.2),  # A > 0, ratio above 1 + ε: clipped at 1.2
        (0.5, 1.0, -0.5),  # A > 0, ratio below 1 − ε: the unclipped (pessimistic) term
        (0.5, -1.0, 0.8),  # A < 0, ratio below 1 − ε: clipped at 0.8
        (1.5, -1.0, 1.5),  # A < 0, ratio above 1 + ε: unclipped, below the dual bound 3
        (5.0, -1.0, 3.0),  # A < 0, ratio 5: dual clip bounds the loss at c·|A| = 3
    ],
)
def test_ppo_clip_regions(ratio: float, adv: float, expected: float) -> None:
    assert _loss_at(ratio, adv) == pytest.approx(expected, abs=1e-6)


def test_dual_clip_off_and_validation() -> None:
    assert _loss_at(5.0, -1.0, dual=None) == pytest.approx(5.0, abs=1e-5)
    with pytest.raises(ValueError, match="dual_clip"):
        _loss_at(1.0, 1.0, dual=0.5)


def test_log_ratio_is_clamped() -> None:
    loss, _ = ppo_clip_loss(
        torch.tensor([[50.0]]),
        torch.zeros(1, 1),
        torch.tensor([[-1.0]]),
        torch.ones(1, 1),
        dual_clip=None,
    )
    assert loss.item() == pytest.approx(math.exp(20.0), rel=1e-5)


def test_token_mean_over_the_batch_and_masked_tokens() -> None:
    logp = torch.zeros(2, 3)
    adv = torch.tensor([[1.0, 2.0, 100.0], [3.0, 100.0, 100.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    loss, stats = ppo_clip_loss(logp, logp, adv, mask)
    assert loss.item() == pytest.approx(-(1 + 2 + 3) / 3)
    assert stats["clip_frac"].item() == 0.0 and stats["approx_kl"].item() == 0.0
    seq, _ = ppo_clip_loss(logp, logp, adv, mask, aggregation="seq-mean-token-mean")
    assert seq.item() == pytest.approx(-((1 + 2) / 2 + 3) / 2)
    total, _ = ppo_clip_loss(logp, logp, adv, mask, aggregation="seq-mean-token-sum")
    assert total.item() == pytest.approx(-(3 + 3) / 2)


def test_masked_tokens_get_no_gradient() -> None:
    torch.manual_seed(0)
    logp = torch.randn(2, 4, requires_grad=True)
    old = torch.randn(2, 4)
    adv = torch.randn(2, 4)
    mask = torch.tensor([[1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0]])
    loss, _ = ppo_clip_loss(logp, old, adv, mask)
    (grad,) = torch.autograd.grad(loss, logp)
    assert torch.all(grad[mask == 0] == 0)
    # changing masked values changes nothing
    old2 = torch.where(mask == 0, torch.randn(2, 4) * 10, old)
    adv2 = torch.where(mask == 0, torch.randn(2, 4) * 10, adv)
    loss2, _ = ppo_clip_loss(logp, old2, adv2, mask)
    assert loss2.item() == pytest.approx(loss.item())


def test_kl_estimators_match_their_definitions() -> None:
    logp = torch.tensor([-1.0, -2.0, -0.5])
    ref = torch.tensor([-1.5, -1.0, -0.5])
    x = ref - logp
    torch.testing.assert_close(kl_penalty(logp, ref, "k1"), logp - ref)
    torch.testing.assert_close(kl_penalty(logp, ref, "k2"), 0.5 * (logp - ref) ** 2)
    torch.testing.assert_close(kl_penalty(logp, ref, "k3"), torch.exp(x) - x - 1)
    assert kl_penalty(logp, ref, "k3")[2].item() == 0.0  # identical policies
    assert kl_penalty(torch.tensor([0.0]), torch.tensor([30.0]), "k3").item() == 10.0  # clamp
    # k1 and k3 are unbiased for KL(p‖q): compare with the exact value on a small distribution
    p = torch.tensor([0.6, 0.3, 0.1])
    q = torch.tensor([0.2, 0.5, 0.3])
    exact = (p * (p / q).log()).sum()
    for est in ("k1", "k3"):
        expectation = (p * kl_penalty(p.log(), q.log(), est)).sum()  # type: ignore[arg-type]
        torch.testing.assert_close(expectation, exact)
    with pytest.raises(ValueError):
        kl_penalty(logp, ref, "k4")  # type: ignore[arg-type]


def test_entropy_and_aggregate() -> None:
    uniform = torch.zeros(1, 2, 4)
    torch.testing.assert_close(entropy_from_logits(uniform), torch.full((1, 2), math.log(4)))
    peaked = torch.tensor([[[100.0, 0.0, 0.0]]])
    assert entropy_from_logits(peaked).item() == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError):
        aggregate(torch.ones(1, 1), torch.ones(1, 1), "bad")  # type: ignore[arg-type]
    assert aggregate(torch.ones(2, 2), torch.zeros(2, 2)).item() == 0.0
