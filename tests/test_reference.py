import math

import torch

from lnbench.backends.reference import reference


def test_reference_matches_hand_computed_values():
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    w = torch.tensor([2.0, 1.0, 1.0, 0.5])
    b = torch.tensor([0.0, 1.0, -1.0, 0.5])
    dy = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    eps = 1e-5
    out = reference(x, w, b, dy, eps)
    rstd = 1.0 / math.sqrt(1.25 + eps)          # var of 1..4 is 1.25
    xhat = [(v - 2.5) * rstd for v in (1, 2, 3, 4)]
    assert out["mean"].item() == 2.5
    assert math.isclose(out["rstd"].item(), rstd, rel_tol=1e-12)
    expected_y = [xhat[i] * w[i].item() + b[i].item() for i in range(4)]
    assert torch.allclose(out["y"][0], torch.tensor(expected_y, dtype=torch.float64), atol=1e-12)
    # backward by the closed form: wdy = dy*w, c1 = mean(wdy), c2 = mean(wdy*xhat)
    wdy = [2.0, 0.0, 0.0, 0.0]
    c1 = sum(wdy) / 4
    c2 = sum(a * h for a, h in zip(wdy, xhat)) / 4
    expected_dx = [(wdy[i] - c1 - xhat[i] * c2) * rstd for i in range(4)]
    assert torch.allclose(out["dx"][0], torch.tensor(expected_dx, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(out["dweight"], torch.tensor([xhat[0], 0, 0, 0], dtype=torch.float64), atol=1e-12)
    assert torch.equal(out["dbias"], torch.tensor([1.0, 0, 0, 0], dtype=torch.float64))
    assert all(t.dtype == torch.float64 for t in out.values())


def test_reference_constant_row_gives_rstd_of_eps():
    x = torch.full((2, 8), 3.0)
    out = reference(x, torch.ones(8), torch.zeros(8), torch.ones(2, 8), 1e-2)
    assert torch.allclose(out["rstd"], torch.full((2,), 10.0, dtype=torch.float64))
    assert torch.equal(out["y"], torch.zeros(2, 8, dtype=torch.float64))


def test_reference_flattens_stats_of_3d_input():
    x = torch.randn(2, 3, 16, generator=torch.Generator().manual_seed(0))
    out = reference(x, torch.ones(16), torch.zeros(16), torch.randn(2, 3, 16), 1e-5)
    assert out["mean"].shape == (6,) and out["y"].shape == (2, 3, 16)
