"""The fault-injecting target: each fault fires exactly on its trigger, and nowhere else."""
from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch

from mpsfuzz.testing import faults as F
from mpsfuzz.testing.faults import FAULTS, FaultTarget

ROOT = Path(__file__).resolve().parents[1]

warnings.filterwarnings("ignore", message="ComplexHalf support is experimental")

EXPECTED_FAULTS = {
    "bitwise_noncontig": "corrupt", "triu_tril_gt3d": "corrupt", "sqrt_chalf": "corrupt",
    "add_alpha_abort": "abort", "cholesky_ex_empty": "raise", "fmax_fmin_scalar": "corrupt",
    "mm_mixed_dtype_segv": "segfault", "shift_scalar_tensor": "corrupt",
    "lu_factor_noncontig": "corrupt", "prod_hang_5d": "hang",
    "atan2_int64_unsupported": "unsupported", "unary_offset": "corrupt",
    "lgamma_negative": "corrupt", "where_inf": "corrupt", "var_5d": "corrupt",
    "cumsum_leak": "leak", "sub_inplace_spill": "spill",
    "sdpa_gt4d": "corrupt", "smooth_l1_empty": "raise", "mse_loss_empty_abort": "abort",
    "multinomial_noncontig": "ignore_strides", "avg_pool2d_half": "corrupt",
    "silu_noncontig": "ignore_strides", "conv_backward_noncontig": "corrupt",
    "batch_norm_backward_3d": "corrupt", "constant_pad_zero": "raise",
    "index_copy_strided_index": "corrupt", "index_select_0d": "corrupt", "var_0d_raise": "raise",
    "softmax_gt4d": "corrupt", "fft_noncontig": "ignore_strides", "sum_empty_dim": "corrupt",
    "sub_out_resize": "corrupt",
}


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def _randn(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=_g(seed)).to(dtype)


def _ints(*shape, dtype=torch.int32, seed=0):
    return torch.randint(-100, 100, shape, generator=_g(seed), dtype=dtype)


def _flat_tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for item in x for t in _flat_tensors(item)]
    return []


def _identical(a, b) -> bool:
    """Same structure, dtypes, shapes and values (NaN equals NaN)."""
    ta, tb = _flat_tensors(a), _flat_tensors(b)
    if len(ta) != len(tb):
        return False
    for x, y in zip(ta, tb):
        if x.dtype != y.dtype or x.shape != y.shape:
            return False
        if x.dtype == torch.complex32:
            x, y = x.to(torch.complex64), y.to(torch.complex64)
        if x.is_floating_point() or x.is_complex():
            if not torch.equal(torch.nan_to_num(x, nan=0.25), torch.nan_to_num(y, nan=0.25)) \
                    or not torch.equal(x.isnan(), y.isnan()):
                return False
        elif not torch.equal(x, y):
            return False
    return True


def _same_layout(a, b) -> bool:
    ta, tb = _flat_tensors(a), _flat_tensors(b)
    return len(ta) == len(tb) and all(x.dtype == y.dtype and x.shape == y.shape
                                      for x, y in zip(ta, tb))


# (fault, id, fn, triggering args, near-identical non-triggering args)
def _corrupt_cases():
    a, b = _ints(3, 4, seed=1), _ints(3, 4, seed=2)
    x4, x3 = _randn(2, 2, 3, 3), _randn(2, 3, 3)
    m = _randn(4, 4, seed=3)
    v = _randn(6, seed=4)
    cases = []
    for op in (torch.bitwise_and, torch.bitwise_or, torch.bitwise_xor):
        cases.append(("bitwise_noncontig", op.__name__, op, (a.t(), b.t()),
                      (a.t().contiguous(), b.t().contiguous())))
    cases += [
        ("bitwise_noncontig", "second_only", torch.bitwise_xor,
         (a.t().contiguous(), b.t()), (a.t().contiguous(), b.t().contiguous())),
        ("bitwise_noncontig", "operator", lambda x, y: x & y, (a[:, ::2], b[:, ::2]),
         (a[:, ::2].contiguous(), b[:, ::2].contiguous())),
        ("triu_tril_gt3d", "triu", torch.triu, (x4,), (x3,)),
        ("triu_tril_gt3d", "tril_diag", lambda x: torch.tril(x, -1), (x4,), (x3,)),
        ("triu_tril_gt3d", "method", lambda x: x.triu(1), (_randn(1, 1, 1, 2, 2),), (_randn(1, 2, 2),)),
        ("sqrt_chalf", "sqrt", torch.sqrt, (_randn(5, dtype=torch.complex64).to(torch.complex32),),
         (_randn(5, dtype=torch.complex64),)),
        ("fmax_fmin_scalar", "fmax", torch.fmax, (v, torch.tensor(0.1)), (v, torch.tensor([0.1]))),
        ("fmax_fmin_scalar", "fmin", torch.fmin, (v, torch.tensor(0.1)), (v, torch.tensor([0.1]))),
        ("fmax_fmin_scalar", "fmin_2d", torch.fmin, (m, torch.tensor(0.0)), (torch.tensor(0.0), m)),
        ("shift_scalar_tensor", "function", lambda t: torch.bitwise_left_shift(3, t),
         (torch.arange(5),), None),
        ("shift_scalar_tensor", "operator", lambda t: 3 << t, (torch.arange(5),), None),
        ("lu_factor_noncontig", "lu_factor", torch.linalg.lu_factor, (m.t(),), (m.t().contiguous(),)),
        ("lu_factor_noncontig", "lu_factor_ex", torch.linalg.lu_factor_ex, (m.t(),),
         (m.t().contiguous(),)),
        ("unary_offset", "neg", torch.neg, (v[1:],), (v[1:].clone(),)),
        ("unary_offset", "exp", torch.exp, (v[2:],), (v[2:].clone(),)),
        ("unary_offset", "neg_operator", lambda t: -t, (m[1],), (m[1].clone(),)),
        ("lgamma_negative", "lgamma", torch.lgamma, (torch.tensor([2.5, -0.5, 3.0]),),
         (torch.tensor([2.5, 0.5, 3.0]),)),
        ("where_inf", "self_inf", torch.where,
         (torch.tensor([True, False]), torch.tensor([1.0, -math.inf]), torch.tensor([2.0, 3.0])),
         (torch.tensor([True, False]), torch.tensor([1.0, -1e30]), torch.tensor([2.0, 3.0]))),
        ("where_inf", "other_inf", torch.where,
         (torch.tensor([True, False]), torch.tensor([1.0, 4.0]), torch.tensor([math.inf, 3.0])),
         (torch.tensor([True, False]), torch.tensor([1.0, 4.0]), torch.tensor([math.nan, 3.0]))),
        ("where_inf", "scalar_other", lambda c, t: torch.where(c, t, math.inf),
         (torch.tensor([True, False]), torch.tensor([1.0, 4.0])), None),
        ("var_5d", "var", torch.var, (_randn(1, 1, 1, 2, 3),), (_randn(1, 1, 2, 3),)),
        ("var_5d", "var_dim", lambda t: torch.var(t, dim=-1, unbiased=False),
         (_randn(2, 1, 1, 2, 3),), (_randn(2, 1, 2, 3),)),
    ]
    return cases


CORRUPT_CASES = _corrupt_cases()
CORRUPT_IDS = [f"{c[0]}-{c[1]}" for c in CORRUPT_CASES]


def _eager(fn, args):
    """CPU eager, computing in the wider dtype where CPU has no kernel (complex32)."""
    try:
        return fn(*args)
    except NotImplementedError:
        wide = [t.to(torch.complex64) if t.dtype == torch.complex32 else t for t in args]
        return fn(*wide).to(torch.complex32)


def test_registry_has_the_faults():
    assert {name: FAULTS[name].effect for name in EXPECTED_FAULTS} == EXPECTED_FAULTS
    for name, fault in FAULTS.items():
        assert fault.name == name and fault.effect in F.EFFECTS and fault.emulates


@pytest.mark.parametrize("name,case_id,fn,trigger,near", CORRUPT_CASES, ids=CORRUPT_IDS)
def test_corrupt_fires_on_trigger_only(name, case_id, fn, trigger, near):
    target = FaultTarget([name])
    snapshot = [t.clone() for t in trigger]
    got = target.run(fn, *trigger)
    want = _eager(fn, trigger)
    assert target.fired[name] >= 1
    assert _same_layout(got, want)
    assert not _identical(got, want)
    assert all(_identical(s, t) for s, t in zip(snapshot, trigger)), "inputs must not change"
    if near is not None:
        target.fired.clear()
        assert _identical(target.run(fn, *near), fn(*near))
        assert not target.fired


NEAR_CASES = [c for c in CORRUPT_CASES if c[4] is not None]


@pytest.mark.parametrize("name,case_id,fn,trigger,near", NEAR_CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in NEAR_CASES])
def test_all_faults_target_is_exact_off_trigger(name, case_id, fn, trigger, near):
    target = FaultTarget()  # every fault at once
    assert _identical(target.run(fn, *near), fn(*near))
    assert not target.fired


def _input_grad(forward):
    """fn(x, *rest) -> the gradient of forward(x, *rest).sum() w.r.t. x, keeping x's layout."""
    def fn(x, *rest):
        x = x.detach().requires_grad_(True)
        return torch.autograd.grad(forward(x, *rest).sum(), x)[0]
    return fn


def _sub_out(a, b, out):
    torch.sub(a, b, out=out)
    return out


# Faults of the nn, loss, attention, backward, indexing, out= and RNG families:
# (fault, id, fn, triggering args, near-identical non-triggering args). A corrupting or
# stride-ignoring fault changes the result on its trigger; a raising one raises there;
# on the near args each gives eager CPU's exact result without firing.
_q5, _q4 = _randn(1, 2, 1, 3, 4, seed=5), _randn(2, 1, 3, 4, seed=5)
_w = _randn(3, 4).abs() + 0.1
DEPTH_CASES = [
    ("sdpa_gt4d", "sdpa", torch.nn.functional.scaled_dot_product_attention,
     (_q5, _q5.flip(-1), _q5 * 2), (_q4, _q4.flip(-1), _q4 * 2)),
    ("smooth_l1_empty", "loss", torch.nn.functional.smooth_l1_loss,
     (_randn(0, 3), _randn(0, 3)), (_randn(1, 3), _randn(1, 3, seed=1))),
    ("avg_pool2d_half", "pool", lambda x: torch.nn.functional.avg_pool2d(x, 2),
     (_randn(1, 2, 4, 4, dtype=torch.float16),), (_randn(1, 2, 4, 4),)),
    ("silu_noncontig", "transposed", torch.nn.functional.silu, (_randn(3, 4).t(),), (_randn(3, 4).t().contiguous(),)),
    ("silu_noncontig", "gapped", torch.nn.functional.silu, (_randn(8)[::2],), (_randn(8)[::2].clone(),)),
    ("conv_backward_noncontig", "channels_last",
     _input_grad(lambda x, w: torch.nn.functional.conv2d(x, w)),
     (_randn(1, 3, 4, 4).to(memory_format=torch.channels_last), _randn(2, 3, 2, 2, seed=1)),
     (_randn(1, 3, 4, 4), _randn(2, 3, 2, 2, seed=1))),
    ("batch_norm_backward_3d", "train",
     _input_grad(lambda x: torch.nn.functional.batch_norm(x, None, None, training=True)),
     (_randn(2, 3, 4),), (_randn(2, 3),)),
    ("constant_pad_zero", "pad", lambda x: torch.nn.functional.pad(x, (0, 0), value=1.0),
     (_randn(2, 3),), None),
    ("index_copy_strided_index", "index", lambda x, i, v: x.index_copy(0, i, v),
     (_randn(4, 3), torch.tensor([3, 0, 1, 2])[::2], _randn(2, 3, seed=1)),
     (_randn(4, 3), torch.tensor([3, 0, 1, 2])[::2].clone(), _randn(2, 3, seed=1))),
    ("index_select_0d", "scalar", lambda x, i: torch.index_select(x, 0, i),
     (torch.tensor(1.5), torch.tensor([0])), (torch.tensor([1.5]), torch.tensor([0]))),
    ("var_0d_raise", "var", torch.var, (torch.tensor(1.5),), (torch.tensor([1.5, 2.0]),)),
    ("softmax_gt4d", "softmax", lambda x: torch.softmax(x, -1), (_q5,), (_q4,)),
    ("softmax_gt4d", "log_softmax", lambda x: torch.log_softmax(x, 0), (_q5,), (_q4,)),
    ("fft_noncontig", "rfft", torch.fft.rfft, (_randn(4, 3).t(),), (_randn(4, 3).t().contiguous(),)),
    ("fft_noncontig", "fft_complex", torch.fft.fft, (_randn(4, 3, dtype=torch.complex64).t(),),
     (_randn(4, 3, dtype=torch.complex64).t().contiguous(),)),
    ("sum_empty_dim", "sum", lambda x: x.sum(0), (_randn(0, 3),), (_randn(1, 3),)),
    ("sub_out_resize", "resized", _sub_out, (_randn(2, 3), _randn(3, seed=1), torch.empty(0)),
     (_randn(2, 3), _randn(3, seed=1), torch.empty(2, 3))),
]


@pytest.mark.parametrize("name,case_id,fn,trigger,near", DEPTH_CASES, ids=[f"{c[0]}-{c[1]}" for c in DEPTH_CASES])
def test_depth_faults_fire_on_their_trigger_only(name, case_id, fn, trigger, near):
    target = FaultTarget([name])
    if FAULTS[name].effect == "raise":
        with pytest.raises(RuntimeError, match=re.escape(FAULTS[name].message)):
            target.run(fn, *trigger)
    else:
        trigger_copy = [t.clone() for t in trigger]
        got, want = target.run(fn, *trigger), fn(*trigger_copy)
        assert _same_layout(got, want) and not _identical(got, want)
    assert target.fired[name] >= 1
    if near is not None:
        target.fired.clear()
        near_copy = [t.clone() for t in near]
        assert _identical(target.run(fn, *near), fn(*near_copy))
        assert not target.fired


def test_empty_mse_loss_aborts_only_when_empty():
    code = ("import torch; from mpsfuzz.testing.faults import FaultTarget; t = FaultTarget(['mse_loss_empty_abort']);"
            "t.run(torch.nn.functional.mse_loss, torch.ones(2), torch.zeros(2)); print('alive', flush=True);"
            "t.run(torch.nn.functional.mse_loss, torch.ones(0), torch.zeros(0)); print('survived')")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == -6 and "alive" in run.stdout and "survived" not in run.stdout


def test_ignoring_strides_reads_the_storage_densely():
    x = torch.arange(12.0).view(3, 4)
    assert torch.equal(F._read_as_contiguous(x.t()), torch.arange(12.0).view(4, 3))
    assert torch.equal(F._read_as_contiguous(x[:, ::2]), torch.arange(6.0).view(3, 2))
    assert torch.equal(F._read_as_contiguous(x[1:, 1:]), torch.arange(5.0, 11.0).view(2, 3))
    # an expanded view reads past its storage: the storage repeats
    assert torch.equal(F._read_as_contiguous(torch.arange(2.0).view(2, 1).expand(2, 3)),
                       torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0]]))
    assert F._read_as_contiguous(x) is x


def test_multinomial_fault_samples_zero_probability_classes_of_a_transposed_weight():
    # rows [1, 0, 0] and [0, 1, 0] over transposed storage [1, 0, 0, 1, 0, 0]: read densely,
    # row 1 becomes [1, 0, 0]
    weights = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]).t().contiguous().t()
    target = FaultTarget(["multinomial_noncontig"])
    torch.manual_seed(0)
    got = target.run(torch.multinomial, weights, 1)
    assert target.fired["multinomial_noncontig"] == 1
    assert got.flatten().tolist() == [0, 0]  # the real answer is forced: [0, 1]
    assert torch.multinomial(weights, 1).flatten().tolist() == [0, 1]


def test_lu_factor_corrupts_lu_only():
    m = _randn(4, 4, seed=3)
    target = FaultTarget(["lu_factor_noncontig"])
    got = target.run(torch.linalg.lu_factor_ex, m.t())
    want = torch.linalg.lu_factor_ex(m.t())
    assert not torch.equal(got.LU, want.LU)
    assert torch.equal(got.pivots, want.pivots) and torch.equal(got.info, want.info)
    assert type(got) is type(want)


def test_corrupt_out_variant_in_place():
    x = _randn(1, 2, 3, 3)
    out = torch.empty_like(x)
    FaultTarget(["triu_tril_gt3d"]).run(torch.triu, x, out=out)
    assert not torch.equal(out, torch.triu(x))


def test_shift_dispatches_scalar_tensor_overload_only():
    target = FaultTarget(["shift_scalar_tensor"])
    t = torch.arange(5)
    for fn in (lambda: torch.bitwise_left_shift(t, 2), lambda: t << 2,
               lambda: torch.bitwise_left_shift(torch.tensor(3), t)):
        assert torch.equal(target.run(fn), fn())
    assert not target.fired


def test_fmax_both_0d_not_triggered():
    target = FaultTarget(["fmax_fmin_scalar"])
    a, b = torch.tensor(1.0), torch.tensor(2.0)
    assert torch.equal(target.run(torch.fmax, a, b), torch.fmax(a, b))
    assert not target.fired


@pytest.mark.parametrize("fn", [torch.linalg.cholesky_ex, torch.linalg.cholesky], ids=["ex", "public"])
@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (0, 3, 3)])
def test_cholesky_empty_raises(fn, shape):
    target = FaultTarget(["cholesky_ex_empty"])
    with pytest.raises(RuntimeError, match="MPSGraph: placeholder tensor is empty"):
        target.run(fn, torch.empty(shape))
    a = torch.eye(3) * 2
    assert _identical(target.run(fn, a), fn(a))


def test_atan2_int64_unsupported():
    target = FaultTarget(["atan2_int64_unsupported"])
    a, b = torch.arange(1, 5), torch.arange(4, 0, -1)
    with pytest.raises(NotImplementedError, match=r"\"atan2_mps\" not implemented for 'Long'"):
        target.run(torch.atan2, a, b)
    a32, b32 = a.to(torch.int32), b.to(torch.int32)
    assert torch.equal(target.run(torch.atan2, a32, b32), torch.atan2(a32, b32))


def test_cumsum_leaks():
    F.release_leaks()
    target = FaultTarget(["cumsum_leak"])
    x = _randn(10)
    sizes = [target.memory_allocated()]
    for _ in range(3):
        assert torch.equal(target.run(torch.cumsum, x, 0), torch.cumsum(x, 0))
        sizes.append(target.memory_allocated())
    assert sizes == [0, 1 << 20, 2 << 20, 3 << 20]
    # Other ops do not leak.
    target.run(torch.cumprod, x, 0)
    assert target.memory_allocated() == 3 << 20
    F.release_leaks()
    clean = FaultTarget([])
    clean.run(torch.cumsum, x, 0)
    assert clean.memory_allocated() == 0


# Triggers of the crashing faults, as source for a child process and in-process.
CRASH_CASES = {
    "add_alpha_abort": "torch.add(torch.ones(3), torch.ones(3), alpha=2)",
    "mm_mixed_dtype_segv": "torch.mm(torch.ones(2, 2), torch.ones(2, 2, dtype=torch.float64))",
    "prod_hang_5d": "torch.prod(torch.ones(1, 1, 1, 1, 2))",
}


def _child(fault: str, call: str) -> subprocess.Popen:
    src = textwrap.dedent(f"""
        import sys, torch
        from mpsfuzz.testing.faults import FaultTarget
        target = FaultTarget([{fault!r}])
        print("ready", flush=True)
        target.run(lambda: {call})
        print("returned", flush=True)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, "-c", src], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("fault,signum", [("add_alpha_abort", -6), ("mm_mixed_dtype_segv", -11)])
def test_crash_faults_kill_the_process(fault, signum):
    proc = _child(fault, CRASH_CASES[fault])
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == signum, (out, err)
    assert out.startswith("ready") and "returned" not in out


def test_hang_fault_never_returns():
    proc = _child("prod_hang_5d", CRASH_CASES["prod_hang_5d"])
    try:
        assert proc.stdout.readline().strip() == "ready"
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=2)
    finally:
        proc.kill()
        proc.communicate()


def test_crash_faults_off_trigger_in_process():
    target = FaultTarget()  # all faults
    x, y = _randn(3), _randn(3, seed=1)
    for fn in (lambda: torch.add(x, y), lambda: torch.add(x, y, alpha=1), lambda: x + y,
               lambda: torch.sub(x, y, alpha=2)):
        assert torch.equal(target.run(fn), fn())
    m = _randn(2, 2)
    assert torch.equal(target.run(torch.mm, m, m), torch.mm(m, m))
    t4 = _randn(1, 2, 1, 3)
    assert torch.equal(target.run(torch.prod, t4), torch.prod(t4))
    assert torch.equal(target.run(torch.prod, t4, 1), torch.prod(t4, 1))
    assert not target.fired


def test_clean_target_never_misbehaves():
    clean = FaultTarget([])
    assert clean.name == "clean-cpu" and FaultTarget().name == "faulty-cpu"
    for name, case_id, fn, trigger, near in CORRUPT_CASES:
        try:
            want = fn(*trigger)
        except NotImplementedError:  # sqrt of complex32: CPU has no kernel
            with pytest.raises(NotImplementedError):
                clean.run(fn, *trigger)
            continue
        assert _identical(clean.run(fn, *trigger), want), (name, case_id)
    cholesky = clean.run(torch.linalg.cholesky_ex, torch.empty(0, 0))
    assert _identical(cholesky, torch.linalg.cholesky_ex(torch.empty(0, 0)))
    a = torch.arange(1, 5)
    assert torch.equal(clean.run(torch.atan2, a, a), torch.atan2(a, a))
    assert torch.equal(clean.run(torch.add, a, a, alpha=2), torch.add(a, a, alpha=2))
    with pytest.raises(RuntimeError, match="same dtype"):  # what eager CPU says
        clean.run(torch.mm, torch.ones(2, 2), torch.ones(2, 2, dtype=torch.float64))
    t5 = _randn(1, 1, 1, 1, 2)
    assert torch.equal(clean.run(torch.prod, t5), torch.prod(t5))
    F.release_leaks()
    clean.run(torch.cumsum, t5, 0)
    assert clean.memory_allocated() == 0
    assert not clean.fired


def test_target_pickles():
    import pickle

    target = pickle.loads(pickle.dumps(FaultTarget()))
    x = _randn(1, 1, 1, 1, 3)
    assert not torch.equal(target.run(torch.var, x), torch.var(x))


def test_target_factory_reads_env(monkeypatch):
    monkeypatch.delenv("MPSFUZZ_FAULTS", raising=False)
    assert {f.name for f in F.target().faults} == set(FAULTS)
    for clean in ("", "none", " None "):
        monkeypatch.setenv("MPSFUZZ_FAULTS", clean)
        t = F.target()
        assert t.faults == () and t.name == "clean-cpu"
    monkeypatch.setenv("MPSFUZZ_FAULTS", "var_5d, cumsum_leak")
    assert [f.name for f in F.target().faults] == ["var_5d", "cumsum_leak"]
    monkeypatch.setenv("MPSFUZZ_FAULTS", "var_5d,no_such_fault,other_bogus")
    with pytest.raises(ValueError, match="no_such_fault") as info:
        F.target()
    assert "other_bogus" in str(info.value) and "var_5d" not in str(info.value).split(";")[0]


def test_loads_as_a_target(monkeypatch):
    from mpsfuzz.execution.targets import load_target

    monkeypatch.setenv("MPSFUZZ_FAULTS", "triu_tril_gt3d")
    target = load_target("mpsfuzz.testing.faults:target")
    assert target.name == "faulty-cpu" and target.device == "cpu" and target.is_available()
    target.synchronize()
    x = _randn(1, 1, 2, 2)
    assert not torch.equal(target.run(torch.triu, x), torch.triu(x))


_SPECIAL_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, -0.999, 1e-40, 256.0, 257.0, 65504.0, 1e6,
                   -1e30, 3e38, 1e308, math.inf, -math.inf, math.nan]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64,
                                   torch.complex32, torch.complex64, torch.complex128])
def test_corruption_always_changes_floats(dtype):
    for value in _SPECIAL_FLOATS:
        for make in ((lambda v: v,) if not dtype.is_complex
                     else (lambda v: complex(v, 0.5), lambda v: complex(v, math.nan))):
            t = torch.tensor([make(value), 2.0], dtype=dtype if dtype != torch.complex32 else torch.complex64)
            t = t.to(dtype)
            before = t.clone()
            F._corrupt_first(t)
            assert not _identical(t, before), (dtype, value)
            assert _identical(t[1:], before[1:])
            old, new = before[0].item(), t[0].item()
            o, n = (old.real, new.real) if dtype.is_complex else (old, new)
            if not math.isnan(o) and not math.isnan(n) and math.isfinite(o):
                # Far beyond any tolerance: at least 1 absolute or 100% relative.
                assert abs(n - o) >= min(1.0, abs(o)), (dtype, value, old, new)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
                                   torch.uint16, torch.uint32, torch.uint64, torch.bool])
def test_corruption_always_changes_ints(dtype):
    if dtype == torch.bool:
        for v in (True, False):
            t = torch.tensor([v, v])
            F._corrupt_first(t)
            assert t.tolist() == [not v, v]
        return
    info = torch.iinfo(dtype)
    for v, want in ((0, 1), (5, 6), (info.max, info.min), (info.min, info.min + 1)):
        t = torch.zeros(2, dtype=dtype)
        t[0] = v if not (dtype == torch.uint64 and v > 2**63 - 1) else 0
        if dtype == torch.uint64 and v > 2**63 - 1:
            t.view(torch.int64)[0] = v - 2**64
        F._corrupt_first(t)
        assert t[0].item() == want and t[1].item() == 0, (dtype, v)


def test_corruption_of_noncontiguous_and_0d():
    x = torch.arange(6.0).reshape(2, 3).t()
    F._corrupt_first(x)
    assert x[0, 0].item() == 1.0 and x.flatten().tolist()[1:] == [3.0, 1.0, 4.0, 2.0, 5.0]
    z = torch.tensor(7)
    F._corrupt_first(z)
    assert z.item() == 8


def test_leak_oracle_finds_cumsum_leak_and_not_a_clean_op():
    """The leak fault keeps 1 MiB per call: the leak oracle reports it (confirmed over
    repeated calls) on cumsum, and stays silent on an op without the fault."""
    from mpsfuzz.oracles.judge import judge_case
    from mpsfuzz.generation.recipes import Case, TensorRecipe
    from mpsfuzz.testing.faults import FaultTarget, release_leaks

    target = FaultTarget(["cumsum_leak"])
    try:
        leaky = judge_case(Case("cumsum", (TensorRecipe((3,), "float32"),), (("dim", 0),)), target, ("values", "leak"))
        (failure,) = leaky.failures
        assert failure["oracle"] == "leak" and failure["dedup_key"] == ["leak", "faulty-cpu"]
        assert failure["details"]["device_per_call"] == 1 << 20
        clean = judge_case(Case("cumprod", (TensorRecipe((3,), "float32"),), (("dim", 0),)), target, ("values", "leak"))
        assert clean.failures == ()
    finally:
        release_leaks()


def test_spill_writes_past_a_strided_view_and_nowhere_else():
    target = FaultTarget(["sub_inplace_spill"])
    base = torch.arange(8, dtype=torch.float32)
    view = base[::2]
    target.run(lambda x, y: x.sub_(y), view, torch.ones(4))
    assert torch.equal(view, torch.tensor([-1., 1., 3., 5.]))      # the op itself is right
    assert not torch.equal(base[1::2], torch.tensor([1., 3., 5., 7.]))  # but it wrote outside
    assert target.fired["sub_inplace_spill"] == 1
    dense = torch.arange(4, dtype=torch.float32)
    target.run(lambda x, y: x.sub_(y), dense, torch.ones(4))
    assert torch.equal(dense, torch.tensor([-1., 0., 1., 2.])) and target.fired["sub_inplace_spill"] == 1


def test_the_upstream_gradients_mpsfuzz_makes_are_not_the_targets_kernels():
    """The grad variant's seeded upstream gradients are made on the host, as on every
    device: a fault of the target's randn for 5-D outputs must not show as a wrong
    gradient of the op (issue 37: it was filed as three gradient bugs of log, pow and
    rad2deg)."""
    from mpsfuzz.generation.recipes import Case
    from mpsfuzz.oracles import DEFAULT, worker_oracles
    from mpsfuzz.oracles.judge import judge_case
    case = Case.from_json({"format": 3, "op": "log", "variant": "grad", "inputs": [
        {"shape": [2, 1, 2, 1, 2], "dtype": "float32", "layout": {"offset": 0, "gaps": [], "permutation": [],
                                                                 "expanded": []},
         "values": {"distribution": "positive", "seed": 3, "low": None, "high": None, "specials": []},
         "alias": None}], "kwargs": {}})
    target = FaultTarget(["rand_5d_repeat"])
    assert judge_case(case, target, worker_oracles(DEFAULT)).failures == ()
    assert not target.fired
