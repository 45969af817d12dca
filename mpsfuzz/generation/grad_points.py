"""Where an op's gradient is not defined: the predicates ops declare as
``OpSpec.grad_undefined``, and the builders they are made from.

At a kink (relu at 0), a tie (max of equal elements, sort of duplicates) or a repeated
eigen- or singular value, the op has no derivative: autograd returns one subgradient by
convention, and a device that returns another (a tie broken the other way, an unstable
sort, another basis of an eigenspace) is not wrong. The ``grads`` oracle gives no verdict
there. A predicate sees the case's inputs (CPU tensors in the case's dtypes, layouts
as materialised) and keyword arguments, and returns a one-line reason or None:

    predicate(inputs, kwargs, rtol) -> str | None

``rtol`` is the relative tolerance the gradients are compared with; only the spectral
predicates need it (see :func:`repeated_spectrum`).

Near misses count too. Two values count as tied, or a value as on a kink, when they are
within ``ULPS`` units in the last place of the input dtype (relative to their
magnitude), or closer than its smallest normal number (a device that flushes
subnormals to zero sees a zero): the kink is then inside the dtype's rounding of what
the op computes from the inputs (``x - y`` of an L1 loss, a pre-activation), where
the DUT and CPU may legitimately land on different sides. Everything is computed in
float64 on the CPU.
"""
from __future__ import annotations

import math
from typing import Callable, Iterable

import torch

ULPS = 4
# Eigen- and singular vectors are accurate to about eps * |A| / gap on each side; the
# gradients built from them (V diag(g) V^H) differ by that much times |g|. When two
# sides may each be off by that, a gap below SPECTRAL_FACTOR * eps / rtol (relative to
# |A|) makes the gradient undefined at the resolution it is compared at.
SPECTRAL_FACTOR = 2.0


# -- helpers ----------------------------------------------------------------------------

def slack(t: torch.Tensor) -> tuple[float, float]:
    """(relative, absolute) closeness for values of ``t``'s dtype: ``ULPS`` ulps, and the
    smallest normal number. Integers and bool compare exactly."""
    dtype = t.dtype
    if dtype.is_complex:
        dtype = torch.empty((), dtype=dtype).real.dtype
    if not dtype.is_floating_point:
        return 0.0, 0.0
    info = torch.finfo(dtype)
    return ULPS * float(info.eps), float(info.tiny)


def eps_of(t: torch.Tensor) -> float:
    dtype = t.dtype
    if dtype.is_complex:
        dtype = torch.empty((), dtype=dtype).real.dtype
    return float(torch.finfo(dtype).eps) if dtype.is_floating_point else 0.0


def wide(t) -> torch.Tensor:
    """A float64 (complex128) CPU copy; Python numbers become 0-d tensors."""
    if not isinstance(t, torch.Tensor):
        t = torch.tensor(t)
    t = t.detach().cpu()
    return t.to(torch.complex128) if t.is_complex() else t.to(torch.float64)


def near(a: torch.Tensor, b, rel: float, tiny: float, scale=None) -> torch.Tensor:
    """Elementwise (broadcast): a and b equal (NaN equal to NaN, infinities of one sign
    equal), or finite and within ``rel`` of their magnitude (or of ``scale``, the
    magnitude of what they were computed from) plus ``tiny``."""
    a, b = wide(a), wide(b)
    same = (a == b) | (torch.isnan(a) & torch.isnan(b))
    mag = torch.maximum(a.abs(), b.abs())
    if scale is not None:
        mag = torch.maximum(mag, wide(scale).abs())
    close = torch.isfinite(a) & torch.isfinite(b) & ((a - b).abs() <= rel * mag + tiny)
    return same | close


def is_zero(v: torch.Tensor, rel: float, tiny: float, scale=None) -> torch.Tensor:
    """|v| within ``rel`` of ``scale`` plus ``tiny`` (v computed from terms of that size)."""
    v = wide(v)
    bound = tiny if scale is None else rel * wide(scale).abs() + tiny
    return torch.isfinite(v) & (v.abs() <= bound)


def dims_of(value, ndim: int) -> tuple[int, ...]:
    """The dims a reduction's ``dim`` argument names: None or () for all of them."""
    if value is None or (isinstance(value, (tuple, list)) and len(value) == 0):
        return tuple(range(ndim))
    if isinstance(value, int):
        value = (value,)
    return tuple(sorted({int(d) % max(ndim, 1) for d in value})) if ndim else ()


def rows(t: torch.Tensor, dims: Iterable[int]) -> torch.Tensor:
    """``t`` as (slices, elements): the given dims flattened into the last one."""
    dims = tuple(dims)
    if t.dim() == 0:
        return t.reshape(1, 1)
    keep = [d for d in range(t.dim()) if d not in dims]
    moved = t.permute(*keep, *dims)
    return moved.reshape(math.prod(t.shape[d] for d in keep), math.prod(t.shape[d] for d in dims))


def _describe_dims(dim_value) -> str:
    return "" if dim_value is None else f" along dim {dim_value}"


# -- combinators ------------------------------------------------------------------------

def any_of(*predicates) -> Callable:
    """The first reason any predicate gives."""
    def predicate(inputs, kwargs, rtol=1e-5):
        for p in predicates:
            why = p(inputs, kwargs, rtol)
            if why:
                return why
        return None
    return predicate


def when(condition: Callable[[dict], bool], predicate) -> Callable:
    """``predicate`` only for the keyword arguments ``condition`` accepts (e.g. ELU has
    a kink at 0 only when alpha != 1)."""
    def conditional(inputs, kwargs, rtol=1e-5):
        return predicate(inputs, kwargs, rtol) if condition(kwargs) else None
    return conditional


# -- ties -------------------------------------------------------------------------------

def has_tie(values: torch.Tensor, among: str, rel: float, tiny: float, *, ignore_nan: bool = False) -> bool:
    """Whether a row of ``values`` (slices, elements) has a tie that matters: any two
    equal elements (``among="all"``: sort and selection), or several elements at the
    row's max/min (``"max"``/``"min"``: extrema; NaN counts as the extreme, as torch's
    reductions propagate it)."""
    if values.numel() == 0 or values.shape[-1] < 2:
        return False
    v = wide(values)
    if among == "all":
        nan = torch.isnan(v)
        if not ignore_nan and bool((nan.sum(-1) >= 2).any()):
            return True
        s = torch.sort(torch.where(nan, torch.inf, v), dim=-1).values
        valid = ~torch.sort(nan.to(torch.int8), dim=-1).values.bool()  # NaNs sort last
        pair = near(s[:, 1:], s[:, :-1], rel, tiny) & valid[:, 1:] & valid[:, :-1]
        return bool(pair.any())
    ext = v.amax(-1, keepdim=True) if among == "max" else v.amin(-1, keepdim=True)
    return bool((near(v, ext, rel, tiny).sum(-1) >= 2).any())


def ties(input_index: int = 0, *, dim: str | None = "dim", among: str = "all",
         ignore_nan: bool = False) -> Callable:
    """Ties along the reduced dims: those the keyword ``dim`` names (None or absent:
    every dim). ``among``: "all" (any two equal elements: sort, quantile, median),
    "max" or "min" (the extreme taken by several elements: amax, amin).
    ``ignore_nan``: NaNs are left out (nanquantile)."""
    if among not in ("all", "max", "min"):
        raise ValueError(f"among={among!r}")

    def predicate(inputs, kwargs, rtol=1e-5):
        x = inputs[input_index]
        if x.numel() < 2 or x.is_complex():
            return None
        rel, tiny = slack(x)
        value = kwargs.get(dim) if dim else None
        r = rows(wide(x), dims_of(value, x.dim()))
        if not has_tie(r, among, rel, tiny, ignore_nan=ignore_nan):
            return None
        what = "ties among the reduced elements" if among == "all" else f"the {among} is taken by several elements"
        return f"{what} of input {input_index}{_describe_dims(value)} (the gradient picks one of them)"
    return predicate


def constant_slices(input_index: int = 0, *, dim: str = "dim") -> Callable:
    """A reduced slice of two or more elements that are all equal: its spread (std) is 0,
    where the square root has no derivative."""
    def predicate(inputs, kwargs, rtol=1e-5):
        x = inputs[input_index]
        if x.numel() == 0 or x.is_complex():
            return None
        rel, tiny = slack(x)
        value = kwargs.get(dim)
        r = rows(wide(x), dims_of(value, x.dim()))
        if r.shape[-1] < 2:
            return None
        flat = near(r, r.mean(-1, keepdim=True), rel, tiny, scale=r.abs().amax(-1, keepdim=True)).all(-1)
        if bool(flat.any()):
            return f"a reduced slice of input {input_index}{_describe_dims(value)} is constant (zero spread)"
        return None
    return predicate


# -- kinks ------------------------------------------------------------------------------

def kinks(points, inputs: tuple[int, ...] = (0,)) -> Callable:
    """Inputs on a kink of the op: ``points`` is a tuple of values, or a function of the
    keyword arguments returning them (None entries are skipped)."""
    def predicate(inputs_, kwargs, rtol=1e-5):
        pts = points(kwargs) if callable(points) else points
        for i in inputs:
            if i >= len(inputs_):
                continue
            x = inputs_[i]
            if x.numel() == 0 or not (x.is_floating_point() or x.is_complex()):
                continue
            rel, tiny = slack(x)
            w = wide(x)
            for p in pts:
                if p is None:
                    continue
                if bool(near(w, p, rel, tiny).any()):
                    return f"input {i} sits on a kink of the op (at {p:g})"
        return None
    return predicate


def equal_operands(*pairs: tuple[int, int]) -> Callable:
    """Two inputs equal at some position (broadcast): the op picks between them
    (maximum, clamp with tensor bounds, an L1 loss at x == y)."""
    def predicate(inputs, kwargs, rtol=1e-5):
        for i, j in pairs:
            if max(i, j) >= len(inputs):
                continue
            a, b = inputs[i], inputs[j]
            if a.numel() == 0 or b.numel() == 0:
                continue
            rel, tiny = slack(a if a.is_floating_point() else b)
            try:
                hit = near(*torch.broadcast_tensors(wide(a), wide(b)), rel, tiny)
            except RuntimeError:  # shapes that do not broadcast: the op raises anyway
                continue
            if bool(hit.any()):
                return f"inputs {i} and {j} are equal at some position (the op picks between them)"
        return None
    return predicate


def zero_crossings(expr: Callable, what: str, *, dtype_of: int = 0) -> Callable:
    """A quantity the op computes and takes a kink at its zero: ``expr(inputs, kwargs)``
    returns (value, scale) pairs of float64 tensors (scale: the magnitude of the terms
    the value is computed from, which sets its rounding); a kink where a value is within
    rounding of 0."""
    def predicate(inputs, kwargs, rtol=1e-5):
        rel, tiny = slack(inputs[dtype_of])
        for value, scale in expr(inputs, kwargs):
            if value.numel() and bool(is_zero(value, rel, tiny, scale).any()):
                return f"{what} is 0 at some position (a kink of the op)"
        return None
    return predicate


def both_zero(i: int = 0, j: int = 1) -> Callable:
    """Both operands 0 at one position (atan2 and hypot have no derivative at the origin)."""
    def predicate(inputs, kwargs, rtol=1e-5):
        a, b = inputs[i], inputs[j]
        if a.numel() == 0 or b.numel() == 0:
            return None
        rel, tiny = slack(a)
        try:
            za, zb = torch.broadcast_tensors(is_zero(a, rel, tiny), is_zero(b, rel, tiny))
        except RuntimeError:
            return None
        if bool((za & zb).any()):
            return f"inputs {i} and {j} are both 0 at some position (no derivative at the origin)"
        return None
    return predicate


# -- norms ------------------------------------------------------------------------------

def vector_norm_reason(r: torch.Tensor, ord, rel: float, tiny: float, zero_scale=None) -> str | None:
    """Why the p-norm of each row of ``r`` (slices, elements; the values, not their
    absolute values) has no derivative: p = inf/-inf: several elements at the largest/
    smallest |x|, or that extreme 0; p <= 1: an element 0 (|x|^p is not differentiable
    there); p > 1: a row all 0 (the norm's cone). p = 0 counts nonzeros: its gradient
    is 0 by definition. ``zero_scale``: the magnitude the values were computed from."""
    if r.numel() == 0:
        return None
    a = wide(r).abs()
    p = 2.0 if ord in (None, "fro") else float(ord)
    if p == 0:
        return None
    zero = is_zero(a, rel, tiny, zero_scale)
    if math.isinf(p):
        among = "max" if p > 0 else "min"
        if has_tie(a, among, rel, tiny):
            return f"the {'largest' if p > 0 else 'smallest'} |x| of a reduced slice is taken by several elements"
        ext = a.amax(-1, keepdim=True) if p > 0 else a.amin(-1, keepdim=True)
        if bool((zero & near(a, ext, 0.0, 0.0)).any()):
            return "the extreme |x| of a reduced slice is 0"
        return None
    if p <= 1:
        if bool(zero.any()):
            return "an element of a reduced slice is 0 (|x|^p has no derivative there for p <= 1)"
        return None
    if bool(zero.all(-1).any()):
        return "a reduced slice is all 0 (the norm has no derivative at 0)"
    return None


def vector_norm_kinks(input_index: int = 0, *, ord: str = "ord", dim: str = "dim", default_ord=2) -> Callable:
    """Kinks of a vector p-norm whose order is the keyword ``ord`` over the dims of ``dim``."""
    def predicate(inputs, kwargs, rtol=1e-5):
        x = inputs[input_index]
        rel, tiny = slack(x)
        r = rows(wide(x), dims_of(kwargs.get(dim), x.dim()))
        why = vector_norm_reason(r, kwargs.get(ord, default_ord), rel, tiny)
        return f"input {input_index}: {why}" if why else None
    return predicate


def _extreme_sum_reason(absolute: torch.Tensor, sum_dim: int, among: str, rel: float, tiny: float,
                        zero_scale=None) -> str | None:
    """Matrix 1/inf norms: the max (min) over columns (rows) of absolute sums: a tie
    between two sums, or a 0 entry in the chosen one."""
    sums = absolute.sum(sum_dim)
    flat = sums.reshape(-1, sums.shape[-1]) if sums.dim() else sums.reshape(1, 1)
    if has_tie(flat, among, rel, tiny):
        return f"two {'column' if sum_dim == -2 else 'row'} sums tie for the {among}"
    pick = sums.argmax(-1, keepdim=True) if among == "max" else sums.argmin(-1, keepdim=True)
    chosen = absolute.gather(-1, pick.unsqueeze(-2).expand(*absolute.shape[:-1], 1)) if sum_dim == -2 \
        else absolute.gather(-2, pick.unsqueeze(-1).expand(*absolute.shape[:-2], 1, absolute.shape[-1]))
    if bool(is_zero(chosen, rel, tiny, zero_scale).any()):
        return f"an entry of the {among} {'column' if sum_dim == -2 else 'row'} is 0"
    return None


def spectrum_reason(a: torch.Tensor, kind: str, which: str, rtol: float, eps: float,
                    uplo: str = "L") -> str | None:
    """Why the gradient of a function of ``a``'s (..., m, n) eigenvalues (``kind="eigh"``,
    of the Hermitian matrix its ``uplo`` triangle holds) or singular values ("svd") is
    undefined at the resolution ``rtol``: two of them within SPECTRAL_FACTOR * eps / rtol
    of each other relative to |A|_2 (``which="all"``: any two; "max"/"min": the largest/
    smallest and its neighbour), or, where the function is |.|-like at 0 (singular values,
    ``which="zero"``: pseudo-inverses' rank), one that close to 0."""
    w = wide(a)
    if w.numel() == 0 or not bool(torch.isfinite(w).all()):
        return None  # (non-finite inputs: the spectrum says nothing)
    try:
        if kind == "eigh":
            values = torch.linalg.eigvalsh(w, UPLO=uplo)          # ascending
            ordered = values.abs().sort(-1, descending=True).values if which == "zero" else values.flip(-1)
        else:
            ordered = torch.linalg.svdvals(w)                     # descending, >= 0
    except RuntimeError:
        return None
    norm = ordered.abs().amax(-1, keepdim=True) if ordered.shape[-1] else ordered
    bound = max(ULPS * eps, SPECTRAL_FACTOR * eps / max(rtol, 1e-300)) * norm
    k = ordered.shape[-1]
    gaps = (ordered[..., :-1] - ordered[..., 1:]).abs() if k > 1 else ordered[..., :0]
    size = ordered.abs()
    name = "eigenvalues" if kind == "eigh" else "singular values"
    checks = []
    if which == "all":
        checks.append((gaps, f"repeated {name}"))
        if kind == "svd":
            checks.append((size, "a zero singular value"))
    elif which == "max":
        checks.append((gaps[..., :1], f"the largest {name[:-1]} is repeated"))
        checks.append((size[..., :1], f"the largest {name[:-1]} is 0"))
    elif which == "min":
        checks.append((gaps[..., -1:], f"the smallest {name[:-1]} is repeated"))
        checks.append((size[..., -1:], f"the smallest {name[:-1]} is 0"))
    elif which == "zero":
        checks.append((size[..., -1:], f"a {name[:-1]} is (numerically) 0: the rank is ambiguous"))
    else:
        raise ValueError(f"which={which!r}")
    for values, why in checks:
        if values.numel() and bool((values <= bound).any()):
            return f"{why} (within {SPECTRAL_FACTOR:g}*eps/rtol of |A|)"
    return None


def repeated_spectrum(kind: str = "eigh", input_index: int = 0, *, which: str = "all",
                      uplo: str = "UPLO") -> Callable:
    """Repeated (or, for singular values, zero) eigen-/singular values of input
    ``input_index``; ``uplo``: the keyword naming the triangle eigh reads."""
    if kind not in ("eigh", "svd"):
        raise ValueError(f"kind={kind!r}")

    def predicate(inputs, kwargs, rtol=1e-5):
        a = inputs[input_index]
        if a.dim() < 2:
            return None
        why = spectrum_reason(a, kind, which, rtol, eps_of(a), kwargs.get(uplo, "L") or "L")
        return f"input {input_index}: {why}" if why else None
    return predicate


def matrix_norm_reason(a: torch.Tensor, ord, rtol: float, eps: float, rel: float, tiny: float,
                       zero_scale=None) -> str | None:
    """Why a matrix norm of ``a`` (..., m, n) has no derivative: Frobenius: A = 0;
    nuclear: a zero singular value; 2 / -2: the largest / smallest singular value
    repeated or 0; 1 / -1 (inf / -inf): column (row) absolute sums tied for the max
    (min), or a 0 entry in the chosen column (row). ``zero_scale``: the magnitude the
    entries were computed from (an inverse's)."""
    w = wide(a)
    if w.numel() == 0:
        return None
    if ord in (None, "fro"):
        flat = w.reshape(*w.shape[:-2], -1)
        if bool(is_zero(flat, rel, tiny).all(-1).any()):
            return "a matrix is all 0 (the norm has no derivative at 0)"
        return None
    if ord == "nuc":
        return spectrum_reason(w, "svd", "zero", rtol, eps)
    if ord in (2, -2):
        return spectrum_reason(w, "svd", "max" if ord == 2 else "min", rtol, eps)
    p = float(ord)
    if abs(p) == 1:
        return _extreme_sum_reason(w.abs(), -2, "max" if p > 0 else "min", rel, tiny, zero_scale)
    if math.isinf(p):
        return _extreme_sum_reason(w.abs(), -1, "max" if p > 0 else "min", rel, tiny, zero_scale)
    return None


def matrix_last_two(a: torch.Tensor, dims) -> torch.Tensor:
    """``a`` with the two dims ``dims`` moved last (matrix norms over any two dims)."""
    d1, d2 = (int(d) % a.dim() for d in dims)
    rest = [d for d in range(a.dim()) if d not in (d1, d2)]
    return a.permute(*rest, d1, d2)
