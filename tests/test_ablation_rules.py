"""Ablation rules that hold whatever the target: the divisibility condition (a kernel
that handles K elements a thread and skips the tail) and "passes" verdicts that must hold
for fresh values too (a value-dependent failure must not be explained by luck).

A fake prober stands for the target: it fails a case by a rule of the test's choosing."""
from __future__ import annotations


from mpsfuzz.generation import kernels
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import Failure
from mpsfuzz.triage import ablation

from test_aliasing import FakeProber

WRONG = Failure(oracle="values", kind="wrong-values", severity="high", title="t", message="m",
                dedup_key=("wrong-values",))


def vector(n: int, *, seed: int = 7, dtype: str = "float32", layout: Layout = Layout()) -> Case:
    return Case("neg", (TensorRecipe((n,), dtype, layout, ValueRecipe(seed=seed)),))


def explain(case, fails):
    prober = FakeProber(fails)
    return ablation.explain(case, WRONG, (), prober), prober


def test_a_tail_skipped_past_multiples_of_four_is_named_with_its_width():
    explanation, _ = explain(vector(5), lambda c: c.inputs[0].shape[-1] % 4 != 0)
    assert "lastdim%4" in explanation.conditions
    assert "the last dim of `input` is not a multiple of 4 (5 here; 8 passes)" in explanation.text
    assert ablation.holds("lastdim%4", vector(6)) and not ablation.holds("lastdim%4", vector(8))
    # the probes: rounding to 16 passes, to 2 (6) fails, to 4 (8) passes, 9 fails again
    sizes = [p.question for p in explanation.probes if p.feature.startswith("lastdim%")]
    assert sizes == ["the last dim of `input` a multiple of 16", "the last dim of `input` a multiple of 2",
                     "the last dim of `input` a multiple of 4", "the last dim of `input` 9 (not a multiple of 4 either)"]


def test_a_failure_of_small_sizes_is_not_called_a_divisibility_bug():
    # 5 fails, 8 and 16 pass, but so does 9: the size, not its remainder, matters
    explanation, _ = explain(vector(5), lambda c: c.inputs[0].shape[-1] < 8)
    assert not any(c.startswith("lastdim%") for c in explanation.conditions), explanation.conditions


def test_a_failure_that_does_not_care_costs_one_divisibility_probe():
    explanation, _ = explain(vector(5), lambda c: True)
    assert [p.feature for p in explanation.probes if p.feature.startswith("lastdim%")] == ["lastdim%16"]
    assert explanation.conditions == ()


def test_a_dtype_that_passes_by_luck_of_its_values_is_not_called_passing():
    # float64 passes with the minimal case's own values only: fresh values fail
    lucky = vector(3, seed=7)
    explanation, prober = explain(lucky, lambda c: not (c.inputs[0].dtype == "float64" and c.inputs[0].values.seed == 7))
    assert not any(c.startswith("dtypes:") for c in explanation.conditions), explanation.conditions
    assert "all float dtypes" in explanation.text
    assert any(c.inputs[0].dtype == "float64" and c.inputs[0].values.seed != 7 for c in prober.seen)


def test_a_layout_that_passes_by_luck_is_not_a_condition_but_one_that_always_passes_is():
    gapped = vector(3, layout=Layout(0, (2,), (), ()))
    luck, _ = explain(gapped, lambda c: not (c.inputs[0].layout.is_plain() and c.inputs[0].values.seed == 7))
    assert "layout:0" not in luck.conditions
    real, _ = explain(gapped, lambda c: not c.inputs[0].layout.is_plain())
    assert "layout:0" in real.conditions


def test_a_kernel_declaration_says_which_cases_lie_outside_it():
    spec = kernels.spec_of(lambda x: x, reference=lambda x: x, name="k",
                           inputs=[kernels.tensor(dtypes=["float32"], min_dims=1, multiple_of=(-1, 4),
                                                  contiguous=True)])
    inside = Case("k", (TensorRecipe((2, 8), "float32", Layout(), ValueRecipe(seed=1)),))
    assert spec.outside(inside) is None
    for shape, dtype, layout, why in [((), "float32", Layout(), "0 dims"), ((2, 6), "float32", Layout(), "multiple of 4"),
                                      ((2, 8), "float16", Layout(), "float16"),
                                      ((2, 8), "float32", Layout(0, (), (1, 0), ()), "not contiguous")]:
        case = Case("k", (TensorRecipe(shape, dtype, layout, ValueRecipe(seed=1)),))
        assert why in (spec.outside(case) or ""), (shape, dtype, layout, spec.outside(case))


class SlowProber(FakeProber):
    """A FakeProber whose every run takes ``seconds`` (a large case on two busy cores)."""

    def __init__(self, fails, seconds):
        super().__init__(fails)
        self.seconds = seconds

    def classify(self, case, symptom):
        import time
        time.sleep(self.seconds)
        return super().classify(case, symptom)


def test_a_failure_needing_either_of_two_awkward_inputs_is_explained_by_layout_within_a_short_budget():
    """K or V awkward (flex_attention@huge's sequence-major K and V) fails; making one of
    them contiguous leaves the other: each single probe fails the same. Under a budget
    that allows two probes, all inputs made contiguous comes first and passes, so the
    layout is the condition, and the explanation never says that contiguous inputs fail
    too (the single probes, asked first, used it up and said so)."""
    awkward = Layout(permutation=(1, 0))
    case = Case("add", (TensorRecipe((4, 4), "float32", awkward, ValueRecipe(seed=1)),
                        TensorRecipe((4, 4), "float32", awkward, ValueRecipe(seed=2))))
    prober = SlowProber(lambda c: any(not r.layout.is_plain() for r in c.inputs), 0.1)
    explanation = ablation.explain(case, WRONG, (), prober, budget_s=0.15)
    assert "layout:any" in explanation.conditions, explanation.text
    assert "contiguous inputs fail too" not in explanation.text
