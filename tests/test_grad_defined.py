"""Gradients are judged only where they are defined: at kinks, ties and repeated eigen-
or singular values the ``grads`` oracle gives no verdict (the op's ``grad_undefined``
declaration, else a numeric float64 check), even when the DUT picks another valid
subgradient; a wrong backward at a point where the gradient is defined is still found,
and the forward result and errors of the grad variant are still judged."""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from mpsfuzz.execution.outcome import CaseOutcome
from mpsfuzz.generation import catalogue, strategies
from mpsfuzz.generation import grad_points as gp
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import grads as grads_oracle
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.testing.faults import FAULTS, Fault, FaultTarget

from test_fault_campaigns import FAULT_TARGET, findings_in, mpsfuzz

RTOL = 1.3e-6 * 2 * 64   # float32 grads of a SOLVE_KW linalg op


def tensor(values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype)


# -- (a) the predicates on hand-made tensors ------------------------------------------------

def test_ties_along_the_reduced_dim_including_a_stride_0_input():
    expanded = tensor([1.0, 2.0, 3.0]).expand(4, 3)          # rows equal: ties along dim 0
    assert expanded.stride(0) == 0
    why = gp.ties()([expanded], {"dim": 0})
    assert why and "ties" in why and "dim 0" in why
    assert gp.ties()([expanded], {"dim": 1}) is None            # along a row: distinct
    assert gp.ties()([expanded], {}) is not None                # no dim: everything
    assert gp.ties()([tensor([[0.5, -1.0], [2.0, 3.0]])], {"dim": 1}) is None


def test_near_ties_within_a_few_ulps_count_and_far_ones_do_not():
    one = tensor([1.0])
    next_up = torch.nextafter(one, tensor([2.0]))
    assert gp.ties()([torch.cat([one, next_up])], {}) is not None
    assert gp.ties()([tensor([1.0, 1.001])], {}) is None
    half = torch.tensor([1.0, 1.0009765625], dtype=torch.float16)   # 1 ulp apart in float16
    assert gp.ties()([half], {}) is not None
    assert gp.ties()([half.to(torch.float64)], {}) is None         # far apart in float64


def test_extreme_ties_only_matter_at_the_extreme():
    x = tensor([[1.0, 1.0, 3.0]])
    assert gp.ties(among="all")([x], {"dim": 1}) is not None
    assert gp.ties(among="max")([x], {"dim": 1}) is None
    assert gp.ties(among="min")([x], {"dim": 1}) is not None
    two_nans = tensor([1.0, math.nan, math.nan])                 # NaN is the max: a tie
    assert gp.ties(among="max")([two_nans], {}) is not None
    assert gp.ties(ignore_nan=True)([two_nans], {}) is None       # nanquantile ignores them


def test_kinks_at_points_with_signed_zero_and_subnormals():
    relu = gp.kinks((0.0,))
    assert relu([tensor([1.0, 0.0, 2.0])], {}) is not None
    assert relu([tensor([1.0, -0.0])], {}) is not None
    assert relu([tensor([1.0, 1e-40])], {}) is not None   # a subnormal: zero where it is flushed
    assert relu([tensor([1e-3, -2.0])], {}) is None
    hardtanh = gp.kinks(lambda kw: (kw["min_val"], kw["max_val"]))
    assert "at -0.5" in hardtanh([tensor([-0.5, 0.0])], {"min_val": -0.5, "max_val": 1.0})
    assert hardtanh([tensor([-0.25, 0.0])], {"min_val": -0.5, "max_val": 1.0}) is None


def test_equal_operands_broadcast():
    pick = gp.equal_operands((0, 1))
    assert pick([tensor([[1.0, 2.0], [3.0, 4.0]]), tensor([5.0, 4.0])], {}) is not None
    assert pick([tensor([[1.0, 2.0], [3.0, 4.0]]), tensor([5.0, 6.0])], {}) is None


def test_repeated_eigenvalues_and_singular_values():
    eigh, svd = gp.repeated_spectrum("eigh"), gp.repeated_spectrum("svd")
    assert "repeated eigenvalues" in eigh([torch.diag(tensor([1.0, 1.0, 2.0]))], {}, RTOL)
    assert eigh([torch.diag(tensor([1.0, 2.0, 3.0]))], {}, RTOL) is None
    # only the triangle eigh reads counts (UPLO)
    a = tensor([[1.0, 5.0], [0.0, 1.0]])
    assert eigh([a], {"UPLO": "L"}, RTOL) is not None      # diag(1, 1)
    assert eigh([a], {"UPLO": "U"}, RTOL) is None          # eigenvalues -4 and 6
    # rank deficient (stride-0 matrices): a zero singular value; two of them: repeated too
    assert "zero singular value" in svd([tensor([[1.0, 2.0, 3.0]]).expand(2, 3)], {}, RTOL)
    assert "repeated singular values" in svd([tensor([[1.0, 2.0, 3.0]]).expand(3, 3)], {}, RTOL)
    assert svd([tensor([[3.0, 0.0], [0.0, 1.0]])], {}, RTOL) is None
    # which: only the extreme (matrix 2-norm) or only zero (pinv's rank)
    assert gp.repeated_spectrum("svd", which="max")([torch.diag(tensor([3.0, 1.0, 1.0]))], {}, RTOL) is None
    assert gp.repeated_spectrum("svd", which="min")([torch.diag(tensor([3.0, 1.0, 1.0]))], {}, RTOL) is not None
    assert gp.repeated_spectrum("svd", which="zero")([torch.diag(tensor([3.0, 1.0, 1.0]))], {}, RTOL) is None


def test_a_near_repeated_eigenvalue_is_undefined_at_the_dtypes_resolution():
    """The gap that counts scales with eps/rtol: 1e-5 of |A| is a repeat for float32
    gradients compared at rtol ~1.7e-4, not for float64 ones at rtol ~1.3e-5."""
    d = torch.diag(torch.tensor([1.0, 1.0 + 1e-5, 2.0], dtype=torch.float64))
    eigh = gp.repeated_spectrum("eigh")
    assert eigh([d.float()], {}, RTOL) is not None
    assert eigh([d], {}, 1e-7 * 2 * 64) is None
    assert eigh([torch.diag(tensor([1.0, 1.1, 2.0]))], {}, RTOL) is None


def test_norm_kinks():
    inf_norm = gp.vector_norm_kinks()
    assert inf_norm([tensor([3.0, -3.0, 1.0])], {"ord": math.inf}) is not None
    assert inf_norm([tensor([3.0, -2.0, 1.0])], {"ord": math.inf}) is None
    assert inf_norm([tensor([3.0, 0.0])], {"ord": 1}) is not None          # |x| at 0
    assert inf_norm([tensor([3.0, 0.0])], {"ord": 2}) is None              # smooth but at 0
    assert inf_norm([tensor([[0.0, 0.0], [1.0, 2.0]])], {"ord": 2, "dim": 1}) is not None
    assert inf_norm([tensor([3.0, 0.0])], {"ord": 0}) is None              # a count
    matrix_norm = catalogue.get("linalg.matrix_norm").grad_undefined
    tied_columns = tensor([[1.0, -2.0], [1.0, 0.0]])                       # |col| sums 2 and 2
    assert matrix_norm([tied_columns], {"ord": 1}, RTOL) is not None
    assert matrix_norm([tensor([[1.0, -2.0], [1.0, 0.5]])], {"ord": 1}, RTOL) is None
    assert matrix_norm([torch.eye(2)], {"ord": 2}, RTOL) is not None       # sigma_1 repeated
    assert matrix_norm([torch.eye(2)], {"ord": "fro"}, RTOL) is None


# Defined points: each op's declaration says nothing there (a normal draw of distinct,
# nonzero values, with keyword arguments of the op).
DEFINED = [
    ("relu", [tensor([0.5, -1.5, 2.0])], {}),
    ("hardswish", [tensor([0.5, -1.5, 3.5])], {}),
    ("hardtanh", [tensor([0.5, -1.5, 2.0])], {"min_val": -1.0, "max_val": 1.0}),
    ("maximum", [tensor([0.5, -1.5]), tensor([0.25, 1.0])], {}),
    ("amax", [tensor([[1.0, 2.0], [2.0, 1.0]])], {"dim": 1}),
    ("quantile", [tensor([0.3, 0.1, 0.7])], {"q": 0.5}),
    ("l1_loss", [tensor([0.5, 1.0]), tensor([0.25, 2.0])], {}),
    ("smooth_l1_loss", [tensor([0.5, 1.0]), tensor([0.5, 2.0])], {"beta": 1.0}),   # C1: no kink
    ("linalg.svdvals", [tensor([[3.0, 1.0], [0.0, 1.0]])], {}),
    ("linalg.eigvalsh", [tensor([[2.0, 1.0], [1.0, -1.0]])], {}),
    ("fmod_float", [tensor([5.5, -3.0]), tensor([2.0, 4.0])], {}),
    ("std", [tensor([[1.0, 2.0], [3.0, 3.5]])], {"dim": 1}),
    ("elu", [tensor([0.0, 1.0])], {"alpha": 1.0}),                                  # C1 at 0
]
UNDEFINED = [
    ("relu", [tensor([0.5, 0.0])], {}, "kink"),
    ("hardswish", [tensor([3.0])], {}, "kink"),
    ("maximum", [tensor([0.5, -1.5]), tensor([0.5, 1.0])], {}, "equal"),
    ("amax", [tensor([[2.0, 2.0], [2.0, 1.0]])], {"dim": 1}, "max"),
    ("quantile", [tensor([0.3, 0.3, 0.7])], {"q": 0.5}, "ties"),
    ("l1_loss", [tensor([0.5, 1.0]), tensor([0.25, 1.0])], {}, "equal"),
    ("smooth_l1_loss", [tensor([0.5, 1.0]), tensor([0.5, 2.0])], {"beta": 0.0}, "equal"),
    ("fmod_float", [tensor([6.0, -3.0]), tensor([2.0, 4.0])], {}, "integer"),
    ("std", [tensor([[3.0, 3.0], [3.0, 3.5]])], {"dim": 1}, "constant"),
    ("elu", [tensor([0.0, 1.0])], {"alpha": 0.5}, "kink"),
    ("margin_ranking_loss", [tensor([1.0]), tensor([0.5]), tensor([1.0])], {"margin": 0.5}, "margin"),
    ("rnn_relu_cell", [torch.zeros(1, 2), torch.zeros(1, 1), torch.ones(1, 2), torch.ones(1, 1),
                       torch.zeros(1), torch.zeros(1)], {"bias": True}, "pre-activation"),
    ("scatter_reduce", [torch.zeros(2), torch.tensor([0, 0]), tensor([1.0, 1.0])],
     {"dim": 0, "reduce": "amax", "include_self": False}, "tie"),
    ("grid_sample", [torch.ones(1, 1, 3, 3), torch.zeros(1, 1, 1, 2)],
     {"mode": "bilinear", "padding_mode": "zeros", "align_corners": True}, "pixel boundary"),
]


@pytest.mark.parametrize("op,inputs,kwargs", DEFINED, ids=[d[0] for d in DEFINED])
def test_declarations_say_nothing_where_the_gradient_is_defined(op, inputs, kwargs):
    assert catalogue.get(op).grad_undefined(inputs, kwargs, 1e-4) is None


@pytest.mark.parametrize("op,inputs,kwargs,word", UNDEFINED, ids=[u[0] for u in UNDEFINED])
def test_declarations_name_the_point_where_it_is_not(op, inputs, kwargs, word):
    why = catalogue.get(op).grad_undefined(inputs, kwargs, 1e-4)
    assert why and word in why, why


# -- (b) the grads oracle gives no verdict there, and still finds real backward bugs ------

def t(shape, dtype="float32", layout=Layout(), seed=1, **values):
    return TensorRecipe(tuple(shape), dtype, layout, ValueRecipe(seed=seed, **values))


# Another valid choice where the result is not unique, from the fault target: a case of
# each op that makes its fault fire.
OTHER_CHOICE = [
    ("sort_ties_reversed", Case("quantile", (t((4, 3), layout=Layout(expanded=(0,))),),
                                (("q", 0.25), ("dim", 0)), "grad"), "ties"),
    ("sort_ties_reversed", Case("nanquantile", (t((5,), distribution="small_int"),), (("q", 0.5),), "grad"),
     "ties"),
    ("eigh_other_basis", Case("linalg.eigvalsh", (t((3, 3), layout=Layout(expanded=(0, 1))),), (), "grad"),
     "repeated eigenvalues"),
    ("hardtanh_backward_at_bounds", Case("relu6", (t((6,), distribution="small_int", seed=3),), (), "grad"),
     "kink"),
    ("hardtanh_backward_at_bounds", Case("hardtanh", (t((6,), distribution="small_int", seed=3),),
                                         (("min_val", -1.0), ("max_val", 1.0)), "grad"), "kink"),
]
IDS = [f"{c[0]}-{c[1].op}" for c in OTHER_CHOICE]


@pytest.fixture
def without_numeric_check(monkeypatch):
    monkeypatch.setattr(grads_oracle, "numeric_kink", lambda *a: None)


@pytest.fixture
def replaced(monkeypatch):
    """replaced(op, **changes): the catalogue's spec of ``op`` changed, for this test only."""
    catalogue.all_ops()

    def replace(op, **changes):
        monkeypatch.setitem(catalogue.REGISTRY, op, dataclasses.replace(catalogue.get(op), **changes))
    return replace


@pytest.mark.parametrize("fault,case,word", OTHER_CHOICE, ids=IDS)
def test_another_subgradient_is_no_finding(fault, case, word):
    result = judge_case(case, FaultTarget([fault]), ("values", "grads", "arbiter"))
    assert result.failures == ()
    assert word in result.grad_undefined


@pytest.mark.parametrize("fault,case,word", OTHER_CHOICE, ids=IDS)
def test_the_numeric_check_covers_an_op_without_a_declaration(fault, case, word, replaced):
    replaced(case.op, grad_undefined=None)
    result = judge_case(case, FaultTarget([fault]), ("values", "grads"))
    assert result.failures == ()
    assert result.grad_undefined.startswith("not differentiable at element")


@pytest.mark.parametrize("fault,case,word", OTHER_CHOICE, ids=IDS)
def test_without_the_rule_the_other_choice_would_be_reported(fault, case, word, replaced,
                                                             without_numeric_check):
    """The faults above do change the gradients: with neither the declaration nor the
    numeric check, each case is a grads finding (the false positives of the issue)."""
    replaced(case.op, grad_undefined=None)
    result = judge_case(case, FaultTarget([fault]), ("values", "grads"))
    assert [(f["oracle"], f["kind"]) for f in result.failures] == [("grads", "wrong-values")]
    assert result.grad_undefined is None


def _corrupt(name, ops):
    return Fault(name, "test", ops, lambda f, a, k: True, "corrupt")


DEFINED_BACKWARD_BUGS = [
    # (a fault on a backward kernel, a case at a point where the gradient is defined)
    (FAULTS["gelu_tanh_backward"], Case("gelu", (t((5,)),), (("approximate", "tanh"),), "grad")),
    (_corrupt("hardtanh_bwd", ("aten::hardtanh_backward",)), Case("relu6", (t((5,), seed=4),), (), "grad")),
    (_corrupt("sort_idx", ("aten::scatter_add",)), Case("quantile", (t((5,), seed=2),), (("q", 0.3),), "grad")),
    (_corrupt("eigh_mm", ("aten::mm",)), Case("linalg.eigvalsh", (t((3, 3), seed=2),), (), "grad")),
]


@pytest.mark.parametrize("fault,case", DEFINED_BACKWARD_BUGS, ids=[f[0].name for f in DEFINED_BACKWARD_BUGS])
def test_a_wrong_backward_at_a_defined_point_is_still_found(fault, case):
    assert catalogue.get(case.op).grad_undefined is None or \
        catalogue.get(case.op).grad_undefined(case.materialize("cpu"), case.kwargs_dict(), 1e-4) is None
    result = judge_case(case, FaultTarget([fault]), ("values", "grads", "arbiter"))
    assert [(f["oracle"], f["kind"]) for f in result.failures] == [("grads", "wrong-values")]
    assert result.grad_undefined is None


def test_the_forward_and_errors_of_the_grad_variant_are_still_judged_at_a_kink():
    at_kink = Case("relu6", (t((6,), distribution="small_int", seed=3),), (), "grad")
    assert catalogue.get("relu6").grad_undefined(at_kink.materialize("cpu"), {}, 1e-4)
    wrong_forward = _corrupt("hardtanh_fwd", ("aten::hardtanh",))
    found = judge_case(at_kink, FaultTarget([wrong_forward]), ("values", "grads", "errors")).failures
    assert [f["oracle"] for f in found] == ["values"]
    raising = Fault("hardtanh_bwd_raises", "test", ("aten::hardtanh_backward",), lambda f, a, k: True,
                    "raise", message="backward kernel failed")
    found = judge_case(at_kink, FaultTarget([raising]), ("values", "grads", "errors")).failures
    assert [(f["oracle"], f["kind"]) for f in found] == [("errors", "dut-raises")]


def test_the_numeric_check_calls_smooth_ops_differentiable():
    """sin's backward corrupted at a smooth point: the numeric check has no objection."""
    cos = _corrupt("cos", ("aten::cos",))
    spec = catalogue.get("sin")
    assert spec.grad_undefined is None
    result = judge_case(Case("sin", (t((4,), distribution="small_int"),), (), "grad"), FaultTarget([cos]),
                     ("values", "grads"))
    assert [f["oracle"] for f in result.failures] == ["grads"] and result.grad_undefined is None


def test_a_declaration_that_fails_reports_the_mismatch(replaced):
    def broken(inputs, kwargs, rtol):
        raise ValueError("bug in a predicate")
    replaced("gelu", grad_undefined=broken)
    case = Case("gelu", (t((5,)),), (("approximate", "tanh"),), "grad")
    result = judge_case(case, FaultTarget([FAULTS["gelu_tanh_backward"]]), ("values", "grads"))
    assert [f["oracle"] for f in result.failures] == ["grads"]


class _AnsweringPool:
    """A worker pool stand-in that answers every case with ``outcome``."""

    def __init__(self, outcome):
        self.outcome = outcome

    def fresh(self):
        pass

    def run(self, case_json, oracles, op, timeout_s=None):
        return self.outcome


def test_triage_takes_an_undefined_gradient_as_no_answer_not_as_a_pass():
    """A reduction or ablation step that lands on a kink must not count as "the bug is
    gone" (the ablation would call the feature it removed necessary)."""
    from mpsfuzz.triage.probe import INVALID, PASSES, Prober
    case = Case("relu6", (t((4,)),), (), "grad")
    undefined = CaseOutcome(valid=True, grad_undefined="input 0 sits on a kink of the op (at 0)")
    prober = Prober(_AnsweringPool(undefined), ("values", "grads"))
    assert prober.classify(case, ("relu6", "grads", "wrong-values")).verdict == INVALID
    assert prober.classify(case, ("relu6", "values", "wrong-values")).verdict == PASSES
    defined = dataclasses.replace(undefined, grad_undefined=None)
    assert Prober(_AnsweringPool(defined), ("values", "grads")).classify(
        case, ("relu6", "grads", "wrong-values")).verdict == PASSES


def test_replaying_a_gradient_finding_at_an_undefined_point_says_why_it_no_longer_fails():
    """Findings recorded before this rule (the issue's quantile of an expanded input)
    replay as fixed, saying that the gradient has no verdict there."""
    from mpsfuzz.corpus.finding import FIXED, Finding
    from mpsfuzz.corpus.replay import replay_one
    from mpsfuzz.oracles import Failure
    case = Case("quantile", (t((4, 3), layout=Layout(expanded=(0,))),), (("q", 0.25), ("dim", 0)), "grad")
    failure = Failure(oracle="grads", kind="wrong-values", title="t", message="m", severity="high",
                      dedup_key=("wrong-values",))
    finding = Finding.create(case, failure, target_name="cuda", target_spec="cuda", device="cuda")
    why = "ties among the reduced elements of input 0 along dim 0 (the gradient picks one of them)"
    pool = _AnsweringPool(CaseOutcome(valid=True, grad_undefined=why))
    assert replay_one(pool, finding) == (FIXED, f"no gradient verdict: {why}")


@pytest.mark.slow
def test_a_campaign_reports_the_wrong_backward_and_not_the_other_subgradients(tmp_path):
    """End to end: the three other-choice faults and one real backward bug on their ops;
    only the real one (gelu with approximate='tanh') is a finding."""
    corpus = tmp_path / "corpus"
    run = mpsfuzz("run", "--ops", "quantile,nanquantile,linalg.eigvalsh,relu6,hardtanh,gelu",
                  "--target", FAULT_TARGET, "--max-cases", "720", "--seed", "1", "--corpus", str(corpus),
                  "--timeout", "5", "--shrink-budget", "30", "--no-progress",
                  faults="sort_ties_reversed,eigh_other_basis,hardtanh_backward_at_bounds,gelu_tanh_backward",
                  cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert [(f["op"], f["oracle"]) for f in findings_in(corpus)] == [("gelu", "grads")], run.stdout


# -- (c) every non-smooth op with a grad variant declares where its gradient is undefined --

# Non-smooth ops with a grad variant: kinks, ties, picks between operands, zero spreads,
# repeated spectra, hinges. Each must declare grad_undefined.
NON_SMOOTH = {
    # elementwise
    "abs", "copysign", "copysign_scalar", "clamp", "clamp_tensor", "clamp_min_tensor", "fmax", "fmin",
    "fmax_cpu_scalar", "fmin_cpu_scalar",
    "maximum", "minimum", "max_binary", "min_binary", "maximum_scalar", "fmod_float", "remainder_float",
    "logit", "atan2", "atan2_scalar", "hypot", "special.i0e",
    # reductions
    "amax", "amin", "quantile", "nanquantile", "quantile_tensor_q", "nanquantile_tensor_q", "std",
    "std_mean", "norm", "dist", "renorm", "foreach_norm",
    # linalg
    "linalg.eigvalsh", "linalg.svdvals", "linalg.pinv", "linalg.pinv_hermitian", "linalg.matrix_norm",
    "linalg.norm", "linalg.vector_norm", "linalg.cond",
    # nn: activations, pooling, resampling, normalisation, RNN cells, losses
    "relu", "relu6", "leaky_relu", "elu", "selu", "hardtanh", "hardsigmoid", "hardswish", "hardshrink",
    "softshrink", "rrelu_eval", "threshold", "prelu", "softplus", "lp_pool1d", "lp_pool2d", "normalize",
    "cosine_similarity",
    # (not a kink: scores too large for their dtype to round to within 1)
    "flex_attention",
    "grid_sample", "rnn_relu_cell", "l1_loss", "smooth_l1_loss", "margin_ranking_loss",
    "hinge_embedding_loss", "cosine_embedding_loss", "triplet_margin_loss", "multi_margin_loss",
    "multilabel_margin_loss", "poisson_nll_loss", "embedding_bag_max",
    # indexing
    "scatter_reduce",
}
# Non-smooth ops that need no declaration, and why (there is nothing to choose, or the
# derivative is continuous where the function bends).
EXEMPT = {
    "floor": "derivative 0 by definition", "ceil": "derivative 0 by definition",
    "round": "derivative 0 by definition", "round_decimals": "derivative 0 by definition",
    "trunc": "derivative 0 by definition", "frac": "derivative 1 by definition",
    "sign": "derivative 0 by definition", "sgn": "real inputs only: derivative 0 by definition",
    "angle": "real inputs only: derivative 0 by definition",
    "div_rounding": "derivative 0 with a rounding mode, smooth without",
    "fmod_scalar": "derivative 1 w.r.t. the tensor", "remainder_scalar": "derivative 1 w.r.t. the tensor",
    "nan_to_num": "smooth on finite inputs; 0 where replaced",
    "celu": "C1 at 0", "huber_loss": "C1", "softsign": "C1 at 0",
    "special.i1e": "C1 at 0",
}


def test_every_non_smooth_grad_op_declares_where_its_gradient_is_undefined():
    ops = catalogue.all_ops()
    missing = sorted(n for n in NON_SMOOTH if not (n in ops and ops[n].grad and ops[n].grad_undefined))
    assert not missing, f"non-smooth grad ops without grad_undefined: {missing}"
    # (the large size class's variants share their op's declaration)
    declared = {n for n, s in ops.items() if s.grad_undefined is not None and not s.size_class}
    assert declared == NON_SMOOTH, f"declared but not listed here: {sorted(declared - NON_SMOOTH)}"
    for name, why in EXEMPT.items():
        assert name in ops and ops[name].grad and ops[name].grad_undefined is None, (name, why)


@pytest.mark.parametrize("name", sorted(NON_SMOOTH))
def test_declarations_run_on_the_cases_a_campaign_draws(name):
    spec = catalogue.get(name)
    outcomes = set()
    for case in strategies.example_cases(spec, 25, seed=5):
        why = spec.grad_undefined(case.materialize("cpu"), case.kwargs_dict(), 1e-4)
        assert why is None or (isinstance(why, str) and why), why
        outcomes.add(why is None)
    assert True in outcomes, f"{name}: no drawn case has a defined gradient"
