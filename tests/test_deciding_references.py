"""No real bug left undecided when a reference can decide it (issue 37, point 5).

Three real bugs of CUDA's embedding renorm were kept apart in a device run: the renorm
whose p-norm has no absolute values (undecided), the same renorm of a transposed weight
(undecided), and the renorm of no indices, a device fault (unverified). Here:

- the documented renorm formula (numpy, float64) is a reference of its own: it accuses a
  target whose renorm has no absolute values, and eager CPU where CPU has that bug;
- the target's own contiguous copy decides a layout disagreement also where the target
  has a second bug that its contiguous call shares;
- a device fault whose script shows it in a fresh interpreter is verified: a fault that
  surfaces at a later synchronisation, one that poisons the process, one that a dying
  runtime follows.
"""
from __future__ import annotations

import math

import pytest
import torch

from mpsfuzz.corpus.finding import Finding
from mpsfuzz.execution.executor import observe
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import DEFAULT, Failure, worker_oracles
from mpsfuzz.oracles.jury import Vote, decide, deliberate
from mpsfuzz.oracles.jury.ballots import ballots_of, tally
from mpsfuzz.oracles.jury.formulas.embeddings import renormed
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.oracles.values import check_values, flatten_outputs
from mpsfuzz.reports.repro_writer import repro_record
from mpsfuzz.reports.verify import judge
from mpsfuzz.testing import faults as F
from mpsfuzz.testing.cpu_faults import CpuFaultTarget
from mpsfuzz.testing.faults import FAULTS, Fault, FaultTarget

FAULT_TARGET = "mpsfuzz.testing.faults:target"
TRANSPOSED = Layout(permutation=(1, 0))


def indices(n: int, rows: int, seed: int = 1) -> TensorRecipe:
    return TensorRecipe((n,), "int64", Layout(), ValueRecipe("int_range", seed=seed, low=0, high=rows - 1))


def weight(rows: int, dim: int, *, layout: Layout = Layout(), seed: int = 5) -> TensorRecipe:
    return TensorRecipe((rows, dim), "float32", layout, ValueRecipe("normal", seed=seed))


def judged(case: Case, target) -> list[Failure]:
    try:
        return [Failure.from_json(f) for f in judge_case(case, target, DEFAULT).failures]
    finally:
        F._POISONED.clear()
        F._FAULT_AT_NEXT_SYNC.clear()


# -- the renorm reference --------------------------------------------------------------

def test_the_renorm_takes_each_distinct_rows_norm_with_absolute_values():
    w = torch.tensor([[-2.0, 0.0], [3.0, -4.0], [0.5, 0.5], [9.0, 9.0]], dtype=torch.float64)
    # row 0 named twice is renormed once; row 3 is not named and stays as it is
    out = renormed(w, torch.tensor([0, 1, 0, 2]), 1.0, 1.0)
    assert out[0].tolist() == pytest.approx([-2.0 / (2.0 + 1e-7), 0.0], abs=1e-15)
    assert out[1].tolist() == pytest.approx([3.0 / (7.0 + 1e-7), -4.0 / (7.0 + 1e-7)], abs=1e-15)
    assert out[2].tolist() == [0.5, 0.5] and out[3].tolist() == [9.0, 9.0]
    # p = 3: the norm of [-2, 0] is 2 (a signed sum of cubes would give NaN, never above max_norm)
    assert renormed(w, torch.tensor([0]), 1.0, 3.0)[0, 0].item() == pytest.approx(-1.0 / (1.0 + 5e-8))
    # NaN's norm is never above max_norm; an infinite row is scaled by 0
    special = torch.tensor([[math.nan, 5.0], [math.inf, 5.0]], dtype=torch.float64)
    out = renormed(special, torch.tensor([0, 1]), 1.0, 2.0)
    assert math.isnan(out[0, 0]) and out[0, 1] == 5.0 and math.isnan(out[1, 0]) and out[1, 1] == 0.0


@pytest.mark.parametrize("norm_type", [1.0, 2.0, 3.0, math.inf])
def test_the_renorm_reference_leaves_the_weight_as_eager_renorm_does(norm_type):
    """The in-place modified weight: eager CPU's embedding_renorm_ (correct on these
    ordinary inputs) agrees with the formula, repeated indices included."""
    generator = torch.Generator().manual_seed(int(norm_type) if math.isfinite(norm_type) else 7)
    for _ in range(5):
        w = torch.randn(6, 4, generator=generator, dtype=torch.float64) * 2
        idx = torch.randint(0, 6, (9,), generator=generator)
        eager = w.clone()
        torch.embedding_renorm_(eager, idx, 1.5, norm_type)
        torch.testing.assert_close(renormed(w, idx, 1.5, norm_type), eager, rtol=1e-13, atol=1e-13)


def _renorm_cases(**extra) -> list[Case]:
    idx, w = indices(5, 4), weight(4, 3)
    psw = TensorRecipe((5,), "float32", Layout(), ValueRecipe("normal", seed=7))
    kwargs = (("max_norm", 0.5), ("norm_type", 3.0)) + tuple(extra.items())
    bags = (("offsets", (0, 2)),)
    return [Case("embedding", (idx, w), kwargs), Case("embedding", (idx, w), kwargs, variant="grad"),
            Case("embedding_bag", (idx, w, psw), kwargs + bags + (("mode", "sum"), ("per_sample_weights", True))),
            Case("embedding_bag_max", (idx, w, psw), kwargs + bags + (("mode", "max"),))]


@pytest.mark.parametrize("case", _renorm_cases(), ids=lambda c: f"{c.op}-{c.variant}")
def test_the_formula_finds_a_renorm_without_absolute_values_the_targets(case):
    (failure,) = judged(case, FaultTarget(["embedding_renorm_signed_norm"]))
    jury = failure.details["jury"]
    assert (failure.oracle, failure.blame, jury["verdict"]) == ("values", "target", "target-wrong"), failure.message
    assert "formula" in jury["decided_by"], failure.message
    # a correct target gives no failure at all
    assert judged(case, FaultTarget([])) == []


def test_the_formula_blames_eager_cpu_not_a_correct_target_where_cpu_renorms_without_absolute_values():
    case = _renorm_cases()[0]
    target = CpuFaultTarget((FAULTS["embedding_renorm_signed_norm"],))
    try:
        (failure,) = judged(case, target)
    finally:
        target.close()
    jury = failure.details["jury"]
    assert (failure.blame, jury["verdict"]) == ("cpu", "cpu-wrong") and "formula" in jury["decided_by"], \
        failure.message


# -- the target's own contiguous copy ----------------------------------------------------

def _first_element_renormed(func, args, kwargs):
    """CUDA's renorm of a transposed weight (torch 2.11, H200) changes one element of a
    row; here the first, scaled, with the norm as CUDA takes it (signed for p = 3)."""
    w, idx, max_norm, p = args[0], args[1], float(args[2]), float(args[3])
    for i in torch.unique(idx).tolist():
        norm = float(w[i].double().pow(p).sum().pow(1.0 / p))
        if norm > max_norm:
            w[i, 0] *= max_norm / (norm + 1e-7)
    return w


def _renorm_with_two_bugs(func, args, kwargs):
    if args[0].is_contiguous():
        return F._renorm_signed_norm(func, args, kwargs)
    return _first_element_renormed(func, args, kwargs)


TWO_BUGS = Fault("renorm_transposed_and_signed", "CUDA's renorm: one element of a transposed weight's row, and "
                 "no absolute values for p = 3", ("aten::embedding_renorm_",), lambda f, a, k: True, "reimplement",
                 instead=_renorm_with_two_bugs)


def test_the_targets_contiguous_copy_decides_where_its_contiguous_call_has_a_second_bug():
    """A transposed weight: the target's contiguous call gives CPU's values for the rows
    its signed norm gets right, and other wrong values for the rest. Read as a whole it
    agreed with neither side, and the finding was undecided."""
    case = Case("embedding", (indices(6, 5), weight(5, 3, layout=TRANSPOSED, seed=1)),
                (("max_norm", 0.5), ("norm_type", 3.0)))
    obs = observe(case, FaultTarget([TWO_BUGS]), worker_oracles(DEFAULT))
    failure = check_values(obs)
    assert failure is not None
    contiguous = flatten_outputs(obs.dut_contiguous.outputs)
    assert tally(ballots_of(obs, failure), dict(enumerate(contiguous))) == "both-wrong"
    selves = deliberate(obs, failure, only={"target-contiguous", "cpu-contiguous"})
    assert (selves.verdict, selves.decided_by) == ("target-wrong", ("target-contiguous",)), selves.lines()
    everyone = deliberate(obs, failure)
    assert everyone.verdict == "target-wrong" and "formula" in everyone.decided_by, everyone.lines()


def test_independent_references_that_disagree_still_leave_it_undecided():
    target, cpu = Vote("a", "independent", "target-wrong", ""), Vote("b", "independent", "cpu-wrong", "")
    own = Vote("target-contiguous", "target", "target-wrong", "")
    assert decide([target, cpu, own])[0] == "undecided"


# -- device faults reproduced alone --------------------------------------------------------

def _verified_record(monkeypatch, fault: str, case: Case) -> dict:
    monkeypatch.setenv("MPSFUZZ_FAULTS", fault)
    (failure,) = judged(case, FaultTarget([fault]))
    assert (failure.oracle, failure.kind) == ("errors", "device-fault"), failure.message
    finding = Finding.create(case, failure, target_name="faulty-cpu", target_spec=FAULT_TARGET, device="cpu")
    return repro_record(finding, verify=True, timeout_s=60)


def test_an_asynchronous_device_fault_surfaces_in_its_script_and_is_verified(monkeypatch):
    """multinomial's assert surfaces at the second synchronisation after the call: the
    script ended before it, and the finding was unconfirmed."""
    probabilities = TensorRecipe((3, 4), "float32", Layout(expanded=(0,)), ValueRecipe("positive", 2))
    case = Case("multinomial", (probabilities,), (("num_samples", 2), ("replacement", True)))
    record = _verified_record(monkeypatch, "multinomial_async_assert", case)
    assert "_synchronize(device)  # device under test" in record["script"]
    assert record["verified"] is True, record["detail"] + record.get("output", "")


@pytest.mark.parametrize("fault, case", [
    ("index_select_int32_assert",
     Case("index_select", (weight(4, 3), TensorRecipe((2,), "int32", Layout(), ValueRecipe("int_range", 1, 0, 3))),
          (("dim", 0),))),
    ("embedding_renorm_no_indices",
     Case("embedding_bag_max", (indices(0, 4), weight(4, 3), TensorRecipe((0,), "float32", Layout(), ValueRecipe())),
          (("max_norm", 1.0), ("mode", "max"), ("offsets", (0,))))),
], ids=["poisons-the-process", "renorm-of-no-indices"])
def test_a_device_fault_that_reproduces_alone_is_verified(monkeypatch, fault, case):
    record = _verified_record(monkeypatch, fault, case)
    assert record["verified"] is True, record["detail"] + record.get("output", "")


def test_a_device_faults_error_followed_by_the_runtimes_death_or_hang_is_reproduced():
    """A sticky CUDA error can abort the interpreter at exit (std::terminate while the
    context is freed) or hang it: the script showed the fault all the same."""
    expect = {"outcome": "raises", "type": "AcceleratorError", "message": "CUDA error: device-side assert triggered",
              "fault": True}
    stderr = ("torch.AcceleratorError: CUDA error: device-side assert triggered\n"
              "terminate called after throwing an instance of 'c10::Error'\n")
    died = judge(expect, -6, "", stderr)
    assert died.reproduced is True and died.detail.startswith("torch.AcceleratorError: CUDA error"), died
    assert judge(expect, None, "", stderr).reproduced is True
    # not for another error, nor for an expectation that is no device fault's
    assert judge(expect, -6, "", "RuntimeError: something else\n").reproduced is False
    assert judge(dict(expect, fault=False), -6, "", stderr).reproduced is False
