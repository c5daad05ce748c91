"""The dropout grading's independence rule: fair masks pass (whatever their keep rate strays to), masks whose
elements share numbers fail. Plain torch masks, no kernel: the rule is statistics alone."""
import pytest
import torch

from grader.compare import CheckFailed
from grader.exercises import day5

SHAPES = [(7, 300, 0.1), (64, 512, 0.5), (3, 5000, 0.3), (128, 256, 0.9)]


def _z(kept, distance):
    """How far the count of pairs `distance` apart both kept is from the mask's own rate squared, in the
    standard deviations the rule uses."""
    flat = kept.flatten()
    q = float(flat.float().mean())
    a, b = flat[:-distance], flat[distance:]
    return (int((a & b).sum()) - a.numel() * q * q) / (q * (1 - q) * a.numel() ** 0.5)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_the_rules_deviation_is_a_standard_one_for_fair_masks(shape):
    # Measured, not assumed: over 1,000 fair masks the statistic has spread 1, so SIGMAS = 6 means what it says.
    rows, cols, p = shape
    gen = torch.Generator().manual_seed(7)
    zs = torch.tensor([_z(torch.rand(rows, cols, generator=gen) >= p, 1) for _ in range(1000)])
    assert 0.9 < float(zs.std()) < 1.1, float(zs.std())
    assert float(zs.abs().max()) < day5.SIGMAS - 1


def test_a_fair_mask_whose_keep_rate_strayed_passes():
    # Found by CI: the reference kept 0.868 of 2,100 elements at p = 0.1 (4.9 standard deviations low, still
    # a plausible count), so neighbours were both kept 0.754 of the time, not 0.81 -- which the rule, then
    # measured against (1 - p)^2, refused. Against the mask's own rate squared it is independence.
    gen = torch.Generator().manual_seed(3)
    kept = torch.rand(7, 300, generator=gen) >= 0.132
    assert abs(float(kept.float().mean()) - 0.868) < 0.01
    day5._judge_independence(kept, 0.1, "dropout", "a strayed keep rate")


@pytest.mark.parametrize("share", [1, 2, 4, 64])
def test_a_mask_whose_elements_share_numbers_fails(share):
    # Runs of `share` elements with one number each: the keep rate is right, the pairs are not.
    gen = torch.Generator().manual_seed(5)
    kept = (torch.rand(64 * 512 // share, generator=gen) >= 0.5).repeat_interleave(share).reshape(64, 512)
    if share == 1:
        day5._judge_independence(kept, 0.5, "dropout", "fair")
        return
    with pytest.raises(CheckFailed, match="both kept"):
        day5._judge_independence(kept, 0.5, "dropout", f"runs of {share}")


def test_a_mask_that_repeats_every_block_fails():
    gen = torch.Generator().manual_seed(6)
    kept = (torch.rand(1024, generator=gen) >= 0.25).repeat(32).reshape(64, 512)
    with pytest.raises(CheckFailed, match="apart in memory are both kept"):
        day5._judge_independence(kept, 0.25, "dropout", "a repeating block")
