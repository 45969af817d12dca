"""Bugs of both backends (issue 30, point 3): where eager CPU shows the same symptom as
the target (an in-place op writing past its view, an input modified, a result that
depends on the layout, a call that raises on non-contiguous inputs whose contiguous
copies work), the finding is ``both``: a bug of PyTorch itself, filed once as such, not
as the target's. A layout precondition the target alone states ("... is not
contiguous") is the target's finding, not an unsupported combination.

The harness: ``CpuFaultTarget`` runs the same fault under eager CPU (the reference) as
under the target, or under the target alone."""
from __future__ import annotations

import pytest

from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import DEFAULT, Failure, worker_oracles
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.testing import faults as F
from mpsfuzz.testing.cpu_faults import CpuFaultTarget

GAPPED = Layout(gaps=(1, 2))


def tensor(shape, dtype="float32", *, layout=Layout(), seed=3):
    return TensorRecipe(tuple(shape), dtype, layout, ValueRecipe("normal", seed=seed))


def judged(case, target) -> list[Failure]:
    return [Failure.from_json(f) for f in judge_case(case, target, worker_oracles(DEFAULT)).failures]


@pytest.fixture
def backends():
    """backends(fault, on_cpu=True): a target with ``fault``, and eager CPU with it too
    (or clean)."""
    made = []

    def make(fault, *, on_cpu: bool = True):
        for t in reversed(made):   # one harness at a time: CPU clean again first
            t.close()
        t = CpuFaultTarget((fault,) if on_cpu else (), (fault,))
        made.append(t)
        return t
    yield make
    for t in reversed(made):
        t.close()


def the(failures, oracle: str) -> Failure:
    (f,) = [f for f in failures if f.oracle == oracle]
    return f


def test_an_in_place_op_that_writes_past_its_view_on_both_is_both(backends):
    spill = F.FAULTS["sub_inplace_spill"]
    case = Case("sub", (tensor((3, 4), layout=GAPPED), tensor((3, 4), seed=4)), variant="inplace")
    f = the(judged(case, backends(spill)), "variants")
    assert (f.kind, f.blame) == ("writes-outside-view", "both") and f.dedup_key[-1] == "both"
    assert "eager CPU alike" in f.title
    f = the(judged(case, backends(spill, on_cpu=False)), "variants")
    assert (f.kind, f.blame) == ("writes-outside-view", "target")


def test_an_input_modified_on_both_is_both(backends):
    clobber = F.Fault("exp_clobbers", "exp overwrites its input", ("aten::exp",), lambda f, a, k: True,
                      "clobber_input")
    case = Case("exp", (tensor((2, 3)),))
    f = the(judged(case, backends(clobber)), "variants")
    assert (f.kind, f.blame) == ("input-modified", "both")
    f = the(judged(case, backends(clobber, on_cpu=False)), "variants")
    assert (f.kind, f.blame) == ("input-modified", "target")


def test_a_layout_dependence_eager_cpu_shares_is_both(backends):
    """Both read a transposed input as if dense: they agree with each other (no values
    finding), and each gives another result for contiguous copies."""
    ignore = F.Fault("silu_ignores_strides", "silu reads strided inputs as dense", ("aten::silu",),
                     lambda f, a, k: not a[0].is_contiguous(), "ignore_strides")
    case = Case("silu", (tensor((3, 4), layout=Layout(permutation=(1, 0))),))
    f = the(judged(case, backends(ignore)), "layout")
    assert (f.kind, f.blame) == ("layout-wrong-values", "both")
    failures = judged(case, backends(ignore, on_cpu=False))
    assert ("values", "target") in [(f.oracle, f.blame) for f in failures]


def test_raising_on_non_contiguous_inputs_whose_copies_work_on_both_is_both(backends):
    refuse = F.Fault("silu_refuses_strides", "silu raises on a strided input", ("aten::silu",),
                     lambda f, a, k: not a[0].is_contiguous(), "raise",
                     message="view size is not compatible with input tensor's size and stride")
    case = Case("silu", (tensor((3, 4), layout=GAPPED),))
    f = the(judged(case, backends(refuse)), "errors")
    assert (f.kind, f.blame) == ("raises-on-noncontiguous", "both") and "contiguous copies" in f.message
    # the target alone: its own finding, as before
    f = the(judged(case, backends(refuse, on_cpu=False)), "errors")
    assert (f.kind, f.blame) == ("dut-raises", "target")


def test_a_layout_precondition_the_target_alone_states_is_its_finding(backends):
    """cuDNN's "rnn: hx is not contiguous" was counted as unsupported: where eager CPU
    accepts the same input, users hit it, so it is the target's finding."""
    refuse = F.Fault("silu_hx", "a stated precondition", ("aten::silu",),
                     lambda f, a, k: not a[0].is_contiguous(), "raise", message="rnn: hx is not contiguous")
    result = judge_case(Case("silu", (tensor((3, 4), layout=GAPPED),)), backends(refuse, on_cpu=False),
                        worker_oracles(DEFAULT))
    assert not result.unsupported
    (f,) = [Failure.from_json(f) for f in result.failures]
    assert (f.oracle, f.kind, f.blame) == ("errors", "dut-raises", "target")


def test_a_crash_of_the_target_alone_stays_the_targets(monkeypatch):
    from mpsfuzz.execution.worker import WorkerPool
    from mpsfuzz.triage.pipeline import triage
    from mpsfuzz.triage.probe import Prober
    from test_triage import FAULT_TARGET
    monkeypatch.setenv("MPSFUZZ_FAULTS", "add_alpha_abort")
    case = Case("add", (tensor((2, 3)), tensor((2, 3))), (("alpha", 2.0),))
    pool = WorkerPool(FAULT_TARGET, timeout_s=20.0, execute=judge_case)
    try:
        failures, _, died = Prober(pool, DEFAULT, fresh=True).failures(case)
        assert died
        crash = next(f for f in failures if f.oracle == "crash")
        done = triage(case, crash, pool, DEFAULT, reruns=1, budget_s=5.0, timeout_s=20.0, localise_it=False)
    finally:
        pool.close()
    assert done.failure.blame == "target", done.failure.message
