"""Two boundaries in one sibling (issue 38: pytorch#153210, CUDA addcmul of int64, int16
and int32 operands with ``value`` ~1e18; #153209, cosine_similarity of a float64 0-d
operand beside float16 NaNs with ``eps=-9.7e23``). A boundary sibling moved one thing, so
mixed dtypes and an extreme argument were never drawn together; one sibling in three of
a kind in a pair of strategies.COMPOUNDS now carries the pair, the dtypes mixed first."""
from __future__ import annotations

import warnings
from collections import Counter
from types import SimpleNamespace

import pytest

from mpsfuzz.generation import catalogue, dtypes as dt, strategies
from mpsfuzz.generation.arg_extremes import extreme_arguments, number_dtype, holds as number_holds
from mpsfuzz.generation.input_classes import ARGUMENT_EXTREME, MIXED_DTYPES, NEG_VIEW, drawn
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.generation.strategies import COMPOUNDS, boundary_sibling, example_cases, siblings
from mpsfuzz.oracles import DEFAULT
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.testing.faults import FaultTarget
from mpsfuzz.triage.ablation import MIXED_DTYPES as MIXED_CONDITION, holds

from test_fault_campaigns import assert_repro_proves_the_fault, one_fault_campaign

warnings.filterwarnings("ignore", message="ComplexHalf support is experimental")

FAULT = "addcmul_mixed_integers_with_a_huge_value_in_the_narrowest"


def _mixed(case: Case) -> bool:
    return len({r.dtype for r in case.inputs}) > 1


def _compound_off(monkeypatch):
    monkeypatch.setattr(strategies, "COMPOUND_THIRDS", 0)


def _boundaries(op: str, n: int = 300, seed: int = 1) -> list[tuple[Case, int, Case | None]]:
    """(case, salt, its boundary sibling) for ``n`` drawn cases of ``op``, the salts a
    campaign's siblings give (strategies.siblings: odd roots only)."""
    spec = catalogue.get(op)
    out = []
    for case in example_cases(spec, n, seed=seed):
        for salt in (1, 2, 3):
            root = salt
            for r in case.inputs:
                root = strategies._mix(root, r.values.seed)
            if root % 2:
                out.append((case, root, boundary_sibling(spec, case, root)))
    return out


def _mixed_integers_with_an_extreme_value(case: Case) -> bool:
    return _mixed(case) and all(r.dtype in dt.INTEGRAL for r in case.inputs) and "value" in extreme_arguments(case)


def test_addcmul_siblings_carry_mixed_integer_dtypes_and_an_extreme_value_together():
    spec = catalogue.get("addcmul")
    # (seeds 1-3: which cases a seed draws moves with the source of the modules loaded,
    # as Hypothesis draws constants it finds there; 11-27 of 900 a seed, 0 before)
    both = [s for seed in (1, 2, 3) for c in example_cases(spec, 300, seed=seed) for salt in (1, 2, 3)
            for s in siblings(spec, c, salt, 1, boundaries=True) if _mixed_integers_with_an_extreme_value(s)]
    assert len(both) >= 20, len(both)
    for s in both:
        # the extreme is one the mixed case's number dtype holds (not an undefined conversion)
        assert number_holds(number_dtype(s), dict(s.kwargs)["value"]), s
        assert {MIXED_DTYPES, ARGUMENT_EXTREME} <= drawn(spec, s)       # what coverage counts
        assert holds(MIXED_CONDITION, s) and holds("extreme:value", s)   # what ablation matches


def test_cosine_similarity_siblings_carry_mixed_dtypes_beside_a_0d_operand_and_an_extreme_eps():
    both = [s for _, _, s in _boundaries("cosine_similarity") if s is not None and _mixed(s)
            and "eps" in extreme_arguments(s) and any(r.rank == 0 for r in s.inputs)
            and any(r.rank > 0 for r in s.inputs)]
    assert len(both) >= 10, len(both)


def test_a_compound_is_the_single_sibling_moved_once_more_and_the_rest_are_unchanged(monkeypatch):
    """Where compounds are off (COMPOUND_THIRDS = 0) each salt gives the sibling it gave
    before compounds were drawn; with them on, at least half of these are unchanged and
    each one that changed carries mixed dtypes and a second kind of its pair, or a third
    change as well (strategies.THIRD_KIND_HALVES: pytorch#153209's three at once)."""
    ops = ("addcmul", "cosine_similarity", "fmax", "add", "linalg.solve")
    on = {(op, c, salt): s for op in ops for c, salt, s in _boundaries(op, 120)}
    _compound_off(monkeypatch)
    off = {(op, c, salt): s for op in ops for c, salt, s in _boundaries(op, 120)}
    assert on.keys() == off.keys()
    changed = [k for k in on if on[k] != off[k]]
    assert changed and len(changed) <= len(on) // 2, (len(changed), len(on))
    for key in changed:
        op, case, _ = key
        single, both = off[key], on[key]
        kinds = _kinds_added(catalogue.get(op), case, both)
        assert MIXED_DTYPES in kinds and len(kinds) in (2, 3) and "empty" not in kinds, (key, kinds)
        # the single kind drawn is one of the pair, and the compound carries it too
        assert _kinds_added(catalogue.get(op), case, single) < kinds, (key, single)


def _kinds_added(spec, case: Case, sibling: Case) -> set[str]:
    """The boundary kinds ``sibling`` carries that ``case`` has not."""
    kinds = set(drawn(spec, sibling) - drawn(spec, case)) & set(strategies.BOUNDARIES)
    if any(r.numel == 0 for r in sibling.inputs) and not any(r.numel == 0 for r in case.inputs):
        kinds.add("empty")
        kinds.discard("empty-other")
    if _nan_added(case, sibling):
        # (an op whose result must carry the NaN gets the nan-entry kind; a NaN in another
        # op's input is a compound's third change alone, strategies.NAN_VALUE)
        kinds.add("nan-entry" if spec.nan_propagates else strategies.NAN_VALUE)
    return kinds


def _nan_added(case: Case, sibling: Case) -> bool:
    had = any(n == "nan" for _, n in case.inputs[0].values.specials)
    return not had and any(n == "nan" for _, n in sibling.inputs[0].values.specials)


def test_the_boundary_sibling_is_a_function_of_the_case_and_the_salt():
    spec = catalogue.get("addcmul")
    for case, salt, sibling in _boundaries("addcmul", 60):
        assert boundary_sibling(spec, case, salt) == sibling
        assert siblings(spec, case, salt, 2, boundaries=True) == siblings(spec, case, salt, 2, boundaries=True)


def test_each_single_kind_is_still_drawn_alone():
    """Compounds take one sibling in three of their kinds at most: every kind is still
    the only change of most of the siblings that carry it."""
    alone, carried = Counter(), Counter()
    for op in ("addcmul", "cosine_similarity", "fmax", "linalg.solve", "mm", "max_pool2d"):
        spec = catalogue.get(op)
        for case, _, s in _boundaries(op, 100):
            if s is None:
                continue
            kinds = _kinds_added(spec, case, s)
            carried.update(kinds)
            if len(kinds) == 1:
                alone.update(kinds)
    for kind in (MIXED_DTYPES, ARGUMENT_EXTREME, NEG_VIEW, "empty", "nan-entry"):
        assert alone[kind] >= carried[kind] / 2 > 0, (kind, alone, carried)
    assert carried[MIXED_DTYPES] > alone[MIXED_DTYPES]       # compounds were drawn


def test_every_compound_pair_names_boundary_kinds():
    assert all(a in strategies.BOUNDARIES and b in strategies.BOUNDARIES for a, b in COMPOUNDS)
    assert ("mixed-dtypes", "argument-extreme") in COMPOUNDS


def _addcmul(dtypes, value, shapes=((3, 4), (3, 4), (3, 4))) -> Case:
    return Case("addcmul", tuple(TensorRecipe(shape, d, Layout(), ValueRecipe("normal", k + 1))
                                 for k, (shape, d) in enumerate(zip(shapes, dtypes))), kwargs=(("value", value),))


def test_the_fault_fires_on_mixed_integers_with_a_value_past_int32_only():
    bad, clean = FaultTarget([FAULT]), FaultTarget([])
    for case in (_addcmul(("int64", "int64", "int16"), 2**63 - 1), _addcmul(("int32", "int32", "int64"), -2**31),
                 _addcmul(("int16", "int16", "int64"), 2**31)):
        assert judge_case(case, clean, DEFAULT).failures == (), case
        (failure,) = judge_case(case, bad, DEFAULT).failures
        assert (failure["oracle"], failure["blame"]) == ("values", "target"), failure
    for case in (_addcmul(("int64", "int64", "int64"), 2**63 - 1),      # one dtype
                 _addcmul(("int64", "int64", "int16"), 2),              # an ordinary value
                 _addcmul(("int64", "int64", "int16"), 2**30),          # inside int32
                 _addcmul(("float32", "float32", "float64"), 2**31)):  # floating operands
        assert judge_case(case, bad, DEFAULT).failures == (), case


@pytest.mark.slow
def test_an_addcmul_campaign_finds_the_fault_explained_by_both_conditions_and_minimised_with_both(tmp_path):
    finding = one_fault_campaign(tmp_path, "addcmul", FAULT, budget="150s")
    conditions = finding["conditions"]
    assert MIXED_CONDITION in conditions and "extreme:value" in conditions, finding["explanation"]
    assert "different dtypes" in finding["explanation"] and "`value` is at an extreme" in finding["explanation"]
    case = Case.from_json(finding["case"])
    assert _mixed_integers_with_an_extreme_value(case), finding["case"]
    assert_repro_proves_the_fault(finding, FAULT, tmp_path)


class _ConditionProber:
    """Fails (the same symptom) wherever ``fails(case)``, passes elsewhere: a bug whose
    conditions are known, for reduction and ablation without workers."""

    probe_cost_s = 0.0

    def __init__(self, fails):
        self.fails = fails

    def classify(self, case, symptom):
        from mpsfuzz.triage.probe import PASSES, SAME, Outcome
        return Outcome(SAME, [], object()) if self.fails(case) else Outcome(PASSES, [])


def _compound_addcmul() -> Case:
    return Case("addcmul", (TensorRecipe((2, 3, 4), "int64", Layout(gaps=(1, 2, 1)), ValueRecipe("normal", 4)),
                            TensorRecipe((3, 4), "int64", Layout(), ValueRecipe("normal", 5)),
                            TensorRecipe((2, 1, 4), "int16", Layout(), ValueRecipe("normal", 6))),
                kwargs=(("value", 2**63 - 1),))


def test_the_reducer_keeps_both_conditions_a_failure_needs_and_drops_a_mix_it_does_not():
    from mpsfuzz.triage.reduce import reduce_case
    needs_both = _ConditionProber(lambda c: _mixed(c) and "value" in extreme_arguments(c))
    kept = reduce_case(_compound_addcmul(), None, ("values",), needs_both).case
    assert _mixed_integers_with_an_extreme_value(kept) and kept.inputs[0].rank <= 1, kept
    # a failure of the extreme alone: the mix the compound sibling added is taken away
    needs_extreme = _ConditionProber(lambda c: "value" in extreme_arguments(c))
    dropped = reduce_case(_compound_addcmul(), None, ("values",), needs_extreme).case
    assert not _mixed(dropped) and "value" in extreme_arguments(dropped), dropped


def test_ablation_names_both_conditions_of_a_failure_that_needs_both():
    from mpsfuzz.triage.ablation import explain
    needs_both = _ConditionProber(lambda c: _mixed(c) and "value" in extreme_arguments(c))
    failure = SimpleNamespace(oracle="values", kind="wrong-values")
    explanation = explain(_compound_addcmul(), failure, ("values",), needs_both)
    assert {MIXED_CONDITION, "extreme:value"} <= set(explanation.conditions), explanation.conditions
    assert ("only when" in explanation.text and "the inputs are of different dtypes" in explanation.text
            and "`value` is at an extreme of its range (`value=2^63 - 1` here)" in explanation.text), explanation.text


# -- three changes at once: two inputs retyped, or a NaN after the pair -------------------
# (pytorch#153210: addcmul of int64, int16 and int32 operands with value ~1e18, three
# dtypes in one call; #153209: cosine_similarity of a float64 0-d beside float16 NaNs with
# an extreme eps, three conditions in one call)

THREE_FAULT = "addcmul_three_integer_dtypes_take_value_as_int32"
NAN_FAULT = "cosine_similarity_mixed_dtypes_nan_and_extreme_eps_give_zero"


def _three_integer_dtypes_with_an_extreme_value(case: Case) -> bool:
    return len({r.dtype for r in case.inputs}) == 3 and _mixed_integers_with_an_extreme_value(case)


def _has_nan(case: Case) -> bool:
    return any(n == "nan" for r in case.inputs for _, n in r.values.specials)


def _mixed_with_nan_and_an_extreme_eps(case: Case) -> bool:
    return _mixed(case) and _has_nan(case) and "eps" in extreme_arguments(case)


def test_addcmul_siblings_carry_three_integer_dtypes_and_an_extreme_value_together():
    # (seeds 1-3 measured 5, 13 and 4 of 900 each, 14 of the 22 past int32; 0 before two
    # inputs were retyped)
    spec = catalogue.get("addcmul")
    per_seed = [[s for c in example_cases(spec, 300, seed=seed) for salt in (1, 2, 3)
                 for s in siblings(spec, c, salt, 1, boundaries=True) if _three_integer_dtypes_with_an_extreme_value(s)]
                for seed in (1, 2, 3)]
    both = [s for seed in per_seed for s in seed]
    assert len(both) >= 10 and sum(1 for seed in per_seed if seed) >= 2, [len(s) for s in per_seed]
    assert any(abs(dict(s.kwargs)["value"]) > 2**31 for s in both)
    for s in both:
        assert number_holds(number_dtype(s), dict(s.kwargs)["value"]), s
        # the first input keeps the drawn dtype; the two retyped ones each took one of their own
        assert s.inputs[1].dtype != s.inputs[2].dtype != s.inputs[0].dtype != s.inputs[2].dtype, s


def test_cosine_similarity_siblings_carry_mixed_dtypes_a_nan_and_an_extreme_eps_together():
    # (seeds 1-3: 22, 42 and 42 of 900 each, 13 of them beside a 0-d operand; 7 in 2700
    # before, drawn NaNs only, 1 beside a 0-d operand)
    per_seed = [[s for _, _, s in _boundaries("cosine_similarity", seed=seed)
                 if s is not None and _mixed_with_nan_and_an_extreme_eps(s)] for seed in (1, 2, 3)]
    assert all(len(s) >= 8 for s in per_seed), [len(s) for s in per_seed]
    both = [s for seed in per_seed for s in seed]
    assert any(any(r.rank == 0 for r in s.inputs) and any(r.rank > 0 for r in s.inputs) for s in both)


def test_the_single_siblings_of_each_kind_are_those_drawn_before_three_changes(monkeypatch):
    """Two retyped inputs and a third change are compounds' own: with them off, each
    salt gives the same sibling wherever the compound carried two kinds or none, and the
    three-change siblings become two-change ones."""
    ops = ("addcmul", "cosine_similarity")
    on = {(op, c, salt): s for op in ops for c, salt, s in _boundaries(op, 120)}
    monkeypatch.setattr(strategies, "TWO_RETYPED_HALVES", 0)
    monkeypatch.setattr(strategies, "THIRD_KIND_HALVES", 0)
    off = {(op, c, salt): s for op in ops for c, salt, s in _boundaries(op, 120)}
    assert all(len({r.dtype for r in s.inputs}) < 3 for s in off.values() if s is not None)
    assert not any(_mixed_with_nan_and_an_extreme_eps(s) and not _has_nan(c)
                   for (_, c, _), s in off.items() if s is not None)
    changed = [k for k in on if on[k] != off[k]]
    assert changed and len(changed) <= len(on) // 3, (len(changed), len(on))
    for key in changed:
        op, case, _ = key
        kinds = _kinds_added(catalogue.get(op), case, on[key])
        assert MIXED_DTYPES in kinds, (key, kinds)


def test_the_three_dtypes_fault_fires_on_three_integer_dtypes_with_a_value_past_int32_only():
    bad, clean = FaultTarget([THREE_FAULT]), FaultTarget([])
    for case in (_addcmul(("int64", "int16", "int32"), 2**31), _addcmul(("int64", "int8", "uint8"), 2**63 - 1),
                 _addcmul(("int16", "int64", "int32"), 2**32 + 1, shapes=((3, 4), (4,), (3, 1)))):
        assert judge_case(case, clean, DEFAULT).failures == (), case
        (failure,) = judge_case(case, bad, DEFAULT).failures
        assert (failure["oracle"], failure["blame"]) == ("values", "target"), failure
    for case in (_addcmul(("int64", "int64", "int32"), 2**31),          # two dtypes
                 _addcmul(("int64", "int16", "int32"), 2),              # an ordinary value
                 _addcmul(("int64", "int16", "int32"), 2**31 - 1),      # inside int32
                 _addcmul(("float64", "float32", "float16"), 2**31)):   # floating operands
        assert judge_case(case, bad, DEFAULT).failures == (), case


def _cosine(dtypes, eps, *, nan: bool = True, shapes=((3, 4), (3, 4))) -> Case:
    return Case("cosine_similarity", tuple(
        TensorRecipe(shape, d, Layout(), ValueRecipe("normal", k + 1, specials=((5, "nan"),) if nan and k == 0 else ()))
        for k, (shape, d) in enumerate(zip(shapes, dtypes))), kwargs=(("dim", -1), ("eps", eps)))


def test_the_nan_fault_fires_on_mixed_dtypes_with_a_nan_and_an_extreme_eps_only():
    bad, clean = FaultTarget([NAN_FAULT]), FaultTarget([])
    for case in (_cosine(("float16", "float64"), 65504.0), _cosine(("float32", "float64"), 5e-324),
                 _cosine(("float16", "float64"), 3.4028234663852886e38, shapes=((3, 4), ()))):
        assert judge_case(case, clean, DEFAULT).failures == (), case
        (failure,) = judge_case(case, bad, DEFAULT).failures
        assert (failure["oracle"], failure["blame"]) == ("values", "target"), failure
    for case in (_cosine(("float16", "float16"), 65504.0),              # one dtype
                 _cosine(("float16", "float64"), 1.0),                  # an ordinary eps
                 _cosine(("float16", "float64"), 1e-8),                 # the default eps
                 _cosine(("float16", "float64"), 65504.0, nan=False)):  # finite values
        assert judge_case(case, bad, DEFAULT).failures == (), case


def _three_dtypes_addcmul() -> Case:
    return Case("addcmul", (TensorRecipe((2, 3, 4), "int64", Layout(gaps=(1, 2, 1)), ValueRecipe("normal", 4)),
                            TensorRecipe((3, 4), "int16", Layout(), ValueRecipe("normal", 5)),
                            TensorRecipe((2, 1, 4), "int32", Layout(), ValueRecipe("normal", 6))),
                kwargs=(("value", 2**63 - 1),))


def _three_dtypes(case: Case) -> bool:
    return len({r.dtype for r in case.inputs}) == 3


def test_the_reducer_keeps_three_dtypes_a_failure_needs_and_takes_the_third_away_where_two_do():
    from mpsfuzz.triage.reduce import reduce_case
    needs_three = _ConditionProber(lambda c: _three_dtypes(c) and "value" in extreme_arguments(c))
    kept = reduce_case(_three_dtypes_addcmul(), None, ("values",), needs_three).case
    assert _three_integer_dtypes_with_an_extreme_value(kept) and kept.inputs[0].rank <= 1, kept
    # a failure of mixed dtypes (two will do) and the extreme: one retyped input goes back
    needs_two = _ConditionProber(lambda c: _mixed(c) and "value" in extreme_arguments(c))
    two = reduce_case(_three_dtypes_addcmul(), None, ("values",), needs_two).case
    assert len({r.dtype for r in two.inputs}) == 2 and "value" in extreme_arguments(two), two


def test_ablation_names_three_dtypes_where_a_failure_needs_them():
    from mpsfuzz.triage.ablation import THREE_DTYPES, explain
    failure = SimpleNamespace(oracle="values", kind="wrong-values")
    needs_three = _ConditionProber(lambda c: _three_dtypes(c) and "value" in extreme_arguments(c))
    explanation = explain(_three_dtypes_addcmul(), failure, ("values",), needs_three)
    assert {MIXED_CONDITION, THREE_DTYPES, "extreme:value"} <= set(explanation.conditions), explanation.conditions
    assert "the inputs are of three different dtypes" in explanation.text, explanation.text
    assert holds(THREE_DTYPES, _three_dtypes_addcmul()) and not holds(THREE_DTYPES, _compound_addcmul())
    # two dtypes will do: not a condition
    needs_two = _ConditionProber(lambda c: _mixed(c) and "value" in extreme_arguments(c))
    explanation = explain(_three_dtypes_addcmul(), failure, ("values",), needs_two)
    assert MIXED_CONDITION in explanation.conditions and THREE_DTYPES not in explanation.conditions, explanation


def _nan_cosine() -> Case:
    return Case("cosine_similarity", (
        TensorRecipe((4, 6), "float16", Layout(permutation=(1, 0)), ValueRecipe("normal", 3, specials=((7, "nan"), (2, "-0.0")))),
        TensorRecipe((), "float64", Layout(), ValueRecipe("normal", 4))), kwargs=(("dim", 0), ("eps", 65504.0)))


def test_the_reducer_keeps_the_nan_a_failure_needs_and_drops_it_where_not():
    from mpsfuzz.triage.reduce import reduce_case
    needs_all = _ConditionProber(_mixed_with_nan_and_an_extreme_eps)
    kept = reduce_case(_nan_cosine(), None, ("values",), needs_all).case
    assert _mixed_with_nan_and_an_extreme_eps(kept), kept
    needs_mix_and_eps = _ConditionProber(lambda c: _mixed(c) and "eps" in extreme_arguments(c))
    dropped = reduce_case(_nan_cosine(), None, ("values",), needs_mix_and_eps).case
    assert not _has_nan(dropped) and _mixed(dropped) and "eps" in extreme_arguments(dropped), dropped


@pytest.mark.slow
def test_an_addcmul_campaign_finds_the_three_dtypes_fault_explained_by_its_conditions_and_minimised_with_them(tmp_path):
    finding = one_fault_campaign(tmp_path, "addcmul", THREE_FAULT, budget="240s")
    from mpsfuzz.triage.ablation import THREE_DTYPES
    assert {MIXED_CONDITION, THREE_DTYPES, "extreme:value"} <= set(finding["conditions"]), finding["explanation"]
    assert "three different dtypes" in finding["explanation"] and "`value` is at an extreme" in finding["explanation"]
    assert _three_integer_dtypes_with_an_extreme_value(Case.from_json(finding["case"])), finding["case"]
    assert_repro_proves_the_fault(finding, THREE_FAULT, tmp_path)


@pytest.mark.slow
def test_a_cosine_similarity_campaign_finds_the_nan_fault_explained_by_its_conditions_and_minimised_with_them(tmp_path):
    finding = one_fault_campaign(tmp_path, "cosine_similarity", NAN_FAULT, budget="240s")
    assert {MIXED_CONDITION, "nonfinite", "extreme:eps"} <= set(finding["conditions"]), finding["explanation"]
    assert _mixed_with_nan_and_an_extreme_eps(Case.from_json(finding["case"])), finding["case"]
    assert_repro_proves_the_fault(finding, NAN_FAULT, tmp_path)
