"""OpInfo breadth: every op of PyTorch's own OpInfo database that the catalogue lacks.

When ``torch.testing._internal.common_methods_invocations.op_db`` is importable (it needs
the ``expecttest`` package), each OpInfo entry not already in the catalogue becomes an
:class:`OpSpec` named ``opinfo:<name>[.<variant_test_name>]`` in the family ``opinfo``.

How a spec is made
------------------
OpInfo's ``sample_inputs`` (on the CPU, at one reference dtype, seeded) are taken as
*templates*: the call structure of a sample with every tensor replaced by a placeholder.
A template fixes the shapes, the non-tensor arguments and the dtype relation of each
tensor; mpsfuzz then mutates what keeps the call meaningful:

* layouts: every placeholder tensor is an ordinary mpsfuzz input, so its awkward layout
  (gaps, offsets, permutations, stride-0 dims) is built on the device as usual;
* dtypes: the op's supported CPU dtypes (reference dtype first, where shrinking goes);
* values: mpsfuzz's distributions and special values, restricted to the op's
  ``domain`` where OpInfo declares one (then without specials), and to the range the
  sample's tensor had where that range looks deliberate (non-negative or within [-1, 1]:
  probabilities, variances, grids); Hermitian positive-definite sample matrices are
  drawn as ``spd``.

Tensors that must keep their values stay *literal*: tensors of another dtype than the
reference one (index tensors, masks, lengths) and tensors sorted along their last dim
(``searchsorted``'s boundaries) are stored as lists inside the call, when small (at
most ``LITERAL_MAX`` elements; larger ones drop the sample), and built on the device
of the first fuzzed tensor when the op runs. OpInfo's samples are what PyTorch's own
CPU-vs-device tests use, so their index tensors are deterministic (no duplicate
scatter targets).

Cases are self-contained: the op's keyword arguments are ``call`` (a JSON string with
the whole call, placeholders ``{"T": i}`` for the i-th tensor input) and ``template``
(the template's index, for people). The worker needs no templates, only the OpInfo
entry's callable; a corpus case replays even after OpInfo's samples change.

One spec per op rather than per (op, template): the shape builder draws a template
and returns its shapes; the argument builder takes (by draw) one of the templates whose
shapes are exactly those, so shrinking moves between templates like any other draw.

Importing ``op_db`` takes seconds, so nothing here imports it until asked for:
:func:`available`, :func:`specs` and :func:`spec` do; the catalogue calls them only for
an ``opinfo`` selection or an ``opinfo:`` name.
"""
from __future__ import annotations

import json
import math
import random
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import torch
from hypothesis import strategies as st

from . import dtypes as dt
from .opspec import OpSpec, ShapeBudget

PREFIX = "opinfo:"
FAMILY = "opinfo"
# The samples looked at per op, and the templates kept from them.
MAX_SAMPLES = 40
MAX_TEMPLATES = 8
# Fuzzed tensors per template (the spec declares this many value builders).
MAX_TENSORS = 8
# Literal tensors (indices, masks, sorted boundaries) up to this many elements.
LITERAL_MAX = 256
SEED = 1234
_MODULE = "torch.testing._internal.common_methods_invocations"
# Preferred reference dtypes, in order: the samples are taken at the first supported.
_REFERENCE_DTYPES = ("float32", "float64", "complex64", "int64", "int32", "bool")

# OpInfo entries whose results are random or undefined, or that are not ops on tensors
# we can compare (beyond ``has_nondeterministic_output`` and ``is_factory_function``,
# which are honoured too). Matched against the full name, and the base name.
_RANDOM_OR_UNDEFINED = {
    "bernoulli", "normal", "normal.in_place", "normal.number_mean", "uniform", "cauchy",
    "exponential", "geometric", "log_normal", "multinomial", "rand_like", "randn_like",
    "randint_like", "randint", "randn", "rand", "nn.functional.dropout", "nn.functional.dropout2d",
    "nn.functional.dropout3d", "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
    "nn.functional.rrelu", "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
    "nn.functional.gumbel_softmax", "native_dropout_backward", "empty", "empty_like", "empty_strided",
    "empty_permuted", "new_empty", "new_empty_strided", "resize_", "resize_as_", "svd_lowrank",
    "pca_lowrank", "hash_tensor", "item", "to_sparse", "sparse.mm", "sparse.sampled_addmm",
    "torch._scaled_mm", "torch._scaled_mm_v2", "torch.ops.aten._flash_attention_forward",
    "torch.ops.aten._efficient_attention_forward", "bmm.triton_optimized", "nonzero_static",
    # Results defined by the input's storage layout, not its values (the layout oracle
    # would call every strided input a bug).
    "as_strided", "as_strided_copy", "as_strided_scatter",
}
_RANDOM_PREFIXES = ("jiterator_", "nn.functional.dropout", "nn.functional.feature_alpha_dropout")
# Prefixes our catalogue leaves off (ours: "conv2d", OpInfo: "nn.functional.conv2d").
_STRIPPED_PREFIXES = ("nn.functional.", "torch.ops.aten.", "torch.", "special.")


class OpInfoUnavailable(RuntimeError):
    pass


# -- importing op_db ------------------------------------------------------------------------

_DB: dict[str, Any] | None = None
_DB_ERROR: str | None = None
IMPORT_SECONDS: float | None = None


def _database() -> dict[str, Any]:
    """Full name -> OpInfo entry; imports op_db once (seconds). Raises OpInfoUnavailable."""
    global _DB, _DB_ERROR, IMPORT_SECONDS
    if _DB is not None:
        return _DB
    if _DB_ERROR is not None:
        raise OpInfoUnavailable(_DB_ERROR)
    start = time.monotonic()
    try:
        import importlib
        module = importlib.import_module(_MODULE)
        db = {}
        for op in module.op_db:
            db.setdefault(full_name(op), op)
    except ModuleNotFoundError as exc:
        missing = exc.name or str(exc)
        hint = " (pip install expecttest)" if missing == "expecttest" else ""
        _DB_ERROR = f"OpInfo is unavailable: importing {_MODULE} needs the '{missing}' package{hint}"
        raise OpInfoUnavailable(_DB_ERROR) from None
    except Exception as exc:  # anything the test-suite module does at import
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        _DB_ERROR = f"OpInfo is unavailable: importing {_MODULE} failed: {type(exc).__name__}: {first}"
        raise OpInfoUnavailable(_DB_ERROR) from None
    IMPORT_SECONDS = time.monotonic() - start
    _DB = db
    return db


def available() -> tuple[bool, str]:
    """(True, a summary) when op_db imports, else (False, the one-line reason). Never raises."""
    try:
        db = _database()
    except OpInfoUnavailable as exc:
        return False, str(exc)
    return True, f"OpInfo available: {len(db)} entries in op_db (imported in {IMPORT_SECONDS:.1f}s)"


def full_name(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def spec_name(op) -> str:
    return PREFIX + full_name(op)


def is_opinfo_name(name: str) -> bool:
    return name.startswith(PREFIX)


# -- which entries ----------------------------------------------------------------------------

def catalogue_names(op) -> set[str]:
    """Names under which our catalogue may already have this op: the full and base names,
    the base name joined to the variant by "_", each also without OpInfo's module
    prefixes ("nn.functional.", "torch.", "special."), and its aliases'."""
    bases = {full_name(op), op.name} | {a.name for a in getattr(op, "aliases", ()) or ()}
    if op.variant_test_name:  # ours: "pad_reflect", "max_binary", "interpolate_nearest_exact"
        bases.add(f"{op.name}_{op.variant_test_name}".replace("-", "_"))
    out = set(bases)
    for name in bases:
        for prefix in _STRIPPED_PREFIXES:
            if name.startswith(prefix):
                out.add(name[len(prefix):])
    return out


def skip_reason(op) -> str | None:
    """Why an entry is never fuzzed (random, undefined or uncomparable output), or None."""
    name = full_name(op)
    if op.name.startswith("as_strided"):
        return "result defined by the input's strides, not its values"
    if name in _RANDOM_OR_UNDEFINED or op.name in _RANDOM_OR_UNDEFINED or name.startswith(_RANDOM_PREFIXES):
        return "random or undefined output"
    if getattr(op, "has_nondeterministic_output", False):
        return "nondeterministic output (OpInfo says so)"
    if getattr(op, "is_factory_function", False):
        return "factory function (no tensor inputs)"
    return None


def dtype_names(op) -> tuple[str, ...]:
    """The op's supported CPU dtypes that mpsfuzz knows, the reference dtype first."""
    try:
        supported = {dt.name_of(d) for d in op.supported_dtypes("cpu")}
    except Exception:
        return ()
    names = [n for n in dt.ALL_DTYPE_NAMES if n in supported]
    ref = reference_dtype(names)
    return (ref,) + tuple(n for n in names if n != ref) if ref else ()


def reference_dtype(names: Iterable[str]) -> str | None:
    names = list(names)
    for n in _REFERENCE_DTYPES:
        if n in names:
            return n
    return names[0] if names else None


# -- templates ------------------------------------------------------------------------------

class _Unusable(Exception):
    """A sample that cannot become a template (non-JSON-able argument, device argument...)."""


@dataclass(frozen=True)
class Template:
    """One sample's call with its tensors replaced by placeholders."""

    shapes: tuple[tuple[int, ...], ...]  # of the fuzzed tensors, in placeholder order
    call: str                            # JSON: {"input": .., "args": [..], "kwargs": {..}}
    values: tuple[dict | None, ...]      # per fuzzed tensor: value options, or None

    def fits(self, budget: ShapeBudget) -> bool:
        return all(budget.min_rank <= len(s) <= budget.max_rank and math.prod(s) <= budget.max_numel
                   and (budget.allow_empty or 0 not in s) for s in self.shapes)


class _Encoder:
    """Turns a sample's (input, args, kwargs) into JSON-able values with placeholders."""

    def __init__(self, ref_dtype: torch.dtype, domain):
        self.ref = ref_dtype
        self.domain = domain
        self.shapes: list[tuple[int, ...]] = []
        self.values: list[dict | None] = []
        self.tensors: list[torch.Tensor] = []

    def tensor(self, t: torch.Tensor, *, is_input: bool):
        if t.layout != torch.strided or t.is_quantized or t.device.type != "cpu":
            raise _Unusable("not a strided CPU tensor")
        if t.dtype == self.ref and not _sorted_last_dim(t):
            if len(self.shapes) >= MAX_TENSORS:
                raise _Unusable("too many tensors")
            self.shapes.append(tuple(int(s) for s in t.shape))
            self.values.append(_value_options(t, self.domain if is_input else None))
            self.tensors.append(t)
            return {"T": len(self.shapes) - 1}
        if t.numel() > LITERAL_MAX or t.is_complex():
            raise _Unusable("a large or complex tensor that must keep its values")
        return {"L": t.detach().reshape(-1).tolist(), "shape": list(t.shape),
                "dtype": "=" if t.dtype == self.ref else _dtype_name(t.dtype)}

    def encode(self, v, *, is_input: bool = False):
        if isinstance(v, torch.Tensor):
            return self.tensor(v, is_input=is_input)
        if v is None or isinstance(v, (bool, int, str)):
            return v
        if isinstance(v, float):
            return v if math.isfinite(v) else {"float": repr(v)}
        if isinstance(v, complex):
            return {"complex": [self.encode(v.real), self.encode(v.imag)]}
        if isinstance(v, torch.dtype):
            # The reference dtype as an argument (``input_dtype=``, ``dtype=``) follows the
            # fuzzed tensors' dtype, as a literal tensor marked "=" does: kept as it was,
            # a float16 case would call the op with a float32 ``input_dtype``, which no
            # sample does and CUDA rightly refuses.
            return {"dtype": "=" if v == self.ref else _dtype_name(v)}
        if isinstance(v, torch.memory_format):
            return {"memory_format": str(v).removeprefix("torch.")}
        if isinstance(v, slice):
            return {"slice": [self.encode(v.start), self.encode(v.stop), self.encode(v.step)]}
        if v is Ellipsis:
            return {"ellipsis": True}
        if isinstance(v, tuple):  # torch.Size and namedtuples included
            return {"tuple": [self.encode(x, is_input=is_input) for x in v]}
        if isinstance(v, list):
            return [self.encode(x, is_input=is_input) for x in v]
        raise _Unusable(f"argument of type {type(v).__name__}")


def _dtype_name(d: torch.dtype) -> str:
    name = dt.name_of(d)
    if name not in dt.ALL_DTYPE_NAMES:
        raise _Unusable(f"dtype {name}")
    return name


def _sorted_last_dim(t: torch.Tensor) -> bool:
    """A sorted sequence (searchsorted's, bucketize's boundaries): random values would
    make the result unspecified, so such tensors stay literal."""
    if t.dim() == 0 or t.shape[-1] < 3 or t.numel() < 4 or t.is_complex() or t.dtype == torch.bool:
        return False
    return bool((t[..., 1:] >= t[..., :-1]).all())


def _domain_options(domain, dtype: torch.dtype) -> dict | None:
    low, high = domain
    if low is None and high is None:
        return None
    if dtype.is_floating_point:
        if high is None:
            return {"distribution": "positive", "low": low + 0.125, "high": low + 8.0, "allow_specials": False}
        if low is None:
            return {"distribution": "uniform", "low": high - 8.0, "high": high - 0.125, "allow_specials": False}
        margin = (high - low) / 64
        return {"distribution": "uniform", "low": low + margin, "high": high - margin, "allow_specials": False}
    return {"distribution": "int_range", "low": math.floor(low) + 1 if low is not None else -4,
            "high": math.ceil(high) - 1 if high is not None else math.floor(low) + 9, "allow_specials": False}


def _value_options(t: torch.Tensor, domain) -> dict | None:
    """What values a fuzzed tensor takes: the op's domain for its input, ``spd`` for a
    Hermitian positive-definite sample matrix, the sample's range where it looks
    deliberate (non-negative, or within [-1, 1]), else mpsfuzz's own choice (None)."""
    if domain is not None:
        found = _domain_options(domain, t.dtype)
        if found is not None:
            return found
    if t.numel() < 4 or t.dtype == torch.bool:
        return None
    if t.dim() >= 2 and t.shape[-1] == t.shape[-2] and t.shape[-1] >= 2 and (t.is_floating_point() or t.is_complex()):
        wide = t.to(torch.complex128 if t.is_complex() else torch.float64)
        if torch.allclose(wide, wide.mH) and bool(torch.linalg.cholesky_ex(wide).info.eq(0).all()):
            return {"distribution": "spd"}
    if t.is_complex():
        return None
    lo, hi = float(t.min()), float(t.max())
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    if lo >= 0 or (lo >= -1 and hi <= 1):
        if not t.is_floating_point():
            return {"distribution": "int_range", "low": int(lo), "high": int(hi), "allow_specials": False}
        return {"distribution": "uniform", "low": lo, "high": hi, "allow_specials": False}
    return None


def _decode(v, tensors, like: torch.Tensor):
    if isinstance(v, list):
        return [_decode(x, tensors, like) for x in v]
    if not isinstance(v, dict):
        return v
    if "T" in v:
        return tensors[v["T"]]
    if "L" in v:
        dtype = like.dtype if v["dtype"] == "=" else dt.to_torch(v["dtype"])
        return torch.tensor(v["L"], dtype=dtype, device=like.device).reshape(v["shape"])
    if "tuple" in v:
        return tuple(_decode(x, tensors, like) for x in v["tuple"])
    if "float" in v:
        return float(v["float"])
    if "complex" in v:
        re, im = (_decode(x, tensors, like) for x in v["complex"])
        return complex(re, im)
    if "dtype" in v:
        return like.dtype if v["dtype"] == "=" else dt.to_torch(v["dtype"])
    if "memory_format" in v:
        return getattr(torch, v["memory_format"])
    if "slice" in v:
        return slice(*(_decode(x, tensors, like) for x in v["slice"]))
    if "ellipsis" in v:
        return Ellipsis
    raise ValueError(f"unknown call encoding {v!r}")


def build_call(call: str, tensors) -> tuple[Any, list, dict]:
    """(input, args, kwargs) of a template's call with ``tensors`` in the placeholders;
    literal tensors take the first tensor's device (and dtype when marked "=")."""
    c = json.loads(call)
    like = tensors[0]
    return (_decode(c["input"], tensors, like), [_decode(a, tensors, like) for a in c["args"]],
            {k: _decode(v, tensors, like) for k, v in c["kwargs"].items()})


def _flatten_out(out) -> list | None:
    """The leaves of an op's result, or None when something there is not comparable."""
    if isinstance(out, torch.Tensor):
        return [out] if out.layout == torch.strided and not out.is_quantized else None
    if isinstance(out, (tuple, list)):
        leaves = []
        for o in out:
            sub = _flatten_out(o)
            if sub is None:
                return None
            leaves += sub
        return leaves
    if out is None or isinstance(out, (bool, int, float, complex)):
        return [out]
    return None


def _same_outputs(a: list, b: list) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(x, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            if x.dtype == torch.complex32:  # no comparison kernels
                x, y = x.to(torch.complex64), y.to(torch.complex64)
            if not torch.equal(x, y):
                if not (x.is_floating_point() or x.is_complex()):
                    return False
                both_nan = torch.isnan(x) & torch.isnan(y)
                if not bool(((x == y) | both_nan).all()):
                    return False
        elif not (x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y))):
            return False
    return True


class _Seeded:
    """Seeds torch, random and numpy for a block, then puts their states back."""

    def __init__(self, seed: int):
        self.seed = seed

    def __enter__(self):
        self.torch_state = torch.random.get_rng_state()
        self.py_state = random.getstate()
        try:
            import numpy
            self.np_state = numpy.random.get_state()
            numpy.random.seed(self.seed)
        except Exception:
            self.np_state = None
        torch.manual_seed(self.seed)
        random.seed(self.seed)

    def __exit__(self, *exc):
        torch.random.set_rng_state(self.torch_state)
        random.setstate(self.py_state)
        if self.np_state is not None:
            import numpy
            numpy.random.set_state(self.np_state)


# Ops whose run time grows with a tensor argument's values (the degree ``n`` of the
# special polynomials loops n times): those later inputs stay small.
_BOUNDED_LATER_INPUTS = {"distribution": "int_range", "low": 0, "high": 12, "allow_specials": False}


def _runtime_grows_with_values(op) -> bool:
    return "polynomial" in op.name


def _raw_templates(op, ref: str) -> list[tuple[Template, Any]]:
    """(template, the sample's tensors) for the first usable samples (seeded)."""
    out: list[tuple[Template, Any]] = []
    seen: set[tuple] = set()
    ref_dtype = dt.to_torch(ref)
    domain = getattr(op, "domain", None)
    if domain is not None and tuple(domain) == (None, None):
        domain = None
    with _Seeded(SEED), torch.no_grad():
        samples = op.sample_inputs("cpu", ref_dtype, requires_grad=False)
        for k, sample in enumerate(samples):
            if k >= MAX_SAMPLES or len(out) >= MAX_TEMPLATES:
                break
            enc = _Encoder(ref_dtype, domain)
            try:
                if any(key in ("device", "generator", "out") for key in sample.kwargs):
                    raise _Unusable("device, generator or out argument")
                call = {"input": enc.encode(sample.input, is_input=True),
                        "args": [enc.encode(a) for a in sample.args],
                        "kwargs": {str(key): enc.encode(v) for key, v in sample.kwargs.items()}}
            except _Unusable:
                continue
            if not enc.shapes:
                continue
            values = tuple(_BOUNDED_LATER_INPUTS if k and _runtime_grows_with_values(op) else v
                           for k, v in enumerate(enc.values))
            template = Template(tuple(enc.shapes), json.dumps(call, sort_keys=False), values)
            key = (template.shapes, template.call)
            if key in seen:
                continue
            seen.add(key)
            out.append((template, list(enc.tensors)))
    return out


def _gapped_copy(t: torch.Tensor) -> torch.Tensor:
    """``t``'s values in a view with a gap in its last dim (0-d and empty: as is)."""
    if t.dim() == 0 or t.numel() == 0:
        return t.clone()
    base = torch.zeros(*t.shape[:-1], t.shape[-1] * 2, dtype=t.dtype)
    view = base[..., ::2]
    view.copy_(t)
    return view


def _run(op, template: Template, tensors) -> list:
    inp, args, kwargs = build_call(template.call, tensors)
    return _flatten_out(op.op(inp, *args, **kwargs))


def _close_outputs(a: list, b: list) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            if x.is_floating_point() or x.is_complex():
                wide = torch.complex128 if x.is_complex() else torch.float64
                if not torch.allclose(x.to(wide), y.to(wide), rtol=1e-4, atol=1e-5, equal_nan=True):
                    return False
            elif not torch.equal(x, y):
                return False
    return True


def _check_template(op, template: Template, tensors) -> str:
    """What running the sample on the CPU says: 'ok'; 'error' (CPU rejects it: the
    template is dropped); or, dropping the whole op, 'random' (two seeded runs differ,
    or the output is not comparable), 'mutates' (an input that is not an output changes:
    running statistics and the like) or 'layout' (a gapped input gives other values:
    the result depends on strides, e.g. internal ops that assume contiguity)."""
    results = []
    for seed in (1, 2):
        with _Seeded(seed), torch.no_grad():
            copies = [t.clone() for t in tensors]
            try:
                leaves = _run(op, template, copies)
            except Exception:
                return "error"
            if leaves is None:
                return "random"
            for before, after in zip(tensors, copies):
                if not any(isinstance(o, torch.Tensor) and o.data_ptr() == after.data_ptr() for o in leaves) \
                        and not _same_outputs([before], [after]):
                    return "mutates"
            results.append([x.clone() if isinstance(x, torch.Tensor) else x for x in leaves])
    if not _same_outputs(*results):
        return "random"
    for k in range(len(tensors)):  # one gapped input at a time
        with _Seeded(1), torch.no_grad():
            try:
                gapped = _run(op, template, [_gapped_copy(t) if j == k else t.clone()
                                             for j, t in enumerate(tensors)])
            except Exception:
                continue  # strided inputs rejected: invalid cases, not false findings
        if gapped is None or not _close_outputs(results[0], gapped):
            return "layout"
    return "ok"


_TEMPLATES: dict[str, tuple[Template, ...]] = {}


def _key(t: Template) -> tuple:
    return (t.shapes, t.call, json.dumps(t.values))


def templates(name: str) -> tuple[Template, ...]:
    """The templates of an OpInfo spec (computed once per process; empty when the op has
    no usable sample, or turned out random). Deterministic: samples are seeded, and a
    sample whose structure differs between two computations is dropped."""
    name = name.removeprefix(PREFIX)
    if name in _TEMPLATES:
        return _TEMPLATES[name]
    op = _database()[name]
    ref = reference_dtype(dtype_names(op))
    found: tuple[Template, ...] = ()
    if ref is not None and skip_reason(op) is None:
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                first = _raw_templates(op, ref)
                again = {_key(t) for t, _ in _raw_templates(op, ref)}
            except Exception:  # sample_inputs itself failing: no templates
                first, again = [], set()
            kept = []
            for template, tensors in first:
                if _key(template) not in again:
                    continue  # not deterministic from run to run
                status = _check_template(op, template, tensors)
                if status in ("random", "mutates", "layout"):
                    kept = []
                    break
                if status == "ok":
                    kept.append(template)
            found = tuple(kept)
    _TEMPLATES[name] = found
    return found


# -- specs ----------------------------------------------------------------------------------

def _shapes_builder(name: str) -> Callable:
    def build(draw, budget: ShapeBudget):
        ts = templates(name)
        fitting = [i for i, t in enumerate(ts) if t.fits(budget)]
        if not fitting:  # none within the budget: the smallest
            fitting = [min(range(len(ts)), key=lambda i: sum(math.prod(s) for s in ts[i].shapes))]
        return ts[fitting[draw(st.integers(0, len(fitting) - 1))]].shapes
    return build


def _args_builder(name: str) -> Callable:
    def build(draw, shapes, dtype_names):
        ts = templates(name)
        same = [i for i, t in enumerate(ts) if t.shapes == tuple(shapes)]
        i = same[draw(st.integers(0, len(same) - 1))] if len(same) > 1 else same[0]
        return {"call": ts[i].call, "template": i}
    return build


def _values_builder(name: str, position: int) -> Callable:
    def values(shapes, kwargs):
        ts = templates(name)
        i = kwargs.get("template", 0)
        if 0 <= i < len(ts) and ts[i].call == kwargs.get("call") and position < len(ts[i].values):
            return dict(ts[i].values[position] or {})
        return {}
    return values


def _make_fn(name: str, op_fn: Callable) -> Callable:
    # The OpInfo's callable is bound here (torch.cdist, torch.ops.aten.x, a lambda of
    # torch's test suite), so a repro script names it and needs nothing but torch.
    def fn(*tensors, call: str, template: int | None = None):
        inp, args, kwargs = build_call(call, tensors)
        return op_fn(inp, *args, **kwargs)
    fn.__name__ = f"opinfo_{name.replace('.', '_')}"

    def render_call(rendering, tensors: list[str], kwargs: dict[str, str]) -> str:
        """The call as a reader would write it (``torch.cdist(a, b, p=0.0)``): the
        template's encoded call decoded to source, the OpInfo's callable rendered as
        any op's is (a public name, an inlined lambda or a copied helper)."""
        import ast
        c = json.loads(ast.literal_eval(kwargs["call"]))
        like = tensors[0] if tensors else "None"
        args = [_source(c["input"], tensors, like)] + [_source(a, tensors, like) for a in c["args"]]
        return rendering.call(op_fn, args, {k: _source(v, tensors, like) for k, v in c["kwargs"].items()})
    fn.render_call = render_call
    return fn


def _source(v, tensors: list[str], like: str) -> str:
    """Python source of an encoded call argument (:func:`_decode`'s twin)."""
    if isinstance(v, list):
        return "[" + ", ".join(_source(x, tensors, like) for x in v) + "]"
    if not isinstance(v, dict):
        return repr(v)
    if "T" in v:
        return tensors[v["T"]]
    if "L" in v:
        dtype = f"{like}.dtype" if v["dtype"] == "=" else str(dt.to_torch(v["dtype"]))
        return f"torch.tensor({v['L']!r}, dtype={dtype}, device={like}.device).reshape({tuple(v['shape'])!r})"
    if "tuple" in v:
        items = [_source(x, tensors, like) for x in v["tuple"]]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if "float" in v:
        return f"float({v['float']!r})"
    if "complex" in v:
        re, im = (_source(x, tensors, like) for x in v["complex"])
        return f"complex({re}, {im})"
    if "dtype" in v:
        return f"{like}.dtype" if v["dtype"] == "=" else str(dt.to_torch(v["dtype"]))
    if "memory_format" in v:
        return f"torch.{v['memory_format']}"
    if "slice" in v:
        return "slice(" + ", ".join(_source(x, tensors, like) for x in v["slice"]) + ")"
    if "ellipsis" in v:
        return "..."
    raise ValueError(f"unknown call encoding {v!r}")


def _make_spec(op) -> OpSpec | None:
    names = dtype_names(op)
    if not names:
        return None
    name = full_name(op)
    domain = getattr(op, "domain", None)
    has_domain = domain is not None and tuple(domain) != (None, None)
    internal = op.name.startswith(("native_", "_"))
    backed = needs_linalg_library(op)
    return OpSpec(
        name=PREFIX + name, family=FAMILY, fn=_make_fn(name, op.op),
        shapes=_shapes_builder(name), dtypes=names,
        input_values=tuple(_values_builder(name, k) for k in range(MAX_TENSORS)),
        # a polynomial's later inputs are its degrees (_BOUNDED_LATER_INPUTS)
        discrete_inputs=tuple(range(1, MAX_TENSORS)) if _runtime_grows_with_values(op) else (),
        args=_args_builder(name),
        allow_specials=not has_domain and not backed,
        allow_nonfinite=not backed,
        canonicalise=_first_output if internal else None,
        private_outputs_from=1 if internal else None,
        semantics=(frozenset({"accumulates"}) if _is_reduction(op) else frozenset({"structure-unknown"}))
        | (frozenset({"determined-as-a-whole"}) if backed else frozenset()),
        doc=f"OpInfo {name}: its sample inputs as templates (layouts, dtypes and values fuzzed)"
            + (" (internal op: its first output is compared; the others are saved for backward, "
               "and their dtype and values are each backend's own)" if internal else ""),
    )


# OpInfo's decorators that skip an entry where torch was built without the external
# linear-algebra libraries (LAPACK on CPU; MAGMA, cuSOLVER on CUDA) it calls.
_LINALG_LIBRARY_SKIPS = re.compile(r"^skip(CPU|CUDA)IfNo(Lapack|Magma|Cusolver|Linalgsolver)")


def needs_linalg_library(op) -> bool:
    """Whether the entry calls an external linear-algebra library. torch documents those
    libraries' behaviour on inf and NaN inputs as undefined (any result, an exception or
    a crash: "Non-finite values" in torch's numerical accuracy notes), so such ops draw
    neither non-finite values nor extremes that overflow into them, as the catalogue's
    own solvers and decompositions (``ops/linalg.py``'s SOLVER) do."""
    return any(_LINALG_LIBRARY_SKIPS.match(getattr(d, "__name__", "")) for d in getattr(op, "decorators", ()))


def _first_output(inputs, out):
    """An internal op's extra outputs (native_layer_norm's mean and rstd, native_batch_norm's
    saved statistics) exist for its backward: their dtype (float32 for float16 inputs on
    CUDA) and layout are each backend's choice, not the op's contract."""
    return out[0] if isinstance(out, (tuple, list)) and out else out


def _is_reduction(op) -> bool:
    """OpInfo's reductions (each output element sums or combines many input terms)."""
    from torch.testing._internal.opinfo.core import ReductionOpInfo
    return isinstance(op, ReductionOpInfo)


def candidates(exclude: Iterable[str] = ()) -> list[Any]:
    """OpInfo entries that may become specs: not random/undefined, not in ``exclude``
    (the catalogue's names, compared through :func:`catalogue_names`)."""
    exclude = set(exclude)
    return [op for _, op in sorted(_database().items())
            if skip_reason(op) is None and not (catalogue_names(op) & exclude)]


def specs(exclude: Iterable[str] = (), *, check: bool = True) -> list[OpSpec]:
    """One spec per usable OpInfo entry not in ``exclude``; [] when OpInfo is unavailable.
    ``check`` computes each op's templates now and leaves out ops with none (seconds
    for the whole database); without it the list is cheap but may hold unusable ops."""
    try:
        ops = candidates(exclude)
    except OpInfoUnavailable:
        return []
    out = []
    for op in ops:
        made = _make_spec(op)
        if made is not None and (not check or templates(made.name)):
            out.append(made)
    return out


def spec(name: str) -> OpSpec:
    """The spec for ``opinfo:<name>`` (for the catalogue's lookup by name, e.g. in a
    worker: no templates are computed). KeyError when there is no such entry."""
    try:
        db = _database()
    except OpInfoUnavailable as exc:
        raise KeyError(f"{name}: {exc}") from None
    op = db.get(name.removeprefix(PREFIX))
    made = _make_spec(op) if op is not None and skip_reason(op) is None else None
    if made is None:
        raise KeyError(name)
    return made


def resolve(item: str, exclude: Iterable[str] = ()) -> list[OpSpec]:
    """The specs an ``--ops`` item names: ``opinfo`` (every usable entry not in
    ``exclude``, the catalogue's names) or ``opinfo:<name>`` (that entry, even if the
    catalogue has it too). Raises LookupError with a one-line reason (OpInfo unavailable,
    no such entry, random output, no usable sample)."""
    ok, why = available()
    if not ok:
        raise LookupError(why)
    if item == FAMILY:
        found = specs(exclude)
        if not found:
            raise LookupError("OpInfo has no usable entry outside the catalogue")
        return found
    name = item.removeprefix(PREFIX)
    op = _database().get(name)
    if op is None:
        raise LookupError(f"{item!r}: OpInfo has no entry {name!r} (names as in op_db, e.g. "
                          "'opinfo:nn.functional.celu', 'opinfo:div.floor_rounding')")
    reason = skip_reason(op)
    if reason:
        raise LookupError(f"{item!r}: not fuzzed: {reason}")
    made = _make_spec(op)
    if made is None or not templates(made.name):
        raise LookupError(f"{item!r}: no usable OpInfo sample (none with tensor inputs and JSON-able arguments)")
    return [made]
