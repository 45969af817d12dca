"""The input classes of issue 38 (mpsfuzz/generation/input_classes.py): which ones an op
admits by its declaration, which ones a case exercises, and `mpsfuzz coverage`, which
says per op which admissible classes a campaign's cases (and their siblings) never draw."""
from __future__ import annotations

import json
from dataclasses import replace

from mpsfuzz.cli import main
from mpsfuzz.generation import coverage, input_classes, strategies
from mpsfuzz.generation.input_classes import (ARGUMENT_EXTREME, CONJ_VIEW, EMPTY_OTHER, MIXED_DTYPES, NEG_VIEW,
                                              OUT_CAST, admissible, drawn)
from mpsfuzz.generation.opspec import OpSpec
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe


def _binary(name: str = "classes_probe", **fields) -> OpSpec:
    """An add-like op of two free inputs, (3, 4) and (4, 5): no builder of it ever draws
    an empty input."""
    spec = OpSpec(name=name, family="elementwise", fn=lambda a, b, **kw: a.sum() + b.sum(),
                  shapes=lambda draw, budget: ((3, 4), (4, 5)), dtypes=("float32", "complex64", "int32"),
                  input_dtypes=(None, None), semantics=frozenset({"mixed_dtypes_sometimes"}), out=True)
    return replace(spec, **fields)


def _case(*inputs: TensorRecipe, kwargs=(), variant="functional", op="classes_probe") -> Case:
    return Case(op=op, inputs=tuple(inputs), kwargs=tuple(kwargs), variant=variant)


def _t(shape, dtype="float32", bit="") -> TensorRecipe:
    return TensorRecipe(tuple(shape), dtype, Layout(bit=bit), ValueRecipe())


def test_classes_are_admitted_by_the_declaration():
    spec = _binary()
    assert admissible(spec) == {MIXED_DTYPES, OUT_CAST, CONJ_VIEW, NEG_VIEW}
    # no complex dtype, no integer one to cast out=, no mixing declared: only a real
    # input's negative bit (a boundary sibling)
    plain = _binary(dtypes=("float32", "float16"), semantics=frozenset())
    assert admissible(plain) == {NEG_VIEW}
    assert NEG_VIEW not in admissible(_binary(dtypes=("int64",), semantics=frozenset()))
    # an input whose dtypes are its own (an index) is not free to mix
    indexed = _binary(input_dtypes=(None, ("int64",)))
    assert MIXED_DTYPES not in admissible(indexed)
    # families that refuse an out= of another dtype (linalg) have no out-cast variant
    assert OUT_CAST not in admissible(_binary(family="linalg"))


def test_classes_judged_from_draws_need_a_case_that_admits_them():
    """empty-other needs a size only a later input has; argument-extreme an argument
    that can move to an extreme: the declaration alone cannot say."""
    spec = _binary()
    same = _case(_t((3, 4)), _t((3, 4)))
    later = _case(_t((3, 4)), _t((4, 5)), kwargs=(("alpha", 2.0),))
    assert EMPTY_OTHER not in admissible(spec, [same]) and ARGUMENT_EXTREME not in admissible(spec, [same])
    assert {EMPTY_OTHER, ARGUMENT_EXTREME} <= admissible(spec, [same, later])
    # a skeleton that calls for no later sizes, structural ones (the op's own), or one input
    assert EMPTY_OTHER not in admissible(_binary(semantics=frozenset({"structural-later-sizes"})), [later])
    assert EMPTY_OTHER not in admissible(_binary(), [_case(_t((3, 4)))])


def test_drawn_says_what_a_case_exercises():
    spec = _binary()
    assert drawn(spec, _case(_t((3, 4)), _t((4, 5)))) == set()
    assert drawn(spec, _case(_t((3, 4)), _t((4, 5), "float16"))) == {MIXED_DTYPES}
    assert drawn(spec, _case(_t((3, 4), "int32"), _t((4, 5), "int32"), variant="out-cast")) == {OUT_CAST}
    # out-cast of a float input has no dtype to cast into: not the class
    assert drawn(spec, _case(_t((3, 4)), _t((4, 5)), variant="out-cast")) == set()
    assert drawn(spec, _case(_t((3, 4)), _t((4, 0)))) == {EMPTY_OTHER}
    # every input emptied (the `empty` boundary) is not a later input's zero-size dim
    assert drawn(spec, _case(_t((0, 4)), _t((4, 0)))) == set()
    views = _case(_t((3,), "complex64", bit="conj"), _t((3,), "complex64", bit="neg"))
    assert drawn(spec, views) == {CONJ_VIEW, NEG_VIEW}
    assert drawn(spec, _case(_t((3,)), _t((3,)), kwargs=(("alpha", 2**63 - 1),))) == {ARGUMENT_EXTREME}
    # the index input of an indexing op differs in dtype by declaration: not mixed
    indexed = _binary(input_dtypes=(None, ("int64",)))
    assert drawn(indexed, _case(_t((3, 4)), _t((4,), "int64"))) == set()


def test_a_size_class_variant_has_its_size_classes_alone():
    large = _binary(name="classes_probe@large", size_class="large", base="classes_probe", grad=True)
    assert admissible(large) == {"large", "large-grad"}
    assert drawn(large, _case(_t((3, 4)), _t((4, 0)), op=large.name)) == {"large"}
    assert drawn(large, _case(_t((3, 4)), _t((4, 5)), variant="grad", op=large.name)) == {"large", "large-grad"}
    huge = _binary(name="classes_probe@huge", size_class="large", base="classes_probe")
    assert admissible(huge) == {"huge"}
    assert set(input_classes.CLASSES) >= admissible(large) | admissible(huge)


def test_boundary_siblings_count_and_rows_merge_by_base_op(registered):
    """The probe's builder never draws an empty input: empty-other comes only from the
    boundary siblings a campaign makes, and a size-class variant's classes join its
    base op's row."""
    spec = registered(_binary())
    registered(_binary(name="classes_probe@large", size_class="large", base="classes_probe"))
    alone = coverage.survey([spec.name], cases_per_op=20, seed=1, skeletons=True, siblings_per_case=0)
    (row,) = alone.classes
    assert EMPTY_OTHER in row.admissible and EMPTY_OTHER in row.never_drawn
    both = coverage.survey([spec.name, "classes_probe@large"], cases_per_op=20, seed=1, skeletons=True)
    (row,) = both.classes
    assert EMPTY_OTHER in row.drawn and "large" in row.drawn
    assert [r.op for r in both.parameters] == [spec.name]     # (a variant's parameters are its base op's)


def test_a_class_the_strategy_never_draws_is_reported_never_drawn(registered, monkeypatch):
    """With no complex input given the conjugate or negative bit and no boundary sibling,
    both view classes are admissible (complex64 is declared) and never drawn."""
    spec = registered(_binary())
    monkeypatch.setattr(strategies, "VIEW_BIT_TENTHS", 0)
    monkeypatch.setattr(strategies, "BOUNDARIES", tuple(b for b in strategies.BOUNDARIES if b != "neg-view"))
    (row,) = coverage.survey([spec.name], cases_per_op=20, seed=0).classes
    assert {CONJ_VIEW, NEG_VIEW} <= set(row.never_drawn)
    assert not {CONJ_VIEW, NEG_VIEW} & set(row.seen)
    assert "admissible but never drawn: " in coverage.class_gaps(row) and "conj-view" in coverage.class_gaps(row)


def test_cli_prints_the_classes_per_op_and_the_share(registered, tmp_path, capsys):
    spec = registered(_binary())
    path = tmp_path / "coverage.json"
    code = main(["coverage", "--ops", spec.name, "--cases", "20", "--json", str(path)])
    out = capsys.readouterr().out
    assert code == 0
    report = json.loads(path.read_text())
    row = report["input_classes"]["ops"][spec.name]
    total = report["input_classes"]["total"]
    assert set(row["admissible"]) == {MIXED_DTYPES, OUT_CAST, CONJ_VIEW, NEG_VIEW, EMPTY_OTHER}
    assert total["admissible"] == 5 and total["drawn"] == len(row["drawn"])
    line = f"{spec.name}: input classes drawn: {', '.join(row['drawn']) or 'none'}; " \
           f"admissible but never drawn: {', '.join(row['never_drawn']) or 'none'}"
    assert line in out
    assert f"1 op with input classes, 5 admissible (op, class) pairs: {total['drawn']} drawn " \
           f"({100 * total['share']:.1f}%)" in out
    assert "  empty-other: drawn for " in out and "(the large classes: --large)" in out
    # the parameter report is still there, first
    assert out.index("parameters drawn by 20 case(s)") < out.index("input classes (issue 38)")
    assert spec.name in report["parameters"]["ops"]

