"""Which public torch function each catalogue op exercises, and how a case's call maps
onto that function's parameters.

The common case needs no entry: an op named like a torch function is that function
(``exp`` is ``torch.exp``, ``linalg.solve`` is ``torch.linalg.solve``, an op of the
``nn`` family is ``torch.nn.functional``'s where it has one, ``scatter_`` is the Tensor
method). An op whose name or call differs is declared in :data:`TABLE` (``add_scalar``
is ``torch.add`` with a Python-scalar ``other``; ``interpolate_linear`` is
``F.interpolate`` with ``mode`` fixed by the op's name), so a new op joins by
declaration. :func:`public` answers for any op; :func:`call_arguments` says what one
case passes to each parameter.

Parameters that are not the op's behaviour get a treatment of their own, counted or
not in the share of parameters drawn:

- a parameter that takes a tensor input (``input``, ``weight``, ``bias``) is drawn by
  the case's dressing (shape, dtype, layout, values, aliasing); an optional one (a
  documented ``None`` default, e.g. ``bias``) must also be seen as None;
- ``out`` is drawn by the out variants (``out``, ``out-strided``, ``out-resized``,
  ``out-alias``), and None by the others; F's ``inplace=True`` of an op with an in-place
  variant (``relu``: ``x.relu_()``, the same kernel) by that variant;
- ``device`` counts as drawn: every call runs on the target's device, and the factories
  pass it (``device=x.device``);
- ``generator`` is drawn by the random ops: an explicit ``torch.Generator`` on the
  target's device, seeded from the case, or None (the seeded default generator);
- ``layout``, ``pin_memory`` and a factory's ``requires_grad`` are left out of the
  share: only strided (dense) tensors are in scope, pinning is host memory, and
  ``requires_grad`` marks a result for autograd without any kernel reading it (the
  ``grad`` variant tests backward passes); so are ``sparse``/``sparse_grad`` (sparse
  gradients), the deprecated ``size_average``/``reduce`` of the losses (mapped onto
  ``reduction`` in Python before any kernel runs), private parameters (``_stacklevel``)
  and the few listed per op with their reason (CUDA-only options that eager CPU, the
  reference, refuses: svd's driver, LU without pivots, the matmuls' out_dtype; dropout
  probabilities that make a result random; an out= that torch's binding lacks).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .recipes import Case, DtypeArg
from .signatures import REQUIRED, Signature, Unparsed, binds, signature
from .value_classes import DEFAULT, GIVEN, NON_NEGATIVE, OTHER, TARGET_DEVICE, TENSOR

F = "torch.nn.functional"
SIGNS = ("negative", "zero", "positive")
DIMS = ("negative", NON_NEGATIVE)
OPTIONAL_DIMS = ("None",) + DIMS
REDUCTIONS = ("'none'", "'mean'", "'sum'")
FFT_NORMS = ("None", "'backward'", "'ortho'", "'forward'")


@dataclass(frozen=True)
class Public:
    """How an op calls its public function.

    ``inputs``: the parameter each tensor input binds to, in order (None: an input that
    is no parameter, e.g. a factory's dummy that only carries device and dtype; a name
    repeated: inputs that together form one list parameter). Unset: the parameters the
    case's keyword arguments leave free, in the signature's order.
    ``signature``: the documented signature, where the function's own sources do not
    name the overload the op calls (or it has none).
    ``renamed``: case keyword -> parameter. ``flags``: case keywords that are the
    harness's own (where a subscript goes), not parameters.
    ``fixed``: parameters the op's name fixes (``div_trunc``'s rounding_mode): their
    range is that value, the catalogue draws the others through sibling ops.
    ``passes``: (case) -> {parameter: value} for what the wrapper derives from the case
    (a ``use_weight`` flag passes the weight input or None; ``hermitian`` follows the
    dtype). ``ranges``: the documented range of a parameter, as value labels, where it
    is more than the default rule says (an enum's values, the signs a scale takes).
    ``excluded``: parameter -> why the op never draws it (left out of the share).
    """

    function: str
    signature: str | None = None
    inputs: tuple[str | None, ...] | None = None
    renamed: dict[str, str] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    fixed: dict[str, Any] = field(default_factory=dict)
    passes: Callable[[Case], dict] | None = None
    ranges: dict[str, tuple[str, ...]] = field(default_factory=dict)
    excluded: dict[str, str] = field(default_factory=dict)


# -- treatments of parameters that are not the op's behaviour ---------------------------------

EXCLUDED_EVERYWHERE = {
    "layout": "only strided (dense) tensors are in scope",
    "pin_memory": "pins host memory: no device kernel reads it",
    "requires_grad": "marks a factory's result for autograd; no kernel reads it (the grad variant "
                     "tests backward passes)",
    "sparse": "sparse gradients: sparse layouts are out of scope",
    "sparse_grad": "sparse gradients: sparse layouts are out of scope",
    "_stacklevel": "private (a warning's stack level)",
    # torch 2.11 documents mm/bmm/addmm/baddbmm(..., out_dtype=): aten::mm.dtype has
    # kernels for CUDA only
    "out_dtype": "a CUDA-only choice of the matmuls: eager CPU, the reference, has no kernel for it",
}
DEPRECATED_LOSS_ARGS = ("size_average", "reduce")
DEPRECATED_REASON = "deprecated alias of reduction, mapped onto it in Python before any kernel runs"


def excluded_reason(public: Public, name: str) -> str | None:
    """Why parameter ``name`` of ``public``'s function is left out of the share, or None."""
    if name in public.excluded:
        return public.excluded[name]
    if name in EXCLUDED_EVERYWHERE:
        return EXCLUDED_EVERYWHERE[name]
    if name in DEPRECATED_LOSS_ARGS and public.function.startswith(F + "."):  # (not scatter's reduce)
        return DEPRECATED_REASON
    return None


# -- ranges by parameter name (where no op declares its own) ------------------------------------

def default_ranges(function: str, name: str, default: Any) -> tuple[str, ...] | None:
    """The documented range of a parameter by its name and function, where it is more
    than the default rule (both flags, None and a value, default and another)."""
    if name == "reduction":
        return REDUCTIONS
    if name in ("dim", "dim0", "dim1", "dim2"):
        if default is None:
            return OPTIONAL_DIMS
        if default is REQUIRED or isinstance(default, int) and not isinstance(default, bool):
            return DIMS
    if name == "keepdim":
        return ("False", "True")
    if name == "correction":
        return ("None", "zero", "positive")
    if name == "ignore_index":
        return (DEFAULT, NON_NEGATIVE)
    if name == "padding_idx":
        return OPTIONAL_DIMS
    if name == "align_corners":
        return ("None", "False", "True")
    if name == "divisor_override":
        return ("None", "positive")
    if name == "norm" and function.startswith("torch.fft."):
        return FFT_NORMS
    if name == "generator":
        return ("None", GIVEN)
    return None


# -- helpers for declarations -------------------------------------------------------------------

def _flagged(flag: str, parameter: str, default: bool = False) -> Callable[[Case], dict]:
    """A wrapper flag that passes an input to ``parameter`` or None."""
    def passes(case: Case) -> dict:
        return {parameter: TENSOR if dict(case.kwargs).get(flag, default) else None}
    return passes


def _flags(*pairs: tuple[str, str, bool]) -> Callable[[Case], dict]:
    def passes(case: Case) -> dict:
        out: dict = {}
        for flag, parameter, default in pairs:
            out.update(_flagged(flag, parameter, default)(case))
        return out
    return passes


def _input_dtype(case: Case) -> dict:
    """A factory called with the dummy input's dtype (``dtype=x.dtype``) unless the case
    passes its own (None: torch's default dtype)."""
    kwargs = dict(case.kwargs)
    return {"dtype": kwargs["dtype"] if "dtype" in kwargs else DtypeArg(case.inputs[0].dtype)}


def _hermitian_if_complex(case: Case) -> dict:
    return {"hermitian": case.inputs[0].dtype.startswith("complex")}


# -- the table -----------------------------------------------------------------------------------

TABLE: dict[str, Public] = {}


def declare(name: str, public: Public) -> None:
    if name in TABLE:
        raise ValueError(f"op {name!r} is declared twice")
    TABLE[name] = public


_POLYNOMIALS = ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
                "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
                "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
                "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p")
for _p in _POLYNOMIALS:
    declare(f"special.{_p}_scalar_n", Public(f"torch.special.{_p}"))

# Elementwise: tensor-scalar forms, rounding divisions and fixed overloads.
ALPHA = (DEFAULT, OTHER, "negative")
for _name, _fn in (("add", "torch.add"), ("sub", "torch.sub")):
    declare(_name + "_scalar", Public(_fn, ranges={"alpha": ALPHA}))
declare("div_scalar", Public("torch.div", fixed={"rounding_mode": None}))   # true division by its name
for _name, _fn in (("mul_scalar", "torch.mul"), ("pow_scalar", "torch.pow"),
                   ("float_power_scalar", "torch.float_power"), ("remainder_scalar", "torch.remainder"),
                   ("fmod_scalar", "torch.fmod"), ("floor_divide_scalar", "torch.floor_divide"),
                   ("copysign_scalar", "torch.copysign"), ("xlogy_scalar", "torch.xlogy"),
                   ("lt_scalar", "torch.lt"), ("le_scalar", "torch.le"), ("gt_scalar", "torch.gt"),
                   ("ge_scalar", "torch.ge"), ("eq_scalar", "torch.eq"), ("ne_scalar", "torch.ne"),
                   ("bitwise_and_scalar", "torch.bitwise_and"), ("bitwise_or_scalar", "torch.bitwise_or"),
                   ("bitwise_xor_scalar", "torch.bitwise_xor"),
                   ("bitwise_left_shift_by_scalar", "torch.bitwise_left_shift"),
                   ("bitwise_right_shift_by_scalar", "torch.bitwise_right_shift"),
                   ("remainder_float", "torch.remainder"), ("fmod_float", "torch.fmod"),
                   ("fmax_cpu_scalar", "torch.fmax"), ("fmin_cpu_scalar", "torch.fmin"),
                   ("lerp_scalar", "torch.lerp")):
    declare(_name, Public(_fn))
# both bounds are tensors by the op's name (one-sided tensor clamps: clamp_min_tensor)
declare("clamp_tensor", Public("torch.clamp", ranges={"min": ("tensor",), "max": ("tensor",)}))
for _name, _fn in (("atan2_scalar", "torch.atan2"), ("xlogy_rscalar", "torch.xlogy")):
    # a Python scalar (a 0-d tensor for atan2) as the first operand, the tensor as the second
    declare(_name, Public(_fn, inputs=("other",), renamed={"scalar": "input"}))
for _name, _fn in (("bitwise_left_shift_scalar", "bitwise_left_shift"),
                   ("bitwise_right_shift_scalar", "bitwise_right_shift"), ("bitwise_and_rscalar", "bitwise_and")):
    # the (Number self, Tensor other) overload, which takes no out= (the docstring documents
    # the tensor overload's)
    declare(_name, Public(f"torch.{_fn}", signature=f"{_fn}(self, other)", inputs=("other",),
                          renamed={"scalar": "self"}))
declare("bitwise_xor_rscalar", Public("torch.Tensor.__rxor__", signature="__rxor__(self, other)",
                                      renamed={"scalar": "other"}))
declare("rdiv_scalar", Public("torch.Tensor.__rtruediv__", signature="__rtruediv__(self, other)",
                              renamed={"scalar": "other"}))
declare("rsub_scalar", Public("torch.rsub", renamed={"scalar": "other"}, ranges={"alpha": ALPHA}))
declare("rpow_scalar", Public("torch.pow", inputs=("exponent",), renamed={"scalar": "self"}))
declare("maximum_scalar", Public("torch.maximum", renamed={"scalar": "other"}))
declare("clamp_min_tensor", Public("torch.clamp_min", signature="clamp_min(input, min, *, out=None)"))
declare("round_decimals", Public("torch.round", ranges={"decimals": SIGNS}))
declare("round", Public("torch.round", fixed={"decimals": 0}))
declare("div", Public("torch.div", fixed={"rounding_mode": None}))
declare("div_rounding", Public("torch.div", ranges={"rounding_mode": ("None", "'trunc'", "'floor'")}))
declare("div_trunc", Public("torch.div", fixed={"rounding_mode": "trunc"}))
declare("div_floor", Public("torch.div", fixed={"rounding_mode": "floor"}))
declare("max_binary", Public("torch.max", signature="max(input, other, *, out=None)"))
declare("min_binary", Public("torch.min", signature="min(input, other, *, out=None)"))
for _name in ("add", "sub"):
    declare(_name, Public(f"torch.{_name}", ranges={"alpha": ALPHA}))
for _name in ("addcmul", "addcdiv"):
    declare(_name, Public(f"torch.{_name}", ranges={"value": ALPHA}))

# Indexing: subscripts, index_put's (self, values, *indices) order, fixed accumulate.
# the cast family (issue 38, pytorch#160744): conversions between dtypes
_ASYNC = "an asynchronous host-device transfer: a copy within one device is ordered on its stream alike"
declare("copy_", Public("torch.Tensor.copy_", signature="copy_(self, src, non_blocking=False)",
                        inputs=("self", "src"), excluded={"non_blocking": _ASYNC}))
declare("to", Public("torch.Tensor.to", signature="to(self, dtype, non_blocking=False, copy=False, *, "
                                                   "memory_format=torch.preserve_format)",
                     inputs=("self",), excluded={
                         "non_blocking": _ASYNC,
                         "copy": "forces a new tensor where the dtype is already the input's: no conversion runs",
                         "memory_format": "the result's memory format, not a conversion: left to the layout "
                                          "ops (not drawn by the cast family)"}))
declare("getitem", Public("torch.Tensor.__getitem__", flags=("lead",)))
declare("getitem2", Public("torch.Tensor.__getitem__", inputs=("self", "key", "key"), flags=("lead", "gap")))
declare("getitem_mask", Public("torch.Tensor.__getitem__"))
declare("setitem", Public("torch.Tensor.__setitem__", flags=("lead",)))
declare("setitem_mask", Public("torch.Tensor.__setitem__"))
declare("nonzero", Public("torch.nonzero", signature="nonzero(input, *, out=None, as_tuple=False)",
                          fixed={"as_tuple": False}))
declare("scatter", Public("torch.scatter", signature="scatter(input, dim, index, src, *, reduce=None)",
                          fixed={"reduce": None}))
declare("scatter_value", Public("torch.scatter", signature="scatter(input, dim, index, value, *, reduce=None)",
                                fixed={"reduce": None}))
declare("scatter_reduce_str", Public("torch.scatter", signature="scatter(input, dim, index, src, *, reduce=None)",
                                     ranges={"reduce": ("'add'", "'multiply'")}))
declare("scatter_", Public("torch.Tensor.scatter_", fixed={"reduce": None}))
SCATTER_REDUCTIONS = ("'sum'", "'prod'", "'mean'", "'amax'", "'amin'")
for _name in ("scatter_reduce", "scatter_reduce_"):
    declare(_name, Public("torch.scatter_reduce" if _name == "scatter_reduce" else "torch.Tensor.scatter_reduce_",
                          ranges={"reduce": SCATTER_REDUCTIONS}))
_INDEX_PUT = "index_put(self, indices, values, accumulate=False)"
for _name, _k, _acc in (("index_put", 1, False), ("index_put2", 2, False), ("index_put_acc", 1, True),
                        ("index_put_acc2", 2, True)):
    declare(_name, Public("torch.index_put", signature=_INDEX_PUT, inputs=("self", "values") + ("indices",) * _k,
                          fixed={"accumulate": _acc}))
for _name, _acc in (("index_put_", False), ("index_put_acc_", True)):
    declare(_name, Public("torch.Tensor.index_put_", signature="index_put_(self, indices, values, accumulate=False)",
                          inputs=("self", "values", "indices"), fixed={"accumulate": _acc}))
declare("index_put_mask", Public("torch.index_put", signature=_INDEX_PUT, inputs=("self", "values", "indices")))
declare("put", Public("torch.put", fixed={"accumulate": False}))
declare("put_acc", Public("torch.put", fixed={"accumulate": True}))
declare("repeat_interleave_int", Public("torch.repeat_interleave"))
declare("repeat_interleave_self", Public("torch.repeat_interleave",
                                         signature="repeat_interleave(repeats, *, output_size=None)",
                                         flags=("output_size",),
                                         passes=lambda case: {"output_size": "sum of repeats"
                                                              if dict(case.kwargs).get("output_size") else None}))
declare("nonzero_tuple", Public("torch.nonzero", signature="nonzero(input, *, out=None, as_tuple=False)",
                                fixed={"as_tuple": True},
                                excluded={"out": "as_tuple=True returns a tuple, and torch takes no out= for it"}))
for _name in ("cat", "stack", "hstack", "vstack"):
    declare(_name, Public(f"torch.{_name}", inputs=("tensors",) * (2 if _name in ("hstack", "vstack") else 3)))
    # one input whose slices along dim 0 are the tensors
    declare(f"{_name}_many", Public(f"torch.{_name}", inputs=("tensors",)))
declare("split", Public("torch.split", renamed={"split_size": "split_size_or_sections"}))
declare("tensor_split", Public("torch.tensor_split", signature="tensor_split(input, indices_or_sections, dim=0)",
                               renamed={"sections": "indices_or_sections", "indices": "indices_or_sections"},
                               ranges={"indices_or_sections": ("positive", "sequence")}))
for _name in ("tril_indices", "triu_indices"):
    declare(_name, Public(f"torch.{_name}", inputs=(None,), ranges={"dtype": (DEFAULT, OTHER)}))
declare("searchsorted", Public("torch.searchsorted", fixed={"sorter": None},
                               ranges={"side": ("None", "'left'", "'right'")}))
declare("searchsorted_sorter", Public("torch.searchsorted", fixed={"sorter": TENSOR},
                                      ranges={"side": ("None", "'left'", "'right'")}))

# Linear algebra.
BETA_ALPHA = {"beta": (DEFAULT, "zero", "negative"), "alpha": (DEFAULT, "zero", "negative")}
for _name in ("addmm", "addmv", "addr", "baddbmm", "addbmm"):
    declare(_name, Public(f"torch.{_name}", ranges=BETA_ALPHA))
declare("chain_matmul", Public("torch.chain_matmul", inputs=("matrices",) * 3))
declare("linalg.multi_dot", Public("torch.linalg.multi_dot", inputs=("tensors",) * 3))
for _kind, _eq, _n in (("bmm", "bij,bjk->bik", 2), ("outer", "i,j->ij", 2), ("trace", "ii->", 1),
                       ("diag", "...ii->...i", 1), ("contract", "ijk,jkl->il", 2),
                       ("attention", "bhqd,bhkd->bhqk", 2)):
    declare(f"einsum.{_kind}", Public("torch.einsum", inputs=("operands",) * _n, fixed={"equation": _eq}))
CUDA_ONLY_DRIVER = "a cuSOLVER choice: eager CPU, the reference, refuses any driver"
CPU_PIVOTS_ONLY = "LU without pivoting exists only on CUDA: eager CPU, the reference, refuses pivot=False"
declare("linalg.svd", Public("torch.linalg.svd", excluded={"driver": CUDA_ONLY_DRIVER}))
declare("linalg.svdvals", Public("torch.linalg.svdvals", excluded={"driver": CUDA_ONLY_DRIVER}))
for _name in ("linalg.lu_factor", "linalg.lu_factor_ex", "linalg.lu"):
    declare(_name, Public(f"torch.{_name}", excluded={"pivot": CPU_PIVOTS_ONLY}))
declare("linalg.lu_factor_batched_large", Public("torch.linalg.lu_factor", excluded={"pivot": CPU_PIVOTS_ONLY}))
declare("linalg.lu_solve", Public("torch.linalg.lu_solve", inputs=("LU", "B"), passes=lambda case: {"pivots": TENSOR}))
declare("linalg.ldl_factor", Public("torch.linalg.ldl_factor", passes=_hermitian_if_complex))
declare("linalg.ldl_factor_ex", Public("torch.linalg.ldl_factor_ex", passes=_hermitian_if_complex))
declare("linalg.ldl_solve", Public("torch.linalg.ldl_solve", inputs=("LD", "B"),
                                   passes=lambda case: {"pivots": TENSOR, **_hermitian_if_complex(case)}))
declare("linalg.lstsq", Public("torch.linalg.lstsq",
                               ranges={"driver": ("None", "'gelsy'", "'gelsd'", "'gelss'", "'gels'")}))
declare("linalg.pinv", Public("torch.linalg.pinv", fixed={"hermitian": False}))
declare("linalg.pinv_hermitian", Public("torch.linalg.pinv", fixed={"hermitian": True}))
RANK_OUT = "off: torch 2.13 leaves matrix_rank's out= unwritten under a TorchDispatchMode (the fault target)"
declare("linalg.matrix_rank", Public("torch.linalg.matrix_rank", fixed={"hermitian": False},
                                     excluded={"out": RANK_OUT}))
declare("linalg.matrix_rank_hermitian", Public("torch.linalg.matrix_rank", fixed={"hermitian": True},
                                               excluded={"out": RANK_OUT}))
declare("linalg.tensorinv", Public("torch.linalg.tensorinv", flags=("shape",)))
declare("linalg.tensorsolve", Public("torch.linalg.tensorsolve", flags=("bshape", "xshape")))
declare("linalg.qr", Public("torch.linalg.qr", ranges={"mode": ("'reduced'", "'complete'", "'r'")}))
declare("linalg.norm", Public("torch.linalg.norm", ranges={"dim": OPTIONAL_DIMS + ("sequence",)}))
for _name in ("linalg.eigh", "linalg.eigvalsh"):
    declare(_name, Public(f"torch.{_name}", ranges={"UPLO": ("'L'", "'U'")}))

# Reductions: overloads documented separately, merged into the one the op calls.
for _name in ("sum", "nansum", "prod", "mean", "all", "any"):
    _out = "" if _name == "nansum" else ", out=None"
    _dtype = ", *, dtype=None" if _name in ("sum", "nansum", "prod", "mean") else ", *"
    declare(_name, Public(f"torch.{_name}", signature=f"{_name}(input, dim=None, keepdim=False{_dtype}{_out})",
                          ranges={"dim": OPTIONAL_DIMS + ("sequence",)} if _name != "prod" else {}))
for _name in ("amax", "amin"):
    declare(_name, Public(f"torch.{_name}", signature=f"{_name}(input, dim=(), keepdim=False, *, out=None)",
                          ranges={"dim": (DEFAULT, "negative", NON_NEGATIVE, "sequence")}))
for _name in ("argmax", "argmin"):
    declare(_name, Public(f"torch.{_name}", signature=f"{_name}(input, dim=None, keepdim=False)"))
for _name in ("max_dim", "min_dim"):
    _fn = _name[:3]
    declare(_name, Public(f"torch.{_fn}", signature=f"{_fn}(input, dim, keepdim=False, *, out=None)"))
for _name in ("median_all", "nanmedian_all"):
    _fn = _name.removesuffix("_all")
    declare(_name, Public(f"torch.{_fn}", signature=f"{_fn}(input)"))
NO_OUT_BINDING = "documented, but torch's binding takes no out= (var_mean(x, out=...) is a TypeError)"
for _name in ("var", "std", "var_mean", "std_mean", "nanmean", "logsumexp", "count_nonzero"):
    declare(_name, Public(f"torch.{_name}", ranges={"dim": OPTIONAL_DIMS + ("sequence",)}
                          if _name not in ("logsumexp",) else {"dim": DIMS + ("sequence",)},
                          excluded={"out": NO_OUT_BINDING} if _name in ("var_mean", "std_mean") else {}))
QUANTILE = {"interpolation": ("'linear'", "'lower'", "'higher'", "'midpoint'", "'nearest'")}
for _name in ("quantile", "nanquantile"):
    declare(_name, Public(f"torch.{_name}", ranges=QUANTILE))
    declare(_name + "_tensor_q", Public(f"torch.{_name}", ranges=QUANTILE))
declare("unique", Public("torch.unique", fixed={"sorted": True}))
declare("bincount", Public("torch.bincount", fixed={"weights": None}))
# weighted by the op's name (bincount's weights are None)
declare("bincount_weights", Public("torch.bincount", inputs=("input", "weights"), ranges={"weights": ("tensor",)}))
declare("norm", Public("torch.norm", ranges={"p": (DEFAULT, OTHER, "inf", "zero")}))

# FFT: n-D transforms take a sequence of dims; the frequency helpers a dummy input for
# device and dtype.
for _name in ("fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn"):
    declare(f"fft.{_name}", Public(f"torch.fft.{_name}", ranges={"dim": ("None", "sequence")}))
for _name in ("fftshift", "ifftshift"):
    declare(f"fft.{_name}", Public(f"torch.fft.{_name}", ranges={"dim": OPTIONAL_DIMS + ("sequence",)}))
for _name in ("fft.fftfreq", "fft.rfftfreq"):
    declare(_name, Public(f"torch.{_name}", inputs=(None,), passes=_input_dtype,
                          ranges={"d": (DEFAULT, OTHER, "negative")}))

# Random: factories take a dummy input for device and dtype.
for _name in ("rand", "randn", "randint", "randperm"):
    declare(_name, Public(f"torch.{_name}", inputs=(None,), passes=_input_dtype))
declare("normal_size", Public("torch.normal", signature="normal(mean, std, size, *, generator=None, out=None, "
                              "dtype=None, layout=torch.strided, device=None, pin_memory=False, "
                              "requires_grad=False)", inputs=(None,), passes=_input_dtype))
declare("normal", Public("torch.normal", signature="normal(mean, std, *, generator=None, out=None)"))
declare("normal_mean_tensor", Public("torch.normal", signature="normal(mean, std=1.0, *, generator=None, out=None)",
                                     inputs=("mean",)))
declare("normal_std_tensor", Public("torch.normal", signature="normal(mean=0.0, std, *, generator=None, out=None)",
                                    inputs=("std",)))
declare("bernoulli_p", Public("torch.bernoulli", signature="bernoulli(input, p, *, generator=None)"))


def _memory_format(case: Case) -> dict:
    """A *_like call's memory format, drawn by name (``channels_last``)."""
    name = dict(case.kwargs).get("memory_format")
    return {} if name is None else {"memory_format": Unparsed(f"torch.{name}")}


for _name in ("rand_like", "randn_like", "randint_like"):
    declare(_name, Public(f"torch.{_name}", passes=_memory_format))
declare("bernoulli_tensor_", Public("torch.Tensor.bernoulli_", inputs=("self", "p")))

# Factories: the size-creating ones take a dummy input for device and dtype.
RANGE_ENDS = {"start": SIGNS, "end": SIGNS}
declare("arange", Public("torch.arange", inputs=(None,), passes=_input_dtype,
                         ranges={**RANGE_ENDS, "step": ("negative", "positive")}))
for _name in ("linspace", "logspace"):
    declare(_name, Public(f"torch.{_name}", inputs=(None,), passes=_input_dtype,
                          ranges={**RANGE_ENDS, "steps": ("zero", "positive")}))
FILLS = SIGNS   # (the extremes, inf, -inf, nan and -0.0 are drawn too: ops/factory.py)
declare("full", Public("torch.full", inputs=(None,), passes=_input_dtype, ranges={"fill_value": FILLS}))
declare("eye", Public("torch.eye", inputs=(None,), passes=_input_dtype))
for _name in ("zeros_like", "ones_like"):
    declare(_name, Public(f"torch.{_name}", passes=_memory_format))
declare("full_like", Public("torch.full_like", passes=_memory_format, ranges={"fill_value": FILLS}))

# Neural networks.
for _nd in (1, 2, 3):
    for _kind in ("conv", "conv_transpose"):
        declare(f"{_kind}{_nd}d", Public(f"{F}.{_kind}{_nd}d", inputs=("input", "weight", "bias"), flags=("bias",),
                                         passes=_flagged("bias", "bias", True),
                                         ranges={"padding": (DEFAULT, OTHER, "'same'", "'valid'")}
                                         if _kind == "conv" else {}))
    declare(f"max_pool{_nd}d", Public(f"{F}.max_pool{_nd}d", fixed={"return_indices": False}))
    declare(f"max_pool{_nd}d_with_indices", Public(f"{F}.max_pool{_nd}d", fixed={"return_indices": True}))
for _nd in (1, 2):
    declare(f"adaptive_max_pool{_nd}d", Public(f"{F}.adaptive_max_pool{_nd}d", fixed={"return_indices": False}))
declare("adaptive_max_pool2d_with_indices", Public(f"{F}.adaptive_max_pool2d", fixed={"return_indices": True}))
declare("max_unpool2d", Public(f"{F}.max_unpool2d", passes=lambda case: {"indices": TENSOR}))
declare("batch_norm", Public(f"{F}.batch_norm", inputs=("input", "running_mean", "running_var", "weight", "bias"),
                             flags=("track", "affine"),
                             passes=_flags(("track", "running_mean", True), ("track", "running_var", True),
                                           ("affine", "weight", True), ("affine", "bias", True))))
declare("instance_norm", Public(f"{F}.instance_norm",
                                inputs=("input", "running_mean", "running_var", "weight", "bias"),
                                flags=("track", "affine"),
                                passes=_flags(("track", "running_mean", False), ("track", "running_var", False),
                                              ("affine", "weight", True), ("affine", "bias", True))))
declare("group_norm", Public(f"{F}.group_norm", inputs=("input", "weight", "bias"), flags=("affine",),
                             passes=_flags(("affine", "weight", True), ("affine", "bias", True))))
_LAYER_NORM = Public(f"{F}.layer_norm", inputs=("input", "weight", "bias"), flags=("affine",),
                     passes=lambda case: {
                         "weight": TENSOR if dict(case.kwargs).get("affine", "both") != "none" else None,
                         "bias": TENSOR if dict(case.kwargs).get("affine", "both") == "both" else None})
_RMS_NORM = Public(f"{F}.rms_norm", inputs=("input", "weight"), flags=("affine",),
                   passes=_flagged("affine", "weight", True))
for _name, _public in (("layer_norm", _LAYER_NORM), ("layer_norm_medium", _LAYER_NORM),
                       ("rms_norm", _RMS_NORM), ("rms_norm_medium", _RMS_NORM)):
    declare(_name, _public)
# (its input gains min, max and the values one ulp either side before the histogram)
declare("histc_at_edges", Public("torch.histc"))
# torch._foreach_norm is private, but it is the function the op calls and what torch's own
# public callers reach (clip_grad_norm_ and get_total_norm, whose norm_type it takes as
# ord): their signatures take no dtype and return one total, not a norm per tensor.
# Its aten schema is its signature; each drawn tensor is an element of its list ``self``.
declare("foreach_norm", Public("torch._foreach_norm", inputs=("self",) * 5))
declare("linear", Public(f"{F}.linear", inputs=("input", "weight", "bias"), flags=("bias",),
                         passes=_flagged("bias", "bias", True)))
declare("bilinear", Public(f"{F}.bilinear", inputs=("input1", "input2", "weight", "bias"), flags=("bias",),
                           passes=_flagged("bias", "bias", True)))
declare("embedding_bag", Public(f"{F}.embedding_bag", inputs=("input", "weight", "per_sample_weights"),
                                flags=("offsets", "per_sample_weights"),
                                passes=lambda case: {
                                    "offsets": TENSOR if "offsets" in dict(case.kwargs) else None,
                                    "per_sample_weights": TENSOR if dict(case.kwargs).get("per_sample_weights")
                                    else None},
                                ranges={"mode": ("'sum'", "'mean'")}))
declare("embedding_bag_max", Public(f"{F}.embedding_bag", inputs=("input", "weight", "per_sample_weights"),
                                    flags=("offsets", "per_sample_weights"),
                                    passes=lambda case: {
                                        "offsets": TENSOR if "offsets" in dict(case.kwargs) else None,
                                        "per_sample_weights": None},
                                    fixed={"mode": "max"},
                                    excluded={"per_sample_weights": "only mode='sum' takes per-sample weights",
                                              "scale_grad_by_freq": "not supported with mode='max'"}))
declare("rrelu_eval", Public(f"{F}.rrelu", fixed={"training": False}))
for _name in ("softmax", "log_softmax", "softmin"):
    # dim=None is deprecated (an implicit dim, with a warning): the range is the dims
    declare(_name, Public(f"{F}.{_name}", ranges={"dim": DIMS}))
DROPOUT_P = {"p": ("zero", "positive")}
for _name in ("dropout", "dropout2d", "alpha_dropout", "feature_alpha_dropout"):
    declare(_name, Public(f"{F}.{_name}", ranges=DROPOUT_P))
for _mode in ("nearest", "nearest-exact", "linear", "bicubic", "area"):
    _op = "interpolate_" + _mode.replace("-", "_")
    if _mode == "linear":
        declare(_op, Public(f"{F}.interpolate",
                            ranges={"mode": ("'linear'", "'bilinear'", "'trilinear'")}))
    elif _mode == "bicubic":
        declare(_op, Public(f"{F}.interpolate", fixed={"mode": "bicubic"}))
    else:
        # align_corners and antialias are for the linear and cubic modes only: the
        # others refuse them
        declare(_op, Public(f"{F}.interpolate", fixed={"mode": _mode, "align_corners": None, "antialias": False}))
declare("grid_sample", Public(f"{F}.grid_sample",
                              ranges={"mode": ("'bilinear'", "'nearest'", "'bicubic'"),
                                      "padding_mode": ("'zeros'", "'border'", "'reflection'")}))
for _mode in ("constant", "reflect", "replicate", "circular"):
    declare("pad_" + _mode, Public(f"{F}.pad", fixed={"mode": _mode} if _mode == "constant"
                                   else {"mode": _mode, "value": None}))
declare("unfold_im2col", Public(f"{F}.unfold"))
declare("fold_col2im", Public(f"{F}.fold"))
declare("gelu", Public(f"{F}.gelu", ranges={"approximate": ("'none'", "'tanh'")}))

# Losses: optional tensors passed by flags.
for _name in ("multilabel_soft_margin_loss", "binary_cross_entropy"):
    declare(_name, Public(f"{F}.{_name}", inputs=("input", "target", "weight"), flags=("use_weight",),
                          passes=_flagged("use_weight", "weight")))
declare("binary_cross_entropy_with_logits", Public(
    f"{F}.binary_cross_entropy_with_logits", inputs=("input", "target", "weight", "pos_weight"),
    flags=("use_weight", "use_pos_weight"),
    passes=_flags(("use_weight", "weight", False), ("use_pos_weight", "pos_weight", False))))
for _name in ("nll_loss", "cross_entropy", "multi_margin_loss"):
    declare(_name, Public(f"{F}.{_name}", inputs=("input", "target", "weight"), flags=("use_weight",),
                          passes=_flagged("use_weight", "weight")))
declare("cross_entropy_probs", Public(f"{F}.cross_entropy", inputs=("input", "target", "weight"), flags=("use_weight",),
                                      passes=_flagged("use_weight", "weight"), fixed={"ignore_index": -100}))
declare("kl_div", Public(f"{F}.kl_div", ranges={"reduction": REDUCTIONS + ("'batchmean'",)}))
for _name in ("mse_loss", "l1_loss", "huber_loss"):
    # a per-element weight where this torch takes one (the case's third input)
    declare(_name, Public(f"{F}.{_name}", inputs=("input", "target", "weight"), flags=("use_weight",),
                          passes=lambda case: {"weight": TENSOR if dict(case.kwargs).get("use_weight") else None}
                          if len(case.inputs) > 2 else {}))
declare("ctc_loss", Public(f"{F}.ctc_loss", flags=("lengths_as",)))
RANDOM_DROPOUT = "dropout_p > 0 makes the result random: a differential comparison judges p = 0 only"
_SDPA = Public(f"{F}.scaled_dot_product_attention", inputs=("query", "key", "value", "attn_mask"), flags=("mask",),
               passes=lambda case: {"attn_mask": TENSOR if dict(case.kwargs).get("mask", "mask") == "mask" else None,
                                    "is_causal": dict(case.kwargs).get("mask", "mask") == "causal"},
               excluded={"dropout_p": RANDOM_DROPOUT})
for _name in ("scaled_dot_product_attention", "scaled_dot_product_attention_wide_heads",
              "scaled_dot_product_attention_boolmask"):
    declare(_name, _SDPA)
# flex_attention: score_mod and the block mask are named by the case (functions a repro
# script copies) and passed as the function or None.
declare("flex_attention", Public(
    "torch.nn.attention.flex_attention.flex_attention", inputs=("query", "key", "value"),
    flags=("score_mod", "mask"),
    passes=lambda case: {"score_mod": None if dict(case.kwargs).get("score_mod", "none") == "none" else GIVEN,
                         "block_mask": None if dict(case.kwargs).get("mask", "none") == "none" else GIVEN},
    excluded={"return_lse": "an auxiliary output (the log-sum-exp), not the attention the op compares",
              "return_aux": "auxiliary outputs (the log-sum-exp, the row maxima), not the attention",
              "kernel_options": "the fused kernel's tiling and backend choices: the compiled targets' "
                                "Inductor picks them; eager CPU, the reference, ignores them"}))
_CELL_BIAS = _flags(("bias", "b_ih", True), ("bias", "b_hh", True))
declare("lstm_cell", Public("torch.lstm_cell", signature="lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None)",
                            inputs=("input", "hx", "hx", "w_ih", "w_hh", "b_ih", "b_hh"), flags=("bias",),
                            passes=_CELL_BIAS))
for _kind in ("gru", "rnn_tanh", "rnn_relu"):
    declare(f"{_kind}_cell", Public(f"torch.{_kind}_cell",
                                    signature=f"{_kind}_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None)",
                                    inputs=("input", "hx", "w_ih", "w_hh", "b_ih", "b_hh"), flags=("bias",),
                                    passes=_CELL_BIAS))
RNN_DROPOUT = "dropout between layers is random: a differential comparison judges dropout = 0 only"
_RNN = "{k}(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)"


def _rnn_call(case: Case) -> dict:
    """What the RNN wrappers pass besides the case's keywords: no dropout, and ``train``
    as drawn (False where the case leaves it out)."""
    return {"dropout": 0.0, "train": dict(case.kwargs).get("train", False)}


def _stacked(case: Case) -> dict:
    """lstm_stacked/gru_stacked: the layers and directions are the params input's (L, D, K)."""
    layers, directions, _ = case.inputs[-1].shape
    return {"num_layers": layers, "bidirectional": directions == 2, **_rnn_call(case)}


for _kind, _states in (("lstm", 2), ("gru", 1)):
    declare(_kind, Public(f"torch.{_kind}", signature=_RNN.format(k=_kind),
                          inputs=("input",) + ("hx",) * _states + ("params",) * 4, passes=_rnn_call,
                          fixed={"num_layers": 1, "bidirectional": False}, excluded={"dropout": RNN_DROPOUT}))
    declare(f"{_kind}_stacked", Public(f"torch.{_kind}", signature=_RNN.format(k=_kind),
                                       inputs=("input",) + ("hx",) * _states + ("params",), passes=_stacked,
                                       excluded={"dropout": RNN_DROPOUT}))


# -- the rule for everything else --------------------------------------------------------------

_SUBMODULES = ("special", "linalg", "fft")


def function_of(name: str, family: str) -> str | None:
    """The public function an op of this name exercises, by the naming rule: the name
    of a torch function (``torch.nn.functional`` first in the ``nn`` family, the Tensor
    method for a trailing underscore), or None."""
    if name.endswith("_") and hasattr(torch.Tensor, name):
        return f"torch.Tensor.{name}"
    head, _, rest = name.partition(".")
    if rest:
        if head in _SUBMODULES and hasattr(getattr(torch, head), rest):
            return f"torch.{head}.{rest}"
        return None
    if family == "nn" and hasattr(torch.nn.functional, name):
        return f"{F}.{name}"
    if hasattr(torch, name):
        return f"torch.{name}"
    if hasattr(torch.nn.functional, name):
        return f"{F}.{name}"
    return None


def public(name: str, family: str) -> Public | None:
    """How op ``name`` calls its public function (None: neither declared nor named like one)."""
    if name in TABLE:
        return TABLE[name]
    function = function_of(name, family)
    return Public(function) if function else None


def signature_of(pub: Public, cases: list[Case]) -> Signature:
    """The signature ``pub``'s function takes as the op calls it: the first documented
    one that takes every keyword the cases pass (SignatureUnknown if none)."""
    names = set(pub.fixed)
    for case in cases:
        names |= set(_keyword_parameters(pub, case))
    tensors = len(cases[0].inputs) if cases else 0
    bound = {n for n in (pub.inputs or ())[:tensors] if n}
    return signature(pub.function, declared=pub.signature,
                     fits=lambda sig: binds(sig, 0 if pub.inputs is not None else tensors, names | bound))


def _keyword_parameters(pub: Public, case: Case) -> dict[str, Any]:
    """The parameters a case's keyword arguments and the wrapper's derivations give."""
    out: dict[str, Any] = {}
    for key, value in case.kwargs:
        if key in pub.flags:
            continue
        out[pub.renamed.get(key, key)] = value
    if pub.passes is not None:
        out.update(pub.passes(case))
    return out


class UnboundArgument(ValueError):
    """A case passes a keyword the function does not take (the table is wrong or stale)."""


def call_arguments(pub: Public, sig: Signature, case: Case) -> dict[str, Any]:
    """What ``case`` passes to each parameter of ``sig`` that it gives explicitly: the
    keyword arguments (renamed, derived), the fixed ones, the tensor inputs (TENSOR),
    ``out`` (TENSOR in the out variants) and the target's device. Parameters left out
    take their default."""
    given = _keyword_parameters(pub, case)
    unknown = set(given) - set(sig.names())
    if unknown:
        raise UnboundArgument(f"{pub.function}: the case passes {sorted(unknown)}, which "
                              f"{sig.source} signature ({', '.join(sig.names())}) does not take")
    given.update(pub.fixed)
    if pub.inputs is not None:
        for parameter in pub.inputs[:len(case.inputs)]:
            if parameter is not None and parameter not in given:
                given[parameter] = TENSOR
    else:
        free = [p for p in sig.parameters if p.name not in given and not p.keyword_only]
        for parameter in free[:len(case.inputs)]:
            given[parameter.name] = TENSOR
    if "out" in sig.names() and case.variant.startswith("out"):
        given["out"] = TENSOR
    if "inplace" in sig.names() and case.variant == "inplace":
        given["inplace"] = True   # F.relu(x, inplace=True) is x.relu_(), the in-place variant
    if "device" in sig.names():
        given["device"] = TARGET_DEVICE
    return given
