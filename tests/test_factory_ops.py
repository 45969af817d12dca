"""The factory family (issue 38: ``generation/ops/factory.py``): its formula references
(``oracles/jury/formulas/factories.py``) against eager CPU on drawn cases of every op and
dtype, and against wrong values; the builders' reach (int64 values past 2^32, steps 0
and 1, fills at the dtype's extremes, unambiguous integer truncation); and the
``arange_wraps_int64_past_2_32`` fault, which a short campaign of the family finds,
minimises and reproduces."""
from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch

from mpsfuzz.generation import catalogue, strategies
from mpsfuzz.generation.ops import factory
from mpsfuzz.generation.recipes import Case, TensorRecipe, ValueRecipe
from mpsfuzz.oracles.jury.formulas import FORMULAS
from mpsfuzz.oracles.jury.formulas.factories import arange_length
from mpsfuzz.oracles.jury.references import NotApplicable
from mpsfuzz.testing.faults import FAULTS, FaultTarget

OPS = catalogue.families()["factory"]
SEEDS = (1, 2, 3)
CASES = 120

# How far eager CPU's floating result may be from the formula rounded once, in units of
# the dtype's eps, and of what: a range (arange, linspace) accumulates its step in the
# dtype, so its error scales with the largest value (a linspace of float32 from -1000 to
# 1000 in 7 steps gives -3.05e-5 where the formula says 0); logspace's relative to each
# value, times the exponent's magnitude in units of e (its exponent is a sum rounded in
# float64, its start first rounded to the dtype: base ** x moves by |x ln base| times
# x's relative error); the fills and eye are exact.
TOLERANCE = {"arange": ("scale", 8), "linspace": ("scale", 8), "logspace": ("value", 8)}


def disagreement(op: str, reference: torch.Tensor, eager: torch.Tensor, kwargs: dict) -> str | None:
    """Why ``reference`` (the formula: floating values in float64) and eager CPU's result
    disagree, or None where they agree (NaN equals NaN, -0.0 is not 0.0 for the fills)."""
    if tuple(reference.shape) != tuple(eager.shape):
        return f"shape {tuple(reference.shape)}, eager {tuple(eager.shape)}"
    if not (eager.is_floating_point() or eager.is_complex()):
        if reference.is_floating_point() or not torch.equal(reference.to(eager.dtype), eager):
            return f"{reference.tolist()} != {eager.tolist()}"
        return None
    wide_dtype = torch.complex128 if eager.is_complex() else torch.float64
    r, e = reference.to(wide_dtype).reshape(-1), eager.to(wide_dtype).reshape(-1)
    if not torch.equal(r.isnan(), e.isnan()):
        return "NaNs differ"
    r, e = r[~e.isnan()], e[~e.isnan()]
    if not torch.equal(r.isinf(), e.isinf()) or not torch.equal(r[r.isinf()], e[e.isinf()]):
        return "infinities differ"
    finite = ~e.isinf()
    r, e = r[finite], e[finite]
    how, units = TOLERANCE.get(op, ("exact", 0))
    if how == "exact":
        if not torch.equal(r, e) or not torch.equal(torch.signbit(r.real), torch.signbit(e.real)):
            return f"{r.tolist()[:8]} != {e.tolist()[:8]}"
        return None
    eps = torch.finfo(eager.dtype).eps
    if how == "scale":
        bound = units * eps * max(1.0, float(e.abs().max())) if e.numel() else 0.0
    else:
        ln_base = abs(math.log(abs(kwargs.get("base", 10.0))))
        ends = (kwargs["start"], kwargs["end"])
        rounded = sum(abs(float(torch.tensor(v, dtype=eager.dtype)) - v) for v in ends)   # start, end in the dtype
        exponent = max(abs(v) for v in ends) * ln_base
        relative = units * (eps + torch.finfo(torch.float64).eps * (1 + exponent)) + rounded * ln_base
        bound = relative * e.abs() + torch.finfo(eager.dtype).tiny
    off = (r - e).abs()
    if bool((off > bound).any()):
        worst = int(torch.argmax(off - bound))
        return f"off by {float(off[worst]):.3g} at {worst}: formula {r[worst].item()!r}, eager {e[worst].item()!r}"
    return None


def drawn_cases(op: str, seed: int) -> list[Case]:
    return strategies.example_cases(catalogue.get(op), CASES, seed=seed)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("op", OPS)
def test_the_formula_agrees_with_eager_cpu_on_drawn_cases(op, seed):
    spec, reference = catalogue.get(op), FORMULAS[op]
    compared, dtypes = 0, set()
    for case in drawn_cases(op, seed):
        inputs, kwargs = case.materialize("cpu"), case.kwargs_dict()
        eager = spec.fn(*inputs, **kwargs)
        try:
            ref = reference(list(inputs), dict(kwargs))
        except NotApplicable as exc:
            pytest.fail(f"{case.describe()}: the formula declines a drawn case: {exc}")
        problem = disagreement(op, ref, eager, kwargs)
        assert problem is None, f"{case.describe()}: {problem}"
        compared += 1
        dtypes.add(eager.dtype)
    assert compared >= CASES // 2
    assert len(dtypes) >= 3, dtypes


def wrong(t: torch.Tensor) -> torch.Tensor:
    """``t`` with its last element moved well past any tolerance (a bool flipped)."""
    out = t.clone(memory_format=torch.contiguous_format)
    flat = out.view(-1)
    if out.dtype == torch.bool:
        flat[-1] = ~flat[-1]
    elif out.is_floating_point() or out.is_complex():
        v = flat[-1].item()
        finite = flat[torch.isfinite(flat)]
        scale = float(finite.abs().max()) if finite.numel() else 1.0     # (a range's tolerance grows with it)
        flat[-1] = 1.0 if v != v or abs(v) == math.inf else (v * 2 + 3 + scale / 2 if abs(v) < 1e30 else v / 4)
    else:
        info = torch.iinfo(out.dtype)
        v = int(flat[-1])
        flat[-1] = v - 1 if v > info.min else v + 1
    return out


@pytest.mark.parametrize("op", OPS)
def test_the_formula_disagrees_with_a_wrong_value(op):
    spec, reference = catalogue.get(op), FORMULAS[op]
    checked = 0
    for case in drawn_cases(op, 1):
        inputs, kwargs = case.materialize("cpu"), case.kwargs_dict()
        eager = spec.fn(*inputs, **kwargs)
        if not eager.numel():
            continue
        ref = reference(list(inputs), dict(kwargs))
        assert disagreement(op, ref, wrong(eager), kwargs) is not None, case.describe()
        checked += 1
    assert checked >= 10


def test_arange_reference_by_hand():
    x64 = torch.zeros((), dtype=torch.int64)
    got = FORMULAS["arange"]([x64], {"start": 2**32 - 2, "end": 2**32 + 5, "step": 3})
    assert got.tolist() == [2**32 - 2, 2**32 + 1, 2**32 + 4]
    got = FORMULAS["arange"]([x64], {"start": 2**63 - 3, "end": 2**63 - 1})
    assert got.tolist() == [2**63 - 3, 2**63 - 2]
    got = FORMULAS["arange"]([x64], {"start": 5, "end": -6, "step": -4})
    assert got.tolist() == [5, 1, -3]
    # the documented length ceil((end - start) / step), in double for a float result
    xf = torch.zeros((), dtype=torch.float64)
    got = FORMULAS["arange"]([xf], {"start": 0.0, "end": 0.3, "step": 0.1})
    assert got.shape == (3,) and got.tolist() == pytest.approx([0.0, 0.1, 0.2])
    assert arange_length(0, 10, 3, torch.int64) == 4 and arange_length(0, -10, -3, torch.int32) == 4


def test_linspace_and_logspace_references_by_hand():
    x = torch.zeros((), dtype=torch.float64)
    assert FORMULAS["linspace"]([x], {"start": 1.0, "end": 2.0, "steps": 0}).shape == (0,)
    assert FORMULAS["linspace"]([x], {"start": 1.5, "end": 2.0, "steps": 1}).tolist() == [1.5]
    assert FORMULAS["linspace"]([x], {"start": -1.0, "end": 1.0, "steps": 5}).tolist() == [-1, -0.5, 0, 0.5, 1]
    # an integer dtype truncates the exact value toward zero
    xi = torch.zeros((), dtype=torch.int32)
    assert FORMULAS["linspace"]([xi], {"start": -3, "end": 3, "steps": 5}).tolist() == [-3, -1, 0, 1, 3]
    # 11 to -5 in 39 steps: position 19 is exactly 3 (eager CPU's vectorised loop says 2;
    # the builders never draw such a call: see factory.unambiguous_truncation)
    xl = torch.zeros((), dtype=torch.int64)
    assert FORMULAS["linspace"]([xl], {"start": 11, "end": -5, "steps": 39})[19].item() == 3
    assert not factory.unambiguous_truncation(11, -5, 39)
    got = FORMULAS["logspace"]([x], {"start": 0.0, "end": 3.0, "steps": 4, "base": 2.0})
    assert got.tolist() == [1.0, 2.0, 4.0, 8.0]
    assert FORMULAS["logspace"]([xl], {"start": 0, "end": 2, "steps": 5}).tolist() == [1, 3, 10, 31, 100]
    got = FORMULAS["logspace"]([x], {"start": 0.0, "end": 3.0, "steps": 4, "base": -2.0})
    assert got.tolist() == [1.0, -2.0, 4.0, -8.0]


def test_full_eye_and_like_references_by_hand():
    x32 = torch.zeros((), dtype=torch.int32)
    assert FORMULAS["full"]([x32], {"size": (2,), "fill_value": -3.5}).tolist() == [-3, -3]
    got = FORMULAS["full"]([torch.zeros(())], {"size": (2, 1), "fill_value": -0.0})
    assert got.dtype == torch.float64 and torch.signbit(got).all()
    # dtype=None: torch infers int64 from an int fill
    got = FORMULAS["full"]([torch.zeros(())], {"size": (1,), "fill_value": 2**63 - 1, "dtype": None})
    assert got.dtype == torch.int64 and got.tolist() == [2**63 - 1]
    # a fill torch refuses for the dtype
    with pytest.raises(NotApplicable):
        FORMULAS["full"]([x32], {"size": (1,), "fill_value": 2**31})
    # a float16 fill is the value cast (rounded) to float16, handed back in float64
    got = FORMULAS["full"]([torch.zeros((), dtype=torch.float16)], {"size": (1,), "fill_value": 0.1})
    assert got.item() == torch.tensor(0.1, dtype=torch.float16).item()
    assert FORMULAS["eye"]([x32], {"n": 2, "m": 3}).tolist() == [[1, 0, 0], [0, 1, 0]]
    assert FORMULAS["eye"]([x32], {"n": 0}).shape == (0, 0)
    y = torch.ones(2, 3, dtype=torch.float64).t()
    got = FORMULAS["full_like"]([y], {"fill_value": 300, "dtype": torch.int16})
    assert got.dtype == torch.int16 and got.shape == (3, 2) and bool((got == 300).all())
    assert FORMULAS["ones_like"]([y], {"dtype": torch.bool}).all()


# -- the builders --------------------------------------------------------------------------

def _kwargs(op: str, n: int = 400, seed: int = 0) -> list[tuple[str, dict]]:
    return [(c.inputs[0].dtype, c.kwargs_dict()) for c in strategies.example_skeletons(
        catalogue.get(op), n, seed=seed)]


def test_arange_draws_int64_values_past_2_32_with_small_lengths():
    past, lengths = 0, []
    for dtype, kw in _kwargs("arange"):
        start, end, step = kw.get("start", 0), kw["end"], kw.get("step", 1)
        result = kw.get("dtype", torch.int64 if dtype == "int64" else None)
        n = arange_length(start, end, step, torch.int64 if dtype == "int64" else torch.float64)
        lengths.append(n)
        if dtype == "int64" and result in (None, torch.int64) and n and \
                max(abs(start), abs(start + (n - 1) * step)) >= 2**32:
            past += 1
            assert n <= 64
    assert past >= 3 and max(lengths) <= factory.MAX_NUMEL
    assert any(kw.get("step", 1) < 0 for _, kw in _kwargs("arange"))


def test_linspace_draws_zero_one_and_hundreds_of_steps_and_unambiguous_integers():
    drawn = _kwargs("linspace")
    steps = {kw["steps"] for _, kw in drawn}
    assert {0, 1} <= steps and max(steps) >= 255
    for dtype, kw in drawn:
        if dtype in factory.INTS and kw.get("dtype", "dummy") is not None:
            assert factory.unambiguous_truncation(kw["start"], kw["end"], kw["steps"]), kw


def test_full_draws_the_dtype_extremes():
    fills = {(dtype, kw["fill_value"]) for seed in (0, 1) for dtype, kw in _kwargs("full", 600, seed)}
    values = {v for _, v in fills if not (isinstance(v, float) and v != v)}
    assert {2**63 - 1, -2**63} & values and {math.inf, -math.inf} & values
    assert any(isinstance(v, float) and v != v for _, v in fills)


def test_unambiguous_truncation():
    assert factory.unambiguous_truncation(0, 10, 21)       # step 1/2: exact in double
    assert factory.unambiguous_truncation(0, 10, 4)        # 10/3: no integer strictly inside
    assert not factory.unambiguous_truncation(0, 10, 7)    # 10/6 * 3 = 5 exactly, 5/3 no binary fraction
    for start, end, steps in ((0, 10, 7), (11, -5, 39), (-272, 238, 233)):
        exact = [math.trunc(Fraction(start) + Fraction(i * (end - start), steps - 1)) for i in range(steps)]
        assert not factory.unambiguous_truncation(start, end, steps) or \
            torch.linspace(start, end, steps, dtype=torch.int64).tolist() == exact


# -- the fault ------------------------------------------------------------------------------

FAULT = "arange_wraps_int64_past_2_32"


@pytest.mark.parametrize("call,fires", [
    (lambda: torch.arange(2**32 - 2, 2**32 + 3), True),
    (lambda: torch.arange(-2**32 - 1, -2**32 + 3, 2), True),
    (lambda: torch.arange(2**40, 2**40 + 3, out=torch.empty(0, dtype=torch.int64)), True),
    (lambda: torch.arange(5, -5, -2**33), False),               # one value, 5
    (lambda: torch.arange(2**32 - 10, 2**32 - 2), False),       # below 2^32
    (lambda: torch.arange(2**32, 2**32 + 3, dtype=torch.float64), False),
    (lambda: torch.arange(2**31, 2**31 + 3), False),
])
def test_the_fault_fires_on_its_trigger_only(call, fires):
    target = FaultTarget([FAULT])
    got, want = target.run(call), call()
    assert bool(target.fired[FAULT]) == fires
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got, want) != fires
    if fires:   # the low 32 bits, read as a signed int32
        assert got.tolist() == [((v + 2**31) % 2**32) - 2**31 for v in want.tolist()]


def test_the_jury_blames_the_target_by_the_formula():
    from mpsfuzz.oracles.judge import judge_case
    case = Case("arange", (TensorRecipe(shape=(), dtype="int64", values=ValueRecipe("small_int", seed=1)),),
                (("end", 2**32 + 4), ("start", 2**32 - 1)), "functional")
    result = judge_case(case, FaultTarget([FAULTS[FAULT]]), ("values", "arbiter"))
    (failure,) = [f for f in result.failures if f["oracle"] == "values"]
    jury = failure["details"]["jury"]
    assert jury["verdict"] == "target-wrong" and "formula" in jury["decided_by"], jury


@pytest.mark.slow
def test_a_campaign_of_the_family_finds_minimises_and_reproduces_the_fault(tmp_path):
    from test_fault_campaigns import FAULT_TARGET, assert_repro_proves_the_fault, findings_in, mpsfuzz
    corpus = tmp_path / "corpus"
    run = mpsfuzz("run", "--ops", "factory", "--target", FAULT_TARGET, "--max-cases", "800", "--seed", "1",
                  "--corpus", str(corpus), "--timeout", "3", "--shrink-budget", "20", "--max-findings", "1",
                  "--no-progress", faults=FAULT, cwd=tmp_path, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    (finding,) = findings_in(corpus)
    assert (finding["op"], finding["oracle"], finding["status"]) == ("arange", "values", "new"), run.stdout
    case = finding["case"]
    assert case["inputs"][0]["dtype"] == "int64" and "dtypes:int64" in finding["conditions"]
    kwargs = dict(case["kwargs"])
    start, end, step = kwargs.get("start", 0), kwargs["end"], kwargs.get("step", 1)
    n = arange_length(start, end, step, torch.int64)
    # minimal: a few elements, one of them past 2^32
    assert 1 <= n <= 4 and max(abs(start), abs(start + (n - 1) * step)) >= 2**32, kwargs
    assert_repro_proves_the_fault(finding, FAULT, tmp_path)
