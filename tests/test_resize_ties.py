"""Resizes drawn at integer ratios (generation/ops/nn.py, ``_resized_side``): pixel centres
that fall exactly on input pixel boundaries, where a forward and a backward kernel that
round a float32 scale apart disagree. Run 40 on an H200 found CUDA's 1-D nearest-exact
backward sending the gradient to another input than its forward read (6 to 1); runs 38
and 41 of all ops drew no such tie in 420 s. A fault that does what CUDA's kernel does is
found, minimised to a tie, and localised to the backward kernel."""
from __future__ import annotations

from mpsfuzz.generation import catalogue, strategies

from test_fault_campaigns import FAULT_TARGET, findings_in, mpsfuzz


def test_integer_ratio_sizes_are_drawn_often():
    """Over a third of 1-D sizes are an integer ratio down (a quarter before: the ties
    came only from sizes drawn at random)."""
    spec = catalogue.all_ops()["interpolate_nearest_exact"]
    sides = downs = 0
    for case in strategies.example_cases(spec, 3000, seed=3):
        size = dict(case.kwargs).get("size")
        n = case.inputs[0].shape[-1]
        if size is None or len(case.inputs[0].shape) != 3 or n < 2:
            continue
        out = size if isinstance(size, int) else size[0]
        sides += 1
        downs += out < n and n % out == 0
    assert sides > 100 and downs / sides > 0.35, (downs, sides)


def test_campaign_finds_a_backward_that_breaks_pixel_centre_ties(tmp_path):
    corpus = tmp_path / "corpus"
    run = mpsfuzz("run", "--ops", "interpolate_nearest_exact", "--target", FAULT_TARGET, "--max-cases", "3000",
                  "--seed", "1", "--corpus", str(corpus), "--timeout", "5", "--shrink-budget", "30",
                  "--max-findings", "1", "--no-progress", faults="nearest_exact1d_backward_fma_tie", cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    (finding,) = findings_in(corpus)
    assert finding["op"] == "interpolate_nearest_exact" and finding["oracle"] == "grads", finding["title"]
    assert finding["localisation"]["kernel"].startswith("aten::_upsample_nearest_exact1d_backward")
    (x,) = finding["case"]["inputs"]
    assert len(x["shape"]) == 3 and x["shape"][2] >= 6      # the first tie that float32 breaks: 6 to 1
