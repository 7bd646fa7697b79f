import torch

from treegrpo.rollout.records import LeafSequence
from treegrpo.train.batch import make_micro_batches, pad_fraction


def _seq(n: int, first_action: int) -> LeafSequence:
    ids = list(range(10, 10 + n))
    mask = [0] * first_action + [1] * (n - first_action)
    return LeafSequence(ids, mask, [-0.5 if m else 0.0 for m in mask], first_action)


def test_targets_masks_and_advantages_line_up() -> None:
    seqs = [_seq(5, 2), _seq(4, 3)]
    (mb,) = make_micro_batches(seqs, [1.5, -2.0], max_tokens=100)
    order = mb.index
    assert sorted(order) == [0, 1] and order[0] == 1  # sorted by length
    row = order.index(0)
    assert mb.input_ids[row].tolist() == [10, 11, 12, 13, 14]
    assert mb.targets[row].tolist() == [11, 12, 13, 14]
    # targets 12, 13, 14 are actions (ids positions 2..4)
    assert mb.action_mask[row].tolist() == [0, 1, 1, 1]
    assert mb.advantages[row].tolist() == [0, 1.5, 1.5, 1.5]
    assert mb.sampled_logprobs[row].tolist() == [0, -0.5, -0.5, -0.5]
    short = order.index(1)
    assert mb.attention_mask[short].tolist() == [1, 1, 1, 1, 0]
    assert mb.action_mask[short].tolist() == [0, 0, 1, 0]  # padding is never an action
    assert mb.advantages[short].tolist() == [0, 0, -2.0, 0]
    assert mb.n_action_tokens == 4


def test_length_grouping_keeps_padding_small() -> None:
    lengths = [50, 51, 52, 200, 201, 202, 203, 49, 48, 500]
    seqs = [_seq(n, 10) for n in lengths]
    batches = make_micro_batches(seqs, [0.0] * len(seqs), max_tokens=820)
    assert sorted(i for mb in batches for i in mb.index) == list(range(len(seqs)))
    assert all(mb.input_ids.numel() <= 820 or len(mb.index) == 1 for mb in batches)
    assert pad_fraction(batches) < 0.02
    # with room for everything the cut still splits where padding costs more than a call
    roomy = make_micro_batches(seqs, [0.0] * len(seqs), max_tokens=10**6, overhead=100)
    assert [sorted(len(seqs[i].ids) for i in mb.index) for mb in roomy] == [
        [48, 49, 50, 51, 52],
        [200, 201, 202, 203],
        [500],
    ]
    # one big batch of everything (a call costing more than any padding) wastes most positions
    (single,) = make_micro_batches(seqs, [0.0] * len(seqs), max_tokens=10**6, overhead=10**6)
    assert pad_fraction([single]) > 0.5
    assert torch.equal(single.attention_mask.sum(1).sort().values, torch.tensor(sorted(lengths)))
