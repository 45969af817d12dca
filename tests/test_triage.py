"""The reducer, the ablation and the reproducibility check, on the fault-injecting target.

Each test starts from a large failing case, of the kind Hypothesis hands over before it
has shrunk much, and checks that triage ends at the exact minimal case the fault's
trigger allows, names the trigger in the explanation and in the signature, and keeps
causes apart while merging what one cause produces across dtypes and shapes.
"""
from __future__ import annotations

import time

import pytest

from mpsfuzz.corpus.finding import Finding, symptom_key
from mpsfuzz.execution.worker import WorkerPool
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import DEFAULT, Failure
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.triage.pipeline import HANG_RERUNS, triage
from mpsfuzz.triage.probe import Prober
from mpsfuzz.triage.reduce import cost

FAULT_TARGET = "mpsfuzz.testing.faults:target"
TRANSPOSED = (1, 0)


def tensor(shape, dtype="float32", *, offset=0, gaps=(), permutation=(), expanded=(), seed=7,
           distribution="normal", specials=()):
    return TensorRecipe(tuple(shape), dtype, Layout(offset, tuple(gaps), tuple(permutation), tuple(expanded)),
                        ValueRecipe(distribution=distribution, seed=seed, specials=tuple(specials)))


@pytest.fixture
def pool_for(monkeypatch):
    pools = []

    def make(faults: str, timeout_s: float = 5.0) -> WorkerPool:
        monkeypatch.setenv("MPSFUZZ_FAULTS", faults)
        pool = WorkerPool(FAULT_TARGET, timeout_s=timeout_s, execute=judge_case)
        pools.append(pool)
        return pool
    yield make
    for pool in pools:
        pool.close()


def first_failure(pool, case: Case):
    failures, _, _ = Prober(pool, DEFAULT).failures(case)
    assert failures, f"the fault did not fire on {case.describe()}"
    return failures[0]


def run_triage(pool, case: Case, **kw):
    return triage(case, first_failure(pool, case), pool, DEFAULT, **kw)


def shapes(case: Case):
    return [list(r.shape) for r in case.inputs]


def finding_of(result, pool) -> Finding:
    e = result.explanation
    return Finding.create(result.case, result.failure, target_name=pool.target_name, target_spec=FAULT_TARGET,
                          device=pool.device, flaky=result.flaky,
                          conditions=e.conditions if e else None, explanation=e.to_json() if e else None)


# -- exact minimal cases ---------------------------------------------------------------------

def test_rank_bug_reduces_to_four_ones_in_float32(pool_for):
    pool = pool_for("triu_tril_gt3d")
    big = Case("triu", (tensor((3, 2, 1, 4, 5), "bfloat16", permutation=(0, 1, 2, 4, 3),
                               specials=((3, "nan"), (7, "subnormal"))),), (("diagonal", 1),), variant="method")
    result = run_triage(pool, big)
    (minimal,) = result.case.inputs
    assert (minimal.shape, minimal.dtype, minimal.layout) == ((1, 1, 1, 1), "float32", Layout())
    assert result.case.kwargs == () and result.case.variant == "functional"
    assert minimal.values.specials == ()
    assert result.explanation.conditions == ("rank>=4",)
    assert "4 or more dims" in result.explanation.text and "all float dtypes" in result.explanation.text


def test_offset_bug_keeps_only_an_offset_of_one_on_a_0d_input(pool_for):
    pool = pool_for("unary_offset")
    big = Case("neg", (tensor((4, 3), "float64", offset=5, gaps=(2, 1), permutation=TRANSPOSED),))
    result = run_triage(pool, big)
    (minimal,) = result.case.inputs
    assert (minimal.shape, minimal.dtype, minimal.layout) == ((), "float32", Layout(offset=1))
    assert result.explanation.conditions == ("layout:0",)
    assert "`input` has a storage offset" in result.explanation.text
    assert "contiguous inputs pass" in result.explanation.text


def test_noncontiguous_bug_moves_to_the_first_input_as_one_gap(pool_for):
    """Either input's awkwardness triggers it: the minimal case always shows it the same
    way (input 0, a gap of 2), so two runs that found it on different inputs agree."""
    pool = pool_for("bitwise_noncontig")
    on_other = Case("bitwise_and", (tensor((3, 4), "int16", distribution="small_int"),
                                    tensor((3, 4), "int16", permutation=TRANSPOSED, distribution="small_int")))
    on_input = Case("bitwise_and", (tensor((2, 3), "int32", gaps=(1, 3), distribution="small_int"),
                                    tensor((3,), "int32", distribution="small_int")))
    a, b = run_triage(pool, on_other), run_triage(pool, on_input)
    for result in (a, b):
        first, second = result.case.inputs
        assert (first.shape, first.layout, first.dtype) == ((2,), Layout(gaps=(2,)), "int64")
        assert second.layout.is_plain() and second.numel == 1
        assert result.explanation.conditions == ("layout:0",)
        assert "`input` is non-contiguous (gapped)" in result.explanation.text
    assert finding_of(a, pool).signature == finding_of(b, pool).signature


def test_dtype_bug_keeps_complex32_and_says_only_complex32(pool_for):
    pool = pool_for("sqrt_chalf")
    big = Case("sqrt", (tensor((3, 5), "complex32", gaps=(1, 2), specials=((2, "inf"),)),))
    result = run_triage(pool, big)
    (minimal,) = result.case.inputs
    assert (minimal.shape, minimal.dtype, minimal.layout) == ((), "complex32", Layout())
    assert result.explanation.conditions == ("classes:complex", "dtypes:complex32")
    assert "only complex32" in result.explanation.text


def test_empty_input_bug_keeps_the_empty_tensor(pool_for):
    pool = pool_for("cholesky_ex_empty")
    big = Case("linalg.cholesky_ex", (tensor((3, 0, 0), "float64", distribution="spd"),))
    result = run_triage(pool, big)
    (minimal,) = result.case.inputs
    assert minimal.numel == 0 and minimal.rank == 2
    assert "empty" in result.explanation.conditions
    assert "an input is empty" in result.explanation.text


def test_special_value_bug_keeps_the_one_special_that_matters(pool_for):
    pool = pool_for("where_inf")
    big = Case("where", (tensor((3, 4), "bool", distribution="bool"),
                         tensor((3, 4), "float32", specials=((1, "nan"), (5, "-inf"), (9, "subnormal"))),
                         tensor((3, 4), "float32", specials=((2, "-0.0"),))))
    result = run_triage(pool, big)
    held = [n for r in result.case.inputs for _, n in r.values.specials]
    assert held == ["inf"], result.case.describe()
    assert "nonfinite" in result.explanation.conditions
    assert "holds inf" in result.explanation.text and "finite values pass" in result.explanation.text


def test_variant_bug_keeps_the_variant_and_names_it(pool_for):
    pool = pool_for("add_out_noncontig")
    big = Case("add", (tensor((3, 4)), tensor((4,))), variant="out-strided")
    result = run_triage(pool, big)
    assert result.case.variant == "out-strided"
    assert "variant:out-strided" in result.explanation.conditions
    assert "non-contiguous `out=`" in result.explanation.text


def test_crash_is_reduced_in_fresh_workers(pool_for):
    pool = pool_for("add_alpha_abort")
    big = Case("add", (tensor((3, 4, 2)), tensor((4, 2))), (("alpha", 3.0),))
    result = run_triage(pool, big)
    assert result.failure.oracle == "crash" and "SIGABRT" in result.failure.message
    assert shapes(result.case) == [[], []]
    assert dict(result.case.kwargs)["alpha"] not in (1, 1.0)
    assert "kwarg:alpha" in result.explanation.conditions
    assert result.reproducibility.runs == result.reproducibility.failed  # each re-run crashed afresh


@pytest.mark.slow
def test_hang_is_reduced_within_its_time_budget(pool_for):
    pool = pool_for("prod_hang_5d", timeout_s=1.0)
    # what starting a worker and running one case costs on this machine now (a full
    # suite on two cores made it seconds: the bound below once failed at 25 s)
    start = time.monotonic()
    pool.fresh()
    pool.run(Case("prod", (tensor((2,)),)).to_json(), DEFAULT, "prod")
    respawn = time.monotonic() - start
    big = Case("prod", (tensor((2, 1, 2, 1, 1, 2)),))
    start = time.monotonic()
    result = run_triage(pool, big, reruns=1, budget_s=12.0)
    elapsed = time.monotonic() - start
    assert result.failure.oracle == "hang"
    assert result.case.inputs[0].rank == 5 and cost(result.case) < cost(big)
    # the budget bounds reduction + ablation; the re-run, the fresh-worker check and the
    # attempt in flight when the budget ran out (1 s each, and a new worker after each
    # hang) come on top
    assert elapsed < 12.0 + 4 * (1.0 + respawn) + 3.0, (elapsed, respawn)


def test_a_hang_is_re_run_twice_each_in_a_fresh_process(pool_for):
    """Each re-run of a hang waits out the timeout: two that hang say it reproduces (issue
    37: the other two were the slow desk's time, that the next crash waited for)."""
    pool = pool_for("prod_hang_5d", timeout_s=1.0)
    result = run_triage(pool, Case("prod", (tensor((2, 1, 2, 1, 1)),)), reruns=4, budget_s=0.0)
    assert result.failure.oracle == "hang" and not result.flaky
    assert result.reproducibility.runs == HANG_RERUNS == 2 and result.reproducibility.failed == 2


class HangingProber:
    """Every case hangs again (the same symptom), each probe costing ``timeout`` seconds of
    a fake clock; ``probe_cost_s`` as triage sets it for a hang."""

    def __init__(self, clock, timeout, *, charged=True):
        self.clock, self.timeout, self.probes = clock, timeout, 0
        self.probe_cost_s = timeout if charged else 0.0

    def classify(self, case, symptom):
        from mpsfuzz.triage.probe import SAME, Outcome
        self.probes += 1
        self.clock[0] += self.timeout
        return Outcome(SAME, [], object(), True)


@pytest.mark.parametrize("stage", ["reduce", "explain"])
def test_a_hang_probe_starts_only_while_its_timeout_fits_the_budget(monkeypatch, stage):
    """A probe of a hang that hangs again costs the whole timeout: reduction and ablation
    start one only where it can end within their budget (5 s, timeouts of 2 s: two
    probes, done at 4 s; without the rule a third starts at 4 s and ends at 6 s)."""
    from mpsfuzz.triage import ablation, reduce
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    big = Case("prod", (tensor((2, 1, 2, 1, 1, 2), gaps=(1, 1, 1, 1, 1, 2)),), (("dim", 1),))

    def run(prober):
        clock[0] = 100.0
        if stage == "reduce":
            reduce.reduce_case(big, None, (), prober, budget_s=5.0)
        else:
            hang = Failure(oracle="hang", kind="hang", severity="high", title="t", message="m", dedup_key=("hang",))
            ablation.explain(big, hang, (), prober, budget_s=5.0)
        return prober.probes, clock[0] - 100.0

    assert run(HangingProber(clock, 2.0)) == (2, 4.0)
    assert run(HangingProber(clock, 2.0, charged=False)) == (3, 6.0)


# -- one cause, one signature; two causes, two ------------------------------------------------

def test_one_cause_across_dtypes_and_shapes_gives_one_signature(pool_for):
    pool = pool_for("triu_tril_gt3d")
    starts = [Case("triu", (tensor((2, 3, 1, 2), "float16", permutation=(0, 1, 3, 2)),)),
              Case("triu", (tensor((1, 2, 1, 1, 3), "bfloat16", gaps=(1, 1, 1, 1, 2)),)),
              Case("triu", (tensor((3, 1, 2, 2), "float32", offset=2),), (("diagonal", -1),)),
              Case("triu", (tensor((2, 2, 2, 2, 2, 2), "float64"),), variant="method")]
    results = [run_triage(pool, c) for c in starts]
    signatures = {finding_of(r, pool).signature for r in results}
    assert len(signatures) == 1
    assert len({r.case for r in results}) == 1


def test_two_causes_on_one_op_give_two_signatures(pool_for):
    pool = pool_for("sigmoid_noncontig,sigmoid_half")
    strided = run_triage(pool, Case("sigmoid", (tensor((4, 3), "float32", permutation=TRANSPOSED),)))
    half = run_triage(pool, Case("sigmoid", (tensor((4, 3), "float16"),)))
    assert symptom_key(strided.case, strided.failure) == symptom_key(half.case, half.failure)
    assert "layout:0" in strided.explanation.conditions
    assert "dtypes:float16" in half.explanation.conditions and "layout:0" not in half.explanation.conditions
    assert finding_of(strided, pool).signature != finding_of(half, pool).signature
    assert "non-contiguous" in strided.explanation.text and "only float16" in half.explanation.text


# -- flakiness ------------------------------------------------------------------------------

def test_failure_that_needs_earlier_calls_is_flaky_and_not_reduced(pool_for):
    pool = pool_for("erfinv_stale_graph")
    case = Case("erfinv", (tensor((3, 2), "float32", distribution="uniform"),))
    # warm the worker with another shape, as a campaign does, so the case fails once
    Prober(pool, DEFAULT).failures(Case("erfinv", (tensor((5,), "float32", distribution="uniform"),)))
    failure = first_failure(pool, case)
    result = triage(case, failure, pool, DEFAULT, reruns=4)
    assert result.flaky
    assert result.reproducibility.failed == 0 and not result.reproducibility.cold_failed
    assert result.reduction is None and result.explanation is None and result.case == case
    finding = finding_of(result, pool)
    assert finding.status == "flaky" and finding.signature_key[-1] == "flaky"


def test_failure_on_every_other_call_is_flaky_with_its_rate(pool_for):
    pool = pool_for("digamma_every_other")
    case = Case("digamma", (tensor((3,), "float32", distribution="positive"),))
    failures = []
    for _ in range(2):  # it fails on one of two calls
        failures += Prober(pool, ("values",)).failures(case)[0]
    result = triage(case, failures[0], pool, ("values",), reruns=4)
    assert result.flaky and result.reproducibility.failed == 2 and result.reproducibility.runs == 4
    assert result.reproducibility.to_json()["rate"] == 0.5


def test_layout_failure_that_reduces_to_contiguous_inputs_is_flaky_not_a_layout_bug(pool_for):
    """Every other call is wrong: the layout oracle's two calls (awkward input, then its
    contiguous copy) disagree every time, deterministically. Reduced, the inputs are
    contiguous: the result depends on earlier calls, and one flaky finding per op holds
    it and the values oracle's flaky failures alike."""
    pool = pool_for("digamma_every_other")
    case = Case("digamma", (tensor((4, 3), "float32", distribution="positive", gaps=(1, 2)),))
    oracles = ("values", "layout")
    failure = next(f for f in first_failures(pool, case, oracles) if f.oracle == "layout")
    result = triage(case, failure, pool, oracles, reruns=4)
    assert result.reproducibility.failed == 4 and result.reproducibility.state_dependent
    assert result.flaky and result.explanation is None
    assert all(t.is_contiguous() for t in result.case.materialize("cpu"))
    finding = finding_of(result, pool)
    assert finding.status == "flaky" and finding.signature_key == ["digamma", "flaky"]
    values_failure = next(f for _ in range(2) for f in Prober(pool, ("values",)).failures(result.case)[0])
    values_flaky = Finding.create(result.case, values_failure, target_name=pool.target_name,
                                  target_spec=FAULT_TARGET, device=pool.device, flaky=True)
    assert values_flaky.signature == finding.signature
    from mpsfuzz.reports.corpus_views import why
    finding.reproducibility = result.reproducibility.to_json()
    assert "two calls on the same contiguous inputs differ" in why(finding)


def first_failures(pool, case: Case, oracles) -> list:
    failures, _, _ = Prober(pool, oracles).failures(case)
    assert failures, f"no failure on {case.describe()}"
    return failures


def test_sign_bug_is_explained_by_negative_values(pool_for):
    pool = pool_for("lgamma_negative")
    big = Case("lgamma", (tensor((3, 4), "float32", distribution="normal", permutation=(1, 0)),))
    result = run_triage(pool, big)
    assert "negative" in result.explanation.conditions and "layout:0" not in result.explanation.conditions
    assert "only when an input holds negative values" in result.explanation.text
    (minimal,) = result.case.inputs
    assert minimal.shape == () and minimal.layout == Layout()
    probe = next(p for p in result.explanation.probes if p.feature == "negative")
    assert probe.question == "non-negative values" and probe.necessary
