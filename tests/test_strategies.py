"""Case strategies: awkward inputs are common, arguments are validated up front, the
generated cases honour each op's declared constraints and the budget, and most of them
are valid calls on eager CPU."""
from __future__ import annotations

import collections
import functools
import re
import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpsfuzz.generation import catalogue, strategies
from mpsfuzz.generation import dtypes as dt

OPS = catalogue.all_ops()
QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
         HealthCheck.large_base_example]
pytestmark = [pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

# Ops of all three families; between them every dtype is accepted by some op.
STATS_OPS = ("add", "mul", "bitwise_and", "sqrt", "where", "abs",          # elementwise
             "sum", "amax", "cumsum", "var",                                # reduction
             "triu", "matmul", "mm", "linalg.solve", "linalg.vector_norm")  # linalg
# Hypothesis draws are correlated (it mutates earlier examples), so 400 draws cover the
# 16 dtypes less evenly than 400 independent ones: about 1 run in 15 misses one dtype.
STATS_EXAMPLES = 600


@functools.lru_cache(maxsize=None)
def campaign_stats() -> dict:
    """Draw STATS_EXAMPLES cases over STATS_OPS the way the engine does (through Hypothesis) and
    count what their materialised inputs look like. Deterministic (derandomize)."""
    counts: collections.Counter = collections.Counter()
    dtypes_seen: set[str] = set()
    families_seen: set[str] = set()

    @settings(max_examples=STATS_EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=QUIET)
    @given(st.data())
    def collect(data):
        op = data.draw(st.sampled_from(STATS_OPS))
        case = data.draw(strategies.cases(OPS[op]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tensors = case.materialize("cpu")
        counts["cases"] += 1
        counts["empty_cases"] += any(t.numel() == 0 for t in tensors)
        counts["high_rank_cases"] += any(t.dim() > 4 for t in tensors)
        for recipe, t in zip(case.inputs, tensors):
            counts["tensors"] += 1
            counts["non_contiguous"] += not t.is_contiguous()
            counts["awkward_layout"] += not recipe.layout.is_plain()
            dtypes_seen.add(recipe.dtype)
        families_seen.add(OPS[op].family)

    collect()
    return {"counts": counts, "dtypes": dtypes_seen, "families": families_seen}


def test_stats_run_covers_all_families_and_enough_cases():
    stats = campaign_stats()
    assert stats["families"] == {"elementwise", "reduction", "linalg"}
    assert stats["counts"]["cases"] >= 0.9 * STATS_EXAMPLES


def test_at_least_a_third_of_inputs_are_non_contiguous():
    counts = campaign_stats()["counts"]
    share = counts["non_contiguous"] / counts["tensors"]
    assert share >= 1 / 3, f"non-contiguous inputs: {share:.1%} of {counts['tensors']}"


def test_awkward_layouts_are_common():
    counts = campaign_stats()["counts"]
    # the engine's shrink target is plain, but a good share of inputs must be awkward
    assert counts["awkward_layout"] / counts["tensors"] >= 0.3
    assert counts["non_contiguous"] / counts["tensors"] >= 0.15


def test_zero_numel_inputs_are_common():
    counts = campaign_stats()["counts"]
    assert counts["empty_cases"] / counts["cases"] >= 0.03


def test_high_rank_inputs_are_common():
    counts = campaign_stats()["counts"]
    assert counts["high_rank_cases"] / counts["cases"] >= 0.03


def test_every_dtype_is_drawn():
    missing = set(dt.ALL_DTYPE_NAMES) - campaign_stats()["dtypes"]
    assert not missing


# -- validation -----------------------------------------------------------------------------

SPEC = OPS["add"]


@pytest.mark.parametrize("make,echo", [
    (lambda: strategies.cases(SPEC, max_side=0), "max_side=0"),
    (lambda: strategies.cases(SPEC, max_numel=0), "max_numel=0"),
    (lambda: strategies.cases(SPEC, min_rank=3, max_rank=2), "min_rank=3"),
    (lambda: strategies.cases(SPEC, min_rank=-1), "min_rank=-1"),
    (lambda: strategies.cases(SPEC, awkward_ratio=1.5), "awkward_ratio=1.5"),
    (lambda: strategies.cases(SPEC, mixed_dtype_ratio=-0.1), "mixed_dtype_ratio=-0.1"),
    (lambda: strategies.layouts((2, 3), awkward_ratio=2), "awkward_ratio=2"),
    (lambda: strategies.layouts((2, 3), awkward_ratio=-0.5), "awkward_ratio=-0.5"),
    (lambda: strategies.tensor_recipes((2,), "float32", awkward_ratio=3), "awkward_ratio=3"),
    (lambda: strategies.value_recipes("float32", max_specials=-1), "max_specials=-1"),
    (lambda: strategies.value_recipes("float8"), "'float8'"),
    (lambda: strategies.tensor_recipes((2,), "float8"), "'float8'"),
    (lambda: strategies.dtype_names(allowed=()), "allowed=()"),
])
def test_bad_arguments_raise_value_error_echoing_them(make, echo):
    # raised when the strategy is built, not when it is first drawn from
    with pytest.raises(ValueError, match=re.escape(echo)):
        make()


def test_good_arguments_are_accepted():
    for make in (lambda: strategies.cases(SPEC, max_side=1, max_numel=1, min_rank=0, max_rank=0),
                 lambda: strategies.layouts((2, 3), awkward_ratio=0),
                 lambda: strategies.layouts((), awkward_ratio=1),
                 lambda: strategies.value_recipes("bool", max_specials=0),
                 lambda: strategies.dtype_names(allowed=("float", "int8"))):
        assert make() is not None


# -- constraints of the ops -----------------------------------------------------------------

def _meta(shape, dtype=torch.float32):
    return torch.empty(shape, dtype=dtype, device="meta")


def _check_constraints(case) -> None:
    spec = OPS[case.op]
    shapes = [r.shape for r in case.inputs]
    names = [r.dtype for r in case.inputs]
    assert len(case.inputs) == spec.arity
    for i, name in enumerate(names):
        allowed = spec.input_dtypes[i] if i < len(spec.input_dtypes) else None
        assert name in (allowed or spec.dtypes), (case.op, i, name)
    if case.op in ("linalg.solve", "linalg.inv", "linalg.cholesky", "linalg.det"):
        a = shapes[0]
        assert len(a) >= 2 and a[-1] == a[-2], shapes
    if case.op == "linalg.solve":
        a, b = shapes
        n = a[-1]
        assert (b[-2] if len(b) >= 2 else b[0]) == n, shapes
        assert names[0] == names[1]
    if case.op == "mm":
        a, b = shapes
        assert len(a) == len(b) == 2 and a[1] == b[0], shapes
    if case.op == "bmm":
        a, b = shapes
        assert len(a) == len(b) == 3 and a[0] == b[0] and a[2] == b[1], shapes
    if case.op == "matmul":
        torch.matmul(_meta(shapes[0]), _meta(shapes[1]))  # raises if the shapes do not fit
    if case.op == "where":
        assert names[0] == "bool"
    if case.op in ("add", "mul", "sub", "bitwise_and", "where", "atan2", "maximum"):
        torch.broadcast_shapes(*shapes)  # raises if they do not broadcast
    if case.op in ("triu", "tril"):
        assert len(shapes[0]) >= 2
    if case.op in ("sum", "amax", "cumsum", "var"):
        rank = len(shapes[0])
        dims = dict(case.kwargs).get("dim")
        for d in (dims if isinstance(dims, tuple) else () if dims is None else (dims,)):
            assert -max(rank, 1) <= d < max(rank, 1), (shapes, dims)
    if case.op in ("linalg.inv", "linalg.solve", "linalg.cholesky"):
        assert not any(r.values.specials for r in case.inputs)  # well-conditioned, finite


CONSTRAINED_OPS = ("linalg.solve", "linalg.inv", "linalg.cholesky", "linalg.det", "mm", "bmm",
                   "matmul", "where", "add", "mul", "bitwise_and", "atan2", "triu", "sum",
                   "amax", "cumsum", "var")


@pytest.mark.parametrize("op", CONSTRAINED_OPS)
def test_cases_honour_op_constraints(op):
    @settings(max_examples=60, deadline=None, database=None, suppress_health_check=QUIET)
    @given(strategies.cases(OPS[op]))
    def check(case):
        assert case.op == op
        _check_constraints(case)

    check()


def test_mixed_dtypes_happen_sometimes_for_mm():
    names = []

    @settings(max_examples=300, deadline=None, database=None, derandomize=True,
              suppress_health_check=QUIET)
    @given(strategies.cases(OPS["mm"], mixed_dtype_ratio=0.5))
    def collect(case):
        names.append((case.inputs[0].dtype, case.inputs[1].dtype))

    collect()
    mixed = sum(a != b for a, b in names)
    assert 0 < mixed < len(names)


def _budget_violations(op: str) -> list:
    bad = []

    @settings(max_examples=40, deadline=None, database=None, derandomize=True,
              suppress_health_check=QUIET)
    @given(strategies.cases(OPS[op], max_rank=3, max_side=3, max_numel=64, allow_empty=False))
    def check(case):
        for r in case.inputs:
            if (r.rank > max(3, OPS[op].min_rank) or (r.shape and max(r.shape) > 3)
                    or r.numel == 0 or r.numel > 64):
                bad.append(r.shape)

    check()
    return bad


@pytest.mark.parametrize("op", ["add", "where", "sum", "amax", "cumsum", "mm", "bmm", "mv",
                                "dot", "outer", "bitwise_and"])
def test_cases_honour_the_budget(op):
    assert _budget_violations(op) == []


@pytest.mark.parametrize("op", ["triu", "matmul", "linalg.inv"])
def test_matrix_ops_honour_max_rank(op):
    assert _budget_violations(op) == []


@pytest.mark.parametrize("op", ["linalg.solve", "linalg.cholesky"])
def test_well_conditioned_inputs_stay_well_conditioned(op):
    """spd/diag_dominant inputs keep their property whatever the layout (no expanded
    matrix dims, which would repeat rows or columns and make the matrix singular)."""
    spec = OPS[op]
    bad = []

    @settings(max_examples=150, deadline=None, database=None, derandomize=True,
              suppress_health_check=QUIET)
    @given(strategies.cases(spec))
    def run(case):
        a = case.inputs[0].materialize("cpu")
        wide = a.to(torch.complex128 if a.is_complex() else torch.float64)
        if op == "linalg.cholesky":
            info = torch.linalg.cholesky_ex(wide).info
        else:
            info = torch.linalg.inv_ex(wide).info
        if a.numel() and bool((info != 0).any()):
            bad.append(case.inputs[0])

    run()
    assert bad == []


def test_cached_strategies_tell_equal_options_of_other_types_apart():
    """1 == 1.0 == True and 0.0 == -0.0 hash alike: keyed on values alone, a norm's cached
    (1.0, 2.0) answered a later index choice (1, 2), and a gru case drew a float index
    (a generation error that showed only in some test orders)."""
    from mpsfuzz.generation.opspec import integers_once, sampled_once, unique_lists_once
    floats, ints = sampled_once((1.0, 2.0)), sampled_once((1, 2))
    assert [type(x) for x in ints.elements] == [int, int] and [type(x) for x in floats.elements] == [float, float]
    assert sampled_once((1, 2)) is ints                                   # still cached
    sampled_once((True, False))
    assert [type(x) for x in sampled_once((1, 0)).elements] == [int, int]
    assert [repr(x) for x in sampled_once((-0.0,)).elements] == ["-0.0"]
    assert [repr(x) for x in sampled_once((0.0,)).elements] == ["0.0"]
    assert integers_once(0, 3) is not integers_once(0.0, 3.0)
    lists = unique_lists_once((1, 2), min_size=1, max_size=2)
    assert lists is not unique_lists_once((1.0, 2.0), min_size=1, max_size=2)
