"""Discrete Fourier transforms (``torch.fft``): complex-to-complex, real-to-complex and
complex-to-real transforms in 1-D, 2-D and n-D, with signal sizes smaller than, equal to
or larger than the input (trimming and zero padding), negative dims and every ``norm``;
plus fftshift/ifftshift and the fftfreq/rfftfreq sample-frequency helpers.

Tolerances. An FFT's rounding error is proportional to the norm of the whole signal, not
to each output element, so elements near zero would fail a per-element relative check.
The inputs are therefore normal values scaled by 1/sqrt(N) (N: the number of points the
transform sums over), which keeps every output O(1) so that the dtype's absolute
tolerance is meaningful; ``atol_scale``/``rtol_scale`` of 16 leave room for the
O(eps * sqrt(log N)) differences between FFT algorithms (radix-2, mixed radix, Bluestein
for prime sizes). No specials and no non-finite values: how an inf spreads through the
butterflies (inf vs nan at each output) depends on the algorithm.

Dtypes. float32/float64 and complex64/complex128 only: eager CPU has no half, bfloat16
or complex32 FFT kernel (``Unsupported dtype Half``; complex32 even fails with an MKL
error that is not classified as unsupported), and a half-precision FFT compared against
a float32 reference cast back would need an absolute tolerance ~100x the table's.

Complex-to-real transforms (irfft, hfft and their 2-D/n-D forms) read a one-sided
Hermitian signal. Where the input is not Hermitian, the result is implementation
defined: torch documents that the imaginary parts of the self-conjugate bins (DC, and
Nyquist for an even length) are ignored, but for n-D transforms a DC (or Nyquist) plane
whose entries are not conjugate-symmetric across the other transformed dims is
projected differently by different libraries (cuFFT documents it as undefined; MKL and
pocketfft symmetrise). :func:`_hermitian_safe` removes the ambiguity before the call; see
its docstring for why it adds no layout change and only simple ops on the device.
"""
from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from ..large_sizes import grows
from ..opspec import OpSpec, ShapeBudget, any_shape, declare_grows, draw_rank, draw_side, expand, fit, register
from ..preparation import preparation

FAMILY = "fft"

REAL = ("float32", "float64")
COMPLEX = ("complex64", "complex128")
C2C = REAL + COMPLEX          # real inputs are promoted to complex
R2C = REAL
C2R = COMPLEX + REAL          # real inputs are read as complex with zero imaginary parts
NORMS = (None, "backward", "ortho", "forward")
# Output elements at most this many (padding can grow the output past the input budget).
MAX_OUT = 8192
FFT_KW = dict(allow_specials=False, allow_nonfinite=False, rtol_scale=16, atol_scale=16,
              out=True, grad=True)


# -- shapes -----------------------------------------------------------------------------

def _fft_shapes(min_rank: int = 1, max_rank: int = 8):
    """One input: ranks min_rank..8, sides >= 1 except for one zero-size side in about
    one case of twenty (an empty batch, or an empty transformed dim that ``n``/``s``
    pads). Empty batches make MKL (x86 eager CPU) raise, so they stay rare."""
    def build(draw, budget: ShapeBudget):
        rank = draw_rank(draw, budget, min_rank, max_rank)
        no_empty = ShapeBudget(min_rank=budget.min_rank, max_rank=budget.max_rank,
                               max_side=budget.max_side, allow_empty=False,
                               max_numel=budget.max_numel)
        shape = list(fit([draw_side(draw, no_empty) for _ in range(rank)], budget))
        if rank and budget.allow_empty and draw(st.integers(0, 19)) == 0:
            shape[draw(st.integers(0, rank - 1))] = 0
        return (tuple(shape),)
    return build


# -- arguments --------------------------------------------------------------------------

def _length(draw, m: int, *, c2r: bool, room: int) -> int | None:
    """A signal length for an input of size ``m`` along the transformed dim: None
    (default), the default made explicit, smaller (trim), or larger (zero padding).
    For c2r transforms the output length n reads n//2+1 input points."""
    default = 2 * (m - 1) if c2r else m
    must = default < 1                         # the default is invalid: give one
    how = draw(st.sampled_from(("equal", "smaller", "larger"))) if must else \
        draw(st.sampled_from(("none", "none", "equal", "smaller", "larger")))
    if how == "none":
        return None
    if how == "equal":
        if c2r:  # an odd length reading the same points, or the even default
            choices = [v for v in (default, 2 * m - 1) if v >= 1]
            return draw(st.sampled_from(choices)) if choices else 1
        return max(1, default)
    if how == "smaller" and default > 1:
        return draw(st.integers(1, default - 1))
    top = max(default + 1, min(2 * max(default, 1) + 4, room))
    return draw(st.integers(max(default + 1, 1), max(default + 1, top)))


def _norm(draw) -> dict:
    norm = draw(st.sampled_from(NORMS))
    return {} if norm is None and draw(st.booleans()) else {"norm": norm}


def _one_dim_args(c2r: bool = False):
    def build(draw, shapes, dtypes):
        shape = shapes[0]
        rank = len(shape)
        out: dict = {}
        dim = draw(st.integers(-rank, rank - 1))
        if dim != -1 or draw(st.booleans()):
            out["dim"] = dim
        m = shape[dim]
        others = math.prod(s for i, s in enumerate(shape) if i != dim % rank)
        n = _length(draw, m, c2r=c2r, room=max(1, MAX_OUT // max(1, others)))
        if n is not None:
            out["n"] = n
        out.update(_norm(draw))
        return out
    return build


def _multi_dim_args(kind: str, c2r: bool = False):
    """``kind`` "2": fft2-style (dim defaults to the last two dims); "n": fftn-style
    (dim defaults to all dims, or to the last len(s) dims when only s is given)."""
    def build(draw, shapes, dtypes):
        shape = shapes[0]
        rank = len(shape)
        out: dict = {}
        how = draw(st.sampled_from(("default", "dims", "s_only")))
        if kind == "2":
            dims = [rank - 2, rank - 1]
            if how == "dims":
                dims = draw(st.lists(st.integers(0, rank - 1), min_size=2, max_size=2, unique=True))
        else:
            dims = list(range(rank))
            if how == "dims" and rank:
                dims = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
            elif how == "s_only" and rank:
                k = draw(st.integers(1, rank))
                dims = list(range(rank - k, rank))
        if how == "dims":
            out["dim"] = tuple(d - rank if draw(st.booleans()) else d for d in dims)
        sizes = []
        want_s = how == "s_only" or draw(st.booleans())
        room = MAX_OUT
        for i, d in enumerate(dims):
            last = c2r and i == len(dims) - 1
            m = shape[d]
            default = 2 * (m - 1) if last else m
            if want_s or default < 1:
                n = _length(draw, m, c2r=last, room=max(1, room // max(1, m)))
                if n is None:
                    n = -1 if default >= 1 and draw(st.booleans()) else max(1, default)
                want_s = True
            else:
                n = -1
            sizes.append(n)
        _cap_output(shape, dims, sizes, c2r)
        if want_s and dims:
            if how == "default" and kind == "n" and draw(st.booleans()):
                out["dim"] = tuple(dims)  # s with explicit dims covering everything
            out["s"] = tuple(sizes)
        elif how == "s_only":
            out.pop("dim", None)
        out.update(_norm(draw))
        return out
    return build


def _cap_output(shape, dims, sizes, c2r: bool) -> None:
    """Shrink padded signal sizes (in place) until the output has at most MAX_OUT
    elements: padding in several dims multiplies."""
    def out_numel():
        out = list(shape)
        for i, d in enumerate(dims):
            if sizes[i] != -1:
                out[d] = sizes[i]
        return math.prod(out)
    while out_numel() > MAX_OUT:
        grown = [i for i, d in enumerate(dims) if sizes[i] > max(1, shape[d])]
        if not grown:
            return
        i = max(grown, key=lambda k: sizes[k])
        sizes[i] = max(1, shape[dims[i]], sizes[i] // 2)


def transform_plan(shape, kwargs, kind: str, c2r: bool):
    """(dims, signal sizes) the call transforms, resolved as torch resolves dim (an int,
    a sequence or None), n and s (numpy_refs.py reads the same plan)."""
    rank = len(shape)
    if kind == "1":
        dims = [kwargs.get("dim", -1) % rank]
        n = kwargs.get("n")
        m = shape[dims[0]]
        return dims, [n if n is not None else (2 * (m - 1) if c2r else m)]
    s = kwargs.get("s")
    if kwargs.get("dim") is not None:
        dim = kwargs["dim"]
        dims = [d % rank for d in ((dim,) if isinstance(dim, int) else dim)]
    elif kind == "2":
        dims = [rank - 2, rank - 1]
    else:
        dims = list(range(rank - len(s), rank)) if s is not None else list(range(rank))
    sizes = []
    for i, d in enumerate(dims):
        want = s[i] if s is not None else -1
        last = c2r and i == len(dims) - 1
        sizes.append(want if want != -1 else (2 * (shape[d] - 1) if last else shape[d]))
    return dims, sizes


def _scaled_normal(kind: str, c2r: bool = False):
    """Normal values scaled by 1/sqrt(N), N the number of points transformed (so the
    unnormalised direction gives O(1) outputs and the dtype's atol is meaningful)."""
    def values(shapes, kwargs):
        shape = shapes[0]
        points = 1
        if shape:
            _, sizes = transform_plan(shape, kwargs, kind, c2r)
            points = math.prod(max(1, s) for s in sizes)
        return {"distribution": "normal", "high": 1.0 / math.sqrt(points), "allow_specials": False}
    return values


# -- complex-to-real inputs -----------------------------------------------------------------

def _narrow_expanded(t: torch.Tensor, keep: tuple[int, ...] = ()) -> torch.Tensor:
    """``t`` with every stride-0 dim longer than 1 narrowed to its first element (all of
    its elements alias that one, so writing it writes them all; in-place ops refuse
    overlapping views)."""
    for d in range(t.dim()):
        if d not in keep and t.stride(d) == 0 and t.size(d) > 1:
            t = t.narrow(d, 0, 1)
    return t


def _same_layout_copy(x: torch.Tensor) -> torch.Tensor:
    """A copy of ``x`` in fresh storage with exactly x's sizes, strides and storage
    offset (gaps filled with 77, like the recipes' base buffers), so the op still sees
    the drawn layout and the caller's input is left unchanged."""
    sizes, strides, offset = tuple(x.size()), tuple(x.stride()), x.storage_offset()
    extent = offset + 1 + sum((n - 1) * s for n, s in zip(sizes, strides))
    base = torch.full((extent,), 77, dtype=x.dtype, device=x.device)
    y = base.as_strided(sizes, strides, offset)
    _narrow_expanded(y).copy_(_narrow_expanded(x))
    return y


@preparation
def _hermitian_safe(x: torch.Tensor, kwargs: dict, kind: str) -> torch.Tensor:
    """Make a c2r input's self-conjugate planes unambiguous, without touching ``x``.

    The c2r transform runs over dims D with last dim L and output length nL; the
    planes of L at index 0 (DC) and nL/2 (Nyquist, nL even) must be conjugate-symmetric
    over the other dims of D (after their padding or trimming). A plane whose only
    non-zero entry is a real value at index 0 of every other transformed dim is
    symmetric whatever the padding/trimming, so: the imaginary part of that corner is
    zeroed and the rest of the plane set to 0 (1-D: only the imaginary part of DC and
    Nyquist is zeroed, the documented behaviour made explicit).

    Expanded (stride-0) batch dims are kept: every alias gets the same fix. An expanded
    transformed dim cannot be fixed in place, so such an input is made dense first.
    The ops added on the device are a strided copy into a buffer of the same layout and
    zero fills of strided views: simple data movement that the elementwise family tests
    on its own; a bug in them would still be a real (if misattributed) bug, never a
    false positive, because the CPU runs the same code.
    """
    if x.numel() == 0 or x.dim() == 0:
        return x
    dims, sizes = transform_plan(tuple(x.shape), kwargs, kind, c2r=True)
    last, n_last = dims[-1], sizes[-1]
    others = dims[:-1]
    if any(x.stride(d) == 0 and x.size(d) > 1 for d in dims):
        # An expanded transformed dim repeats the plane's corner along it, so the plane
        # cannot be made symmetric in place; the fix must not depend on the layout (the
        # layout oracle compares with a .contiguous() copy): that input goes dense.
        y = x.clone(memory_format=torch.contiguous_format)
    else:
        y = _same_layout_copy(x)
    special = [0] + ([n_last // 2] if n_last % 2 == 0 and n_last // 2 > 0 else [])
    for j in special:
        if j >= y.size(last):
            continue                       # beyond the input: zero padding, symmetric
        plane_dims = [d if d < last else d - 1 for d in others]
        plane = y.select(last, j)
        corner = plane
        for d in sorted(plane_dims, reverse=True):
            corner = corner.select(d, 0)
        if corner.is_complex():
            _narrow_expanded(corner).imag.zero_()
        for d in plane_dims:
            if plane.size(d) > 1:
                _narrow_expanded(plane.narrow(d, 1, plane.size(d) - 1)).zero_()
    return y


def _c2r(fn, kind: str):
    def call(x, **kw):
        return fn(_hermitian_safe(x, kw, kind), **kw)
    call.__name__ = fn.__name__
    return call


# -- shifts and sample frequencies ---------------------------------------------------------

def _shift_args(draw, shapes, dtypes):
    rank = len(shapes[0])
    how = draw(st.sampled_from(("none", "one", "many")))
    if how == "none":
        return {}
    if how == "one":
        return {"dim": draw(st.integers(-rank, rank - 1))}
    dims = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    return {"dim": tuple(d - rank if draw(st.booleans()) else d for d in dims)}


def _freq_shapes(draw, budget: ShapeBudget):
    # a dummy input that carries the device and dtype (its values are not read)
    return (draw(st.sampled_from(((), (1,), (3,)))),)


def _freq_args(draw, shapes, dtypes):
    n = draw(st.one_of(st.integers(0, 64), st.integers(65, 4096)))
    d = draw(st.sampled_from((1.0, 0.5, 0.1, 2.0, 1 / 3, 1e-3, -1.5, 7.0)))
    out = {"n": n, "d": d}
    if draw(st.integers(0, 3)) == 3:  # dtype=None: torch's default dtype, not the dummy's
        out["dtype"] = None
    return out


def _freq(fn):
    def call(x, **kw):
        kw.setdefault("dtype", x.dtype)
        return fn(kw.pop("n"), d=kw.pop("d"), device=x.device, **kw)
    call.__name__ = fn.__name__
    return call


# -- smaller equivalent calls ----------------------------------------------------------------

# Eager CPU's FFT libraries plan at most a few dims at once (MKL rejects an 8-D fftn with
# "Invalid configuration parameters") where cuFFT and MPS split the transform. An n-D
# transform is the composition of transforms over groups of its dims (each group's
# normalisation multiplies to the whole one's), so it can be checked in groups of this many.
_DIMS_PER_CALL = 3


def _dims_and_sizes(x, kwargs):
    rank = x.dim()
    dim, s = kwargs.get("dim"), kwargs.get("s")
    if dim is None:
        dims = list(range(rank)) if s is None else list(range(rank - len(s), rank))
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
    dims = [d % max(rank, 1) for d in dims]
    sizes = list(s) if s is not None else [-1] * len(dims)
    return dims, sizes


def _in_groups(transform):
    """fftn/ifftn as transforms over groups of at most _DIMS_PER_CALL dims."""
    def equivalent(inputs, kwargs):
        x = inputs[0]
        dims, sizes = _dims_and_sizes(x, kwargs)
        norm = kwargs.get("norm")
        for at in range(0, len(dims), _DIMS_PER_CALL):
            group = slice(at, at + _DIMS_PER_CALL)
            x = transform(x, s=sizes[group], dim=dims[group], norm=norm)
        return x
    return equivalent


def _rfftn_in_groups(inputs, kwargs):
    """rfftn: a one-sided rfft over the last dim, then fftn over the others in groups."""
    x = inputs[0]
    dims, sizes = _dims_and_sizes(x, kwargs)
    norm = kwargs.get("norm")
    x = torch.fft.rfft(x, n=None if sizes[-1] == -1 else sizes[-1], dim=dims[-1], norm=norm)
    return _in_groups(torch.fft.fftn)([x], {"dim": tuple(dims[:-1]), "s": tuple(sizes[:-1]), "norm": norm}) \
        if len(dims) > 1 else x


# -- specs ------------------------------------------------------------------------------------

F = torch.fft


def fft_op(name: str, fn, dtypes, doc: str, *, kind: str, c2r: bool = False, min_rank: int = 1,
           **kw) -> OpSpec:
    args = _one_dim_args(c2r) if kind == "1" else _multi_dim_args(kind, c2r)
    if c2r:
        fn = _c2r(fn, kind)
    options = dict(FFT_KW)
    options.update(kw)
    return OpSpec(name=name, family=FAMILY, fn=fn, shapes=_fft_shapes(min_rank=min_rank),
                  dtypes=dtypes, args=args, input_values=(_scaled_normal(kind, c2r),),
                  min_rank=min_rank, doc=doc, **options)


register(
    fft_op("fft.fft", F.fft, C2C, "1-D complex FFT with n trimming/padding, any dim, every norm",
           kind="1"),
    fft_op("fft.ifft", F.ifft, C2C, "1-D inverse complex FFT", kind="1"),
    fft_op("fft.rfft", F.rfft, R2C, "1-D FFT of a real signal (one-sided output)", kind="1"),
    fft_op("fft.irfft", F.irfft, C2R,
           "1-D inverse of rfft, even and odd n (DC/Nyquist made real before the call)",
           kind="1", c2r=True),
    fft_op("fft.hfft", F.hfft, C2R, "1-D FFT of a one-sided Hermitian signal (real output)",
           kind="1", c2r=True),
    fft_op("fft.ihfft", F.ihfft, R2C, "1-D inverse of hfft (real input, one-sided output)", kind="1"),
    fft_op("fft.fft2", F.fft2, C2C, "2-D complex FFT over the last two or two chosen dims, s",
           kind="2", min_rank=2),
    fft_op("fft.ifft2", F.ifft2, C2C, "2-D inverse complex FFT", kind="2", min_rank=2),
    fft_op("fft.rfft2", F.rfft2, R2C, "2-D FFT of a real signal", kind="2", min_rank=2),
    fft_op("fft.irfft2", F.irfft2, C2R, "2-D inverse of rfft2 (self-conjugate planes made symmetric)",
           kind="2", c2r=True, min_rank=2),
    fft_op("fft.hfft2", F.hfft2, C2R, "2-D FFT of a one-sided Hermitian signal",
           kind="2", c2r=True, min_rank=2),
    fft_op("fft.ihfft2", F.ihfft2, R2C, "2-D inverse of hfft2", kind="2", min_rank=2),
    fft_op("fft.fftn", F.fftn, C2C, "n-D complex FFT over all, chosen or the last len(s) dims (0-d too)",
           kind="n", min_rank=0, equivalent=_in_groups(F.fftn)),
    fft_op("fft.ifftn", F.ifftn, C2C, "n-D inverse complex FFT", kind="n", min_rank=0,
           equivalent=_in_groups(F.ifftn)),
    fft_op("fft.rfftn", F.rfftn, R2C, "n-D FFT of a real signal", kind="n", equivalent=_rfftn_in_groups),
    fft_op("fft.irfftn", F.irfftn, C2R, "n-D inverse of rfftn (self-conjugate planes made symmetric)",
           kind="n", c2r=True),
    fft_op("fft.hfftn", F.hfftn, C2R, "n-D FFT of a one-sided Hermitian signal", kind="n", c2r=True),
    fft_op("fft.ihfftn", F.ihfftn, R2C, "n-D inverse of hfftn", kind="n"),
)

register(
    OpSpec(name="fft.fftshift", family=FAMILY, fn=lambda x, **kw: F.fftshift(x, **kw),
           shapes=any_shape(1, min_rank=1), dtypes=expand("all"), args=_shift_args, min_rank=1,
           grad=True, doc="roll the zero frequency to the centre over all, one or several dims"),
    OpSpec(name="fft.ifftshift", family=FAMILY, fn=lambda x, **kw: F.ifftshift(x, **kw),
           shapes=any_shape(1, min_rank=1), dtypes=expand("all"), args=_shift_args, min_rank=1,
           grad=True, doc="inverse of fftshift (differs for odd sizes)"),
    # rtol_scale: in half precision k and 1/(n*d) round separately (arange of k > 2048
    # is inexact), so implementations may differ by ~2 ulp.
    OpSpec(name="fft.fftfreq", family=FAMILY, fn=_freq(F.fftfreq), shapes=_freq_shapes,
           dtypes=expand("float"), args=_freq_args, out=True, rtol_scale=4,
           doc="sample frequencies k/(n*d) for n up to 4096 (dummy input gives device and dtype)"),
    OpSpec(name="fft.rfftfreq", family=FAMILY, fn=_freq(F.rfftfreq), shapes=_freq_shapes,
           dtypes=expand("float"), args=_freq_args, out=True, rtol_scale=4,
           doc="one-sided sample frequencies (dummy input gives device and dtype)"),
)

# Dims that may grow past 65,536 (the large size class, generation/large_sizes.py): the
# last dim and dim 0 of the 1-D transforms, each the transformed dim or a batch as the
# drawn dim says; 65,537 is a prime, a plan of its own (Bluestein's). The values stay the
# op's own (normal, scaled by 1/sqrt(points): outputs of O(1), against which the dtype's
# atol is meaningful; an FFT's rounding grows with log(points) only, far within the 16x
# the table allows). Not the 2-D and n-D transforms: eager CPU, the reference, corrupts
# its heap (malloc(): invalid size, SIGSEGV; torch 2.13, MKL) on one over a long dim of
# stride > 1 that is innermost in memory (a gapped (4, 257) does it), as the class's
# gapped and transposed layouts make (a clean campaign's workers died on fft2@large).
_LAST_OR_FIRST = (grows("length", (0, -1)), grows("rows", (0, 0), min_rank=2))
declare_grows({op: _LAST_OR_FIRST for op in ("fft.fft", "fft.ifft", "fft.rfft", "fft.irfft")})
