"""The cast family (issue 38, pytorch/pytorch#160744: MPS `copy_` of a 0-d float32 -1 into
a uint8 destination of 3 elements gave 0, where one element, CPU and CUDA give 255).

`copy_` between every pair of dtypes with the source broadcast, `to(dtype)`; the reference
is the documented conversion in Python numbers; a conversion C++ leaves undefined (a
float out of an integer dtype's range, NaN, inf) gets no verdict, as the maintainer
answered #160744 (PR #189038): a target that differs from CPU only there is no bug."""
from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from mpsfuzz.generation import catalogue
from mpsfuzz.generation import dtypes as dt
from mpsfuzz.generation.recipes import CAST_EDGES, Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.generation.strategies import example_cases
from mpsfuzz.oracles import DEFAULT
from mpsfuzz.oracles.conversions import undefined_conversions
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.oracles.jury.formulas.casts import copy_formula, to_formula
from mpsfuzz.testing.faults import NOT_BUGS, FaultTarget

from test_fault_campaigns import FAULT_TARGET, assert_repro_proves_the_fault, findings_in, mpsfuzz

FIRST_ONLY = "copy_broadcast_cast_converts_the_first_element_only"
AS_ZERO = "copy_broadcast_cast_out_of_range_as_zero"


def _scalar(dtype: str, value: int) -> TensorRecipe:
    """A 0-d tensor holding ``value`` (a small_int range of one integer)."""
    return TensorRecipe((), dtype, Layout(), ValueRecipe("small_int", 1, low=value, high=value))


def _dst(shape=(3,), dtype="uint8", layout=Layout()) -> TensorRecipe:
    return TensorRecipe(shape, dtype, layout, ValueRecipe("small_int", 2))


def _failures(case: Case, faults: list[str]) -> list:
    return list(judge_case(case, FaultTarget(faults), DEFAULT).failures)


def is_160744_trigger(case: Case) -> bool:
    """pytorch#160744's call: a floating source, 0-d or broadcast (fewer elements, or a
    stride-0 dim), holding a negative value, into a uint8 destination of more than one
    element."""
    if case.op != "copy_":
        return False
    dst, src = case.inputs
    if dst.dtype != "uint8" or dst.numel <= 1 or src.dtype not in dt.FLOAT:
        return False
    if src.numel >= dst.numel and not src.layout.expanded:
        return False
    return bool((src.cpu_values() < 0).any())


# -- the strategy ------------------------------------------------------------------------------

def test_the_cast_family_holds_copy_and_to_between_every_dtype():
    family = catalogue.families()["cast"]
    assert family == ["copy_", "to"]
    for name in family:
        spec = catalogue.get(name)
        assert set(spec.dtypes) == set(dt.ALL_DTYPE_NAMES), name
        assert spec.converts is not None, name


def test_copy_draws_every_dtype_pair_broadcast_sources_and_awkward_destinations():
    cases = [c for seed in (1, 2) for c in example_cases(catalogue.get("copy_"), 300, seed=seed)]
    pairs = {(c.inputs[0].dtype, c.inputs[1].dtype) for c in cases}
    # 256 pairs, drawn as Hypothesis draws them (unevenly: about 100 in 600 cases, a
    # quarter of them a floating source into an integer destination), every dtype on
    # both sides
    assert len(pairs) > 80, len(pairs)
    assert {d for d, _ in pairs} == {s for _, s in pairs} == set(dt.ALL_DTYPE_NAMES)
    assert sum(c.inputs[0].dtype != c.inputs[1].dtype for c in cases) > 400
    sources = [c.inputs[1] for c in cases if c.inputs[0].numel > 1]
    assert sum(s.rank == 0 for s in sources) > 60
    assert sum(0 < s.numel < c.inputs[0].numel for c in cases for s in c.inputs[1:]) > 40
    assert sum(bool(s.layout.expanded) for s in sources) > 40
    kinds = {k for c in cases for k in c.inputs[0].layout.kinds()}
    assert {"offset", "gapped", "transposed"} <= kinds, kinds
    # a written destination never shares memory between its elements
    assert not any(c.inputs[0].layout.expanded for c in cases)


def test_to_draws_every_target_dtype():
    cases = example_cases(catalogue.get("to"), 300, seed=1)
    targets = {dt.name_of(c.kwargs_dict()["dtype"]) for c in cases}
    assert targets == set(dt.ALL_DTYPE_NAMES)


def test_pytorch_160744s_trigger_is_drawn():
    spec = catalogue.get("copy_")
    # (a quarter of copy_'s pairs are a floating source into an integer destination;
    # the count varies by seed, 0-9 in 300: five seeds keep a margin)
    count = sum(is_160744_trigger(c) for seed in range(1, 6) for c in example_cases(spec, 300, seed=seed))
    assert count >= 5, count


def test_cast_edges_hold_each_integer_limit_half_and_one_past_it_and_in_range_negatives():
    for lo, hi in ((-128, 127), (0, 255), (-32768, 32767), (-2**31, 2**31 - 1)):
        for edge in (lo, hi):
            assert {edge - 1.0, edge - 0.5, float(edge), edge + 0.5, edge + 1.0} <= set(CAST_EDGES), edge
    assert {-1.0, -0.5, 0.5, -2.5} <= set(CAST_EDGES)
    src = TensorRecipe((4096,), "float32", Layout(), ValueRecipe("cast_edges", 7)).cpu_values()
    assert bool((src == -1).any()) and bool((src == 255.5).any()) and bool((src == 256).any())
    assert bool(((src > -300) & (src < 300) & (src != src.trunc())).any())   # fractions to truncate
    ints = TensorRecipe((4096,), "int16", Layout(), ValueRecipe("cast_edges", 7)).cpu_values()
    assert int(ints.min()) == -32768 and int(ints.max()) == 32767 and bool((ints == -1).any())


# -- the reference -----------------------------------------------------------------------------

def test_the_reference_is_the_documented_conversion():
    f64 = torch.float64
    # float -> int truncates toward zero; int -> int wraps; x -> bool is x != 0
    assert copy_formula([torch.zeros(4, dtype=torch.int8), torch.tensor([2.7, -2.7, 127.9, -128.9], dtype=f64)],
                        {}).tolist() == [2, -2, 127, -128]
    assert copy_formula([torch.zeros(3, dtype=torch.int8), torch.tensor([300, -129, 128], dtype=torch.int64)],
                        {}).tolist() == [44, 127, -128]
    assert copy_formula([torch.zeros(2, dtype=torch.uint64), torch.tensor([-1, 5])], {}).tolist() == [2**64 - 1, 5]
    assert copy_formula([torch.zeros(3, dtype=torch.bool), torch.tensor([0.0, -0.0, math.nan], dtype=f64)],
                        {}).tolist() == [False, False, True]
    assert copy_formula([torch.zeros(2, dtype=torch.bool), torch.tensor([0j, 1j])], {}).tolist() == [False, True]
    assert copy_formula([torch.zeros(2, dtype=torch.uint8), torch.tensor(True)], {}).tolist() == [1, 1]
    # complex -> real takes the real part; a floating result is exact, rounded by the jury
    assert to_formula([torch.tensor([1.5 - 7j, -2.25 + 1j])], {"dtype": f64}).tolist() == [1.5, -2.25]
    assert to_formula([torch.tensor([2**53 + 1])], {"dtype": f64}).tolist() == [float(2**53)]
    # a narrower float rounds to nearest even, an infinity past its range (numpy's and
    # float32's bits, never torch's cast): 65520 is float16's first value past its max,
    # 1 + 2^-8 a tie of bfloat16 (to 1), 1 + 3 * 2^-8 one that rounds up to even
    assert to_formula([torch.tensor([65519.0, 65520.0], dtype=f64)], {"dtype": torch.float16}).tolist() == \
        [65504.0, math.inf]
    assert to_formula([torch.tensor([1 + 2**-8, 1 + 3 * 2**-8], dtype=f64)], {"dtype": torch.bfloat16}).tolist() == \
        [1.0, 1 + 2**-6]
    # the source broadcast into the destination's shape
    out = copy_formula([torch.zeros(2, 3, dtype=torch.int16), torch.tensor([[1.5], [-1.5]], dtype=f64)], {})
    assert out.tolist() == [[1, 1, 1], [-1, -1, -1]]


def test_undefined_conversions_are_float_or_complex_values_whose_truncation_an_integer_cannot_hold():
    x = torch.tensor([-1.0, -0.5, 255.9, 256.0, math.nan, math.inf, 3.0], dtype=torch.float32)
    assert undefined_conversions(x, torch.uint8).tolist() == [True, False, False, True, True, True, False]
    assert undefined_conversions(x, torch.int16).tolist() == [False, False, False, False, True, True, False]
    z = torch.tensor([-1 + 0j, 5 + 1e30j])
    assert undefined_conversions(z, torch.uint8).tolist() == [True, False]
    for defined in ((x, torch.float16), (x, torch.bool), (torch.tensor([-1, 300]), torch.uint8)):
        assert undefined_conversions(*defined) is None


@pytest.mark.parametrize("dtype, bits", [(torch.uint64, 64), (torch.int64, 63), (torch.uint32, 32), (torch.int32, 31)])
def test_a_value_at_the_power_of_two_past_an_integers_max_is_undefined(dtype, bits):
    """float64's nearest value to uint64's 2^64 - 1 is 2^64 itself: compared with the max
    as a float, 2^64 read as in range (CUDA's complex64 2^64 into uint64 gave 2^64 - 1,
    eager CPU 0, and the difference was filed as the target's)."""
    x = torch.tensor([2.0**bits, 2.0**bits - 2.0**(bits - 24), -1.0], dtype=torch.float32)
    assert undefined_conversions(x, dtype).tolist() == [True, False, dtype.is_signed is False]
    z = torch.tensor([2.0**bits + 0j], dtype=torch.complex64)
    assert undefined_conversions(z, dtype).tolist() == [True]


# -- the rule: no verdict on an undefined conversion ------------------------------------------

def test_pytorch_160744s_answer_is_no_bug():
    """MPS's 0 for -1.0 copied into a uint8 destination of 3 elements (CPU: 255) is
    undefined in C++: no failure, not even where the target contradicts itself (0-d into
    one element gives 255, into three 0; an expanded source against its dense copy)."""
    target = FaultTarget([AS_ZERO])
    three = Case("copy_", (_dst((3,)), _scalar("float32", -1)))
    d, s = three.materialize("cpu")
    assert target.run(catalogue.get("copy_").fn, d, s).tolist() == [0, 0, 0]      # the fault fires
    assert torch.zeros(3, dtype=torch.uint8).copy_(torch.tensor(-1.0)).tolist() == [255] * 3
    assert _failures(three, [AS_ZERO]) == []
    one = Case("copy_", (_dst((1,)), _scalar("float32", -1)))
    assert _failures(one, [AS_ZERO]) == []
    expanded = Case("copy_", (_dst((2, 3)), TensorRecipe((2, 3), "float32", Layout(expanded=(0,)),
                                                         ValueRecipe("small_int", 1, low=-3, high=-1))))
    assert _failures(expanded, [AS_ZERO]) == []
    # a negative view of the source: -127 is undefined into uint8, 126.5 is not (the
    # fault reads the view's logical values: inside the mode a kernel reads the storage)
    neg = TensorRecipe((3, 1), "float64", Layout(bit="neg"), ValueRecipe("cast_edges", 4294967295))
    negated = Case("copy_", (_dst((3, 2)), neg))
    assert bool((neg.cpu_values() < -1).any()) and bool((neg.cpu_values() > 0).any())
    assert _failures(negated, [AS_ZERO]) == []
    assert AS_ZERO in NOT_BUGS


def test_reduction_moves_no_view_bit_onto_a_dtype_that_cannot_carry_it():
    """Reducing a copy_ whose float source carries the negative bit proposes moving the
    source's layout onto the uint8 destination: the bit stays behind (it raised, a
    harness error of triage, before)."""
    from mpsfuzz.triage.reduce import _layouts
    neg = TensorRecipe((3, 2), "float64", Layout(offset=1, bit="neg"), ValueRecipe("cast_edges", 1))
    proposals = list(_layouts(Case("copy_", (_dst((3, 2)), neg))))
    assert proposals
    moved = [c for c in proposals if c.inputs[0].layout.offset == 1]
    assert moved and all(c.inputs[0].layout.bit == "" for c in moved)


def test_without_the_rule_the_undefined_answer_would_be_filed(registered):
    """The rule is what keeps it quiet: the same op without ``converts`` is judged on
    every element, and the fault's 0 against CPU's 255 is a failure."""
    registered(replace(catalogue.get("copy_"), name="test.copy_without_converts", converts=None))
    case = Case("test.copy_without_converts", (_dst((3,)), _scalar("float32", -1)))
    assert [f["oracle"] for f in _failures(case, [AS_ZERO])] == ["values"]


def test_a_wrong_defined_conversion_is_still_found_beside_undefined_ones():
    # -1.0 (undefined into uint8) and 3.0 (defined) broadcast into 2 x 2: the fault's zeros
    # past the first element are judged where the source is 3.0 only
    src = TensorRecipe((2, 1), "float32", Layout(), ValueRecipe("small_int", 1, low=3, high=3,
                                                                 specials=((0, "-1"),)))
    case = Case("copy_", (_dst((2, 2)), src))
    (failure,) = _failures(case, [FIRST_ONLY])
    assert failure["oracle"] == "values" and failure.get("blame", "target") == "target", failure
    assert "formula" in failure["message"] and "target-wrong" in failure["message"], failure["message"]
    # all undefined: nothing to judge
    assert _failures(Case("copy_", (_dst((2, 2)), _scalar("float32", -1))), [FIRST_ONLY]) == []


# -- the fault ---------------------------------------------------------------------------------

def test_the_first_element_fault_fires_on_a_broadcast_source_of_another_dtype_only():
    assert _failures(Case("copy_", (_dst((3,)), _scalar("float32", 3))), [FIRST_ONLY])
    expanded = TensorRecipe((3,), "int64", Layout(expanded=(0,)), ValueRecipe("small_int", 1, low=3, high=3))
    assert _failures(Case("copy_", (_dst((3,)), expanded)), [FIRST_ONLY])
    quiet = [Case("copy_", (_dst((1,)), _scalar("float32", 3))),                        # one element
             Case("copy_", (_dst((3,)), _scalar("uint8", 3))),                          # one dtype
             Case("copy_", (_dst((3,)), TensorRecipe((3,), "float32", Layout(),         # not broadcast
                                                     ValueRecipe("small_int", 1, low=3, high=3)))),
             Case("to", (TensorRecipe((3,), "float32", Layout(), ValueRecipe("small_int", 1, low=3, high=3)),),
                  (("dtype", _dtype("uint8")),))]
    for case in quiet:
        assert _failures(case, [FIRST_ONLY]) == [], case.describe()


def _dtype(name: str):
    from mpsfuzz.generation.recipes import DtypeArg
    return DtypeArg(name)


@pytest.mark.slow
def test_a_cast_campaign_finds_the_broadcast_conversion_explained_by_its_class(tmp_path):
    corpus = tmp_path / "corpus"
    # (a budget, not --max-cases: a campaign counted in cases alone draws no siblings)
    done = mpsfuzz("run", "--ops", "cast", "--target", FAULT_TARGET, "--budget", "90s", "--seed", "1",
                   "--corpus", str(corpus), "--no-progress", faults=FIRST_ONLY, cwd=tmp_path, timeout=400)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "harness errors 0" in done.stdout
    (finding,) = [f for f in findings_in(corpus) if f["status"] == "new"]
    assert finding["op"] == "copy_" and finding["oracle"] == "values", finding
    # explained by the class: the source broadcast, of another dtype than the destination
    assert "broadcast:1" in finding["conditions"] and "mixed-dtypes" in finding["conditions"], finding["explanation"]
    assert "`src` is broadcast" in finding["explanation"] and "different dtypes" in finding["explanation"]
    # minimised keeping the condition: a broadcast source of another dtype, several elements
    dst, src = finding["case"]["inputs"]
    assert dst["dtype"] != src["dtype"]
    assert math.prod(dst["shape"]) > 1 and math.prod(src["shape"]) < math.prod(dst["shape"]), finding["case"]
    assert math.prod(dst["shape"]) <= 4, finding["case"]
    assert_repro_proves_the_fault(finding, FIRST_ONLY, tmp_path)


@pytest.mark.slow
def test_a_cast_campaign_on_the_undefined_answer_files_no_bug(tmp_path):
    corpus = tmp_path / "corpus"
    done = mpsfuzz("run", "--ops", "copy_", "--target", FAULT_TARGET, "--budget", "60s", "--seed", "1",
                   "--corpus", str(corpus), "--no-progress", faults=AS_ZERO, cwd=tmp_path, timeout=400)
    assert "harness errors 0" in done.stdout, done.stdout + done.stderr
    assert not [f for f in findings_in(corpus) if f["status"] == "new"], done.stdout


def test_a_found_cases_repro_script_runs(monkeypatch):
    """The repro script of a failure of the first-element fault (its cast_edges source
    written as a literal) reproduces in a fresh interpreter on the fault target, and not
    once the fault is off."""
    from mpsfuzz.corpus.finding import Finding
    from mpsfuzz.execution.worker import WorkerPool
    from mpsfuzz.reports.repro import Script, repro_for
    from mpsfuzz.reports.verify import run_and_judge
    from mpsfuzz.triage.probe import Prober
    case = Case("copy_", (_dst((2, 2), "int16", Layout(offset=2)), _scalar("float32", 3)))
    case = replace(case, inputs=(case.inputs[0], replace(case.inputs[1], values=ValueRecipe("cast_edges", 5))))
    assert 0 < abs(int(case.inputs[1].cpu_values())) < 32767     # a defined conversion into int16
    monkeypatch.setenv("MPSFUZZ_FAULTS", FIRST_ONLY)
    pool = WorkerPool(FAULT_TARGET, timeout_s=30, execute=judge_case)
    try:
        (failure,), _, _ = Prober(pool, ("values",)).failures(case)
    finally:
        pool.close()
    finding = Finding.create(case, failure, target_name="faulty-cpu", target_spec=FAULT_TARGET, device="cpu")
    record = repro_for(finding)
    assert record["verified"] is True, (record["detail"], record["script"])
    assert ".copy_(" in record["script"] and "torch.int16" in record["script"], record["script"]
    monkeypatch.setenv("MPSFUZZ_FAULTS", "none")
    script = Script(text=record["script"], expect=record["expect"], body_lines=record["lines"])
    clean = run_and_judge(script, target_spec=FAULT_TARGET, timeout_s=60)
    assert not clean.reproduced, (clean.detail, record["script"])


def test_the_floating_source_of_a_dtype_pair_is_the_input_the_op_declares_it_converts(registered):
    """The quarter of pairs that put a floating source into an integer destination retype
    ``OpSpec.converts``'s input, wherever the op puts it (here the third)."""
    from mpsfuzz.generation.opspec import OpSpec, same_shapes

    spec = registered(OpSpec(name="test.copy_third", family="test", shapes=same_shapes(3),
                             fn=lambda dst, other, src: dst.copy_(src), dtypes=catalogue.get("copy_").dtypes,
                             doc="copy_ of the third input", mutates=(0,), converts=2,
                             semantics=frozenset({"dtype-pairs"})))
    cases = example_cases(spec, 200, seed=1)
    float_sources = [c for c in cases if c.inputs[0].dtype in dt.INTEGRAL and c.inputs[2].dtype in dt.FLOAT]
    # a quarter of the cases by the rule, and an eighth of the rest by chance: about 34%
    assert len(float_sources) >= 200 // 4, len(float_sources)
