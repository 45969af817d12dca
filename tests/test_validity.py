"""`mpsfuzz ops --stats`: the share of generated cases the CPU reference accepts, per op,
measured with the campaign's own strategies; and the catalogue meets issue 3's floor."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from mpsfuzz.execution.executor import reference_rejection
from mpsfuzz.generation import catalogue, validity
from mpsfuzz.generation.opspec import OpSpec, same_shapes
from mpsfuzz.generation.strategies import example_cases


def _spec(name, fn):
    return OpSpec(name=name, family="test", fn=fn, shapes=same_shapes(2), dtypes=("float32",), doc="test op")


def _rejects_wide_inputs(a, b):
    if a.dim() >= 2:
        raise RuntimeError("test op: rank >= 2 is not accepted")
    return a + b


def test_shares_count_what_the_cpu_rejects(registered):
    def always_rejects(a, b):
        raise RuntimeError("test op: never accepted")
    registered(_spec("test.rejects", always_rejects))
    registered(_spec("test.accepts", torch.add))
    registered(_spec("test.rank_lt_2", _rejects_wide_inputs))
    rejects, accepts, some = validity.measure(["test.rejects", "test.accepts", "test.rank_lt_2"],
                                              rejection=reference_rejection, cases_per_op=40, seed=3)
    assert (rejects.cases, rejects.valid, rejects.share) == (40, 0, 0.0)
    assert "never accepted" in rejects.first_rejection
    assert (accepts.valid, accepts.first_rejection) == (40, "")
    # The share matches the cases drawn: those of rank < 2 are the valid ones.
    drawn = example_cases(catalogue.get("test.rank_lt_2"), 40, seed=3)
    assert some.valid == sum(len(c.inputs[0].shape) < 2 for c in drawn)
    assert 0 < some.valid < some.cases


def test_drawing_is_reproducible_for_a_seed():
    spec = catalogue.get("sum")
    assert example_cases(spec, 15, seed=9) == example_cases(spec, 15, seed=9)
    assert example_cases(spec, 15, seed=9) != example_cases(spec, 15, seed=10)


@pytest.mark.slow
def test_every_family_meets_the_valid_share_targets():
    """Issue 3: no op below 30% valid; every family at least 70% overall. (The per-op
    figures for the closing note come from `mpsfuzz ops --stats` at 100 cases per op.)"""
    # (The large class's shares are held to in test_large_sizes.py: measured here, in this
    # process, one conv1d@large case with 65,536 stride-0 float16 channels segfaults eager
    # CPU torch 2.13, and a crash is what the campaign's worker processes are for.)
    ops = sorted(n for n, spec in catalogue.all_ops().items() if not spec.size_class)
    results = validity.measure(ops, rejection=reference_rejection, cases_per_op=25, seed=0)
    below_floor = [(r.op, r.valid, r.cases, r.first_rejection) for r in results if r.share < validity.FLOOR_SHARE]
    assert below_floor == []
    for fam in validity.by_family(results):
        assert fam.share >= validity.TARGET_SHARE, (fam.family, fam.share)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "mpsfuzz", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_ops_stats_prints_per_op_and_per_family_shares():
    run = _cli("ops", "--stats", "--ops", "add,quantile_tensor_q,conv2d", "--cases", "20")
    assert run.returncode == 0, run.stderr
    for text in ("add", "quantile_tensor_q", "conv2d", "per family", "elementwise", "reduction", "nn"):
        assert text in run.stdout
    assert "3 ops, 60 cases" in run.stdout


@pytest.mark.parametrize("args, message", [
    (("ops", "--stats", "--ops", "no_such_op"), "'no_such_op' is neither"),
    (("ops", "--stats", "--cases", "0"), "--cases=0"),
    (("ops", "--ops", "add"), "--ops is for --stats"),
])
def test_ops_stats_bad_input_is_one_line(args, message, capsys):
    from mpsfuzz.cli import main
    code = main(list(args))   # in this process: no fresh interpreter to start
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1, err
