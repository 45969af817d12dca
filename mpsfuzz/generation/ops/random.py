"""Random sampling: size-creating generators (rand, randn, randint, randperm, normal with
a size), ``*_like`` generators, samplers with tensor parameters (normal, bernoulli,
multinomial, poisson) and the in-place samplers (normal_, uniform_, bernoulli_,
exponential_, geometric_, log_normal_, cauchy_, random_).

Values are never compared with the CPU (different generators): every spec carries the
``random`` semantic and declares what its output should follow (a
:class:`~mpsfuzz.generation.opspec.Distribution`: uniform on [0, 1), uniform integers,
a permutation, normal with per-element parameters, an in-place sampler's law...). The
distribution oracle (:mod:`mpsfuzz.oracles.distribution`) judges the DUT's output
against it: metadata, support, a statistical test, variety, unfilled positions.

Besides their own parameters, a quarter of the cases pass an explicit ``generator``: a
``torch.Generator`` made on the input's device and seeded with the case's number (the
others use the default generator, which the executor seeds); the factories sometimes
pass ``dtype=None`` (where the default dtype is the one drawn) and the ``*_like`` ones
a ``dtype`` and a ``memory_format``. (bernoulli and multinomial draw no generator: their
Tensor-method variant passes the case's keyword arguments to the method as they are.)
"""
from __future__ import annotations

import inspect

import torch
from hypothesis import strategies as st

from .. import dtypes as dt
from ..huge_samples import RNG_DTYPES, rng_shapes, window_count, windows_of
from ..large_sizes import HUGE_SUFFIX, SIZE_CLASS, grows
from ..opspec import (Distribution, OpSpec, ShapeBudget, any_shape, broadcastable_to, declare_grows, draw_rank,
                      draw_side, fit, register, same_shapes)
from ..preparation import preparation
from ..recipes import DtypeArg

FAMILY = "random"
RANDOM = frozenset({"random"})

FLOAT = dt.FLOAT
WIDE_COMPLEX = ("complex64", "complex128")
SIGNED_INTS = ("int8", "int16", "int32", "int64")
INTS = SIGNED_INTS + ("uint8",)
INPUT_OPTS = dict(allow_specials=False, allow_nonfinite=False)


# -- argument builders ----------------------------------------------------------------------

def _takes(fn, name: str) -> bool:
    """Whether this torch's ``fn`` documents parameter ``name`` (``rand_like`` took no
    generator before torch 2.9)."""
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin: its documented signature
        return f"{name}=" in (fn.__doc__ or "").split("\n\n")[0]


def _rng(draw) -> dict:
    """An explicit generator in a quarter of the cases: its seed (the wrapper makes a
    ``torch.Generator`` on the input's device), else none (the seeded default one)."""
    return {"generator": draw(st.integers(0, 2**16))} if draw(st.integers(0, 3)) == 3 else {}


def with_rng(build=None):
    """``build``'s arguments plus, sometimes, a generator."""
    def wrapped(draw, shapes, dtypes):
        out = build(draw, shapes, dtypes) if build is not None else {}
        out.update(_rng(draw))
        return out
    return wrapped


def _default_dtype_sometimes(draw, dtype_name: str, default: str) -> dict:
    """``dtype=None`` now and then where the factory's default dtype is the one drawn
    (the distribution oracle holds the result to the dummy input's dtype)."""
    return {"dtype": None} if dtype_name == default and draw(st.booleans()) else {}

def _size(draw) -> tuple[int, ...]:
    """A size for the generators: up to ~4096 elements, 0-d, empty or >4-D sometimes."""
    budget = ShapeBudget(max_rank=6, max_side=16, allow_empty=True, max_numel=4096)
    how = draw(st.integers(0, 9))
    if how == 0:
        return ()
    if how == 1:
        return (draw(st.integers(64, 4096)),)
    rank = draw_rank(draw, budget, 1, 6)
    return fit([draw_side(draw, budget) for _ in range(rank)], budget)


def _dummy_shapes(draw, budget: ShapeBudget):
    return ((),)   # a 0-d tensor that carries the device and dtype


def _size_args(draw, shapes, dtypes):
    return {"size": _size(draw), **_default_dtype_sometimes(draw, dtypes[0], "float32"), **_rng(draw)}


def _int_range(draw, dtype_name: str) -> tuple[int, int]:
    lo_limit, hi_limit = dt.EXACT_INTEGERS[dtype_name]
    kind = draw(st.sampled_from(("small", "small", "wide", "edge")))
    if kind == "small":
        low = draw(st.integers(max(lo_limit, -10), min(hi_limit, 10) - 1))
        high = draw(st.integers(low + 1, min(hi_limit, low + 12)))
    elif kind == "wide":
        low = draw(st.integers(max(lo_limit, -1000), 0)) if lo_limit < 0 else 0
        high = min(hi_limit, low + draw(st.sampled_from((100, 256, 1000, 5000, 100000))))
    else:  # the dtype's whole (exact) range, high exclusive
        low, high = lo_limit, hi_limit
    return low, max(high, low + 1)


def _randint_args(draw, shapes, dtypes):
    low, high = _int_range(draw, dtypes[0])
    return {"low": low, "high": high, "size": _size(draw), **_default_dtype_sometimes(draw, dtypes[0], "int64"),
            **_rng(draw)}


# The memory formats a *_like result may take besides the input's own (preserve_format).
_FORMATS = {4: ("contiguous_format", "channels_last"), 5: ("contiguous_format", "channels_last_3d")}


def _like_args(fn):
    """rand_like/randn_like/randint_like: dtype given explicitly (the input's: the
    distribution oracle holds the result to it), a memory format, a generator (where
    this torch's function takes one); each left out first."""
    generator = _takes(fn, "generator")

    def build(draw, shapes, dtypes):
        out: dict = {}
        if draw(st.integers(0, 3)) == 3:
            out["dtype"] = DtypeArg(dtypes[0])
        if draw(st.integers(0, 3)) == 3:
            out["memory_format"] = draw(st.sampled_from(("preserve_format",)
                                                        + _FORMATS.get(len(shapes[0]), ("contiguous_format",))))
        if generator:
            out.update(_rng(draw))
        return out
    return build


def _randint_like_args(draw, shapes, dtypes):
    low, high = _int_range(draw, dtypes[0])
    return {"low": low, "high": high, **_like_args(torch.randint_like)(draw, shapes, dtypes)}


_PERM_MAX = {"int8": 128, "uint8": 256, "int16": 4096, "float16": 2048, "bfloat16": 256}


def _randperm_args(draw, shapes, dtypes):
    top = min(4096, _PERM_MAX.get(dtypes[0], 4096))
    n = draw(st.one_of(st.integers(0, 20), st.integers(21, top)))
    return {"n": n, **_default_dtype_sometimes(draw, dtypes[0], "int64"), **_rng(draw)}


_MEANS = (0.0, 1.5, -3.0, 100.0)
_STDS = (1.0, 0.5, 3.0, 1e-2)


def _mean_std(draw, shapes=None, dtypes=None):
    return {"mean": draw(st.sampled_from(_MEANS)), "std": draw(st.sampled_from(_STDS))}


def _normal_size_args(draw, shapes, dtypes):
    return {**_mean_std(draw), "size": _size(draw), **_default_dtype_sometimes(draw, dtypes[0], "float32"),
            **_rng(draw)}


_RANGES = ((0.0, 1.0), (-1.0, 1.0), (-3.0, 5.0), (2.0, 2.5), (-100.0, 100.0), (1e-3, 2e-3))


def _uniform_args(draw, shapes, dtypes):
    low, high = draw(st.sampled_from(_RANGES))
    return {"from": low, "to": high}


def _p_arg(draw, shapes, dtypes):
    return {"p": draw(st.sampled_from((0.5, 0.1, 0.9, 0.0, 1.0, 0.01)))}


def _lambd_arg(draw, shapes, dtypes):
    return {"lambd": draw(st.sampled_from((1.0, 0.5, 4.0, 0.1)))}


def _geometric_arg(draw, shapes, dtypes):
    # p in (0, 1) (eager CPU refuses 1); 0.05 gives values past 127, so not for 8-bit
    return {"p": draw(st.sampled_from((0.5, 0.2, 0.9, 0.05)))}


def _log_normal_args(draw, shapes, dtypes):
    return {"mean": draw(st.sampled_from((0.0, 1.0, -1.0))), "std": draw(st.sampled_from((1.0, 0.5, 2.0)))}


def _cauchy_args(draw, shapes, dtypes):
    return {"median": draw(st.sampled_from((0.0, 2.0, -5.0))), "sigma": draw(st.sampled_from((1.0, 0.5, 3.0)))}


def _random_args(draw, shapes, dtypes):
    how = draw(st.sampled_from(("range", "range", "to", "default")))
    if how == "default":
        return {}
    if dtypes[0] == "bool":
        return {"from": 0, "to": 2} if how == "range" else {"to": 2}
    low, high = _int_range(draw, dtypes[0])
    if how == "to":
        return {"to": max(1, high)}
    return {"from": low, "to": high}


def _multinomial_shapes(draw, budget: ShapeBudget):
    k = draw(st.integers(3, 40))
    if draw(st.booleans()):
        return ((k,),)
    rows = draw(st.integers(0, 12)) if budget.allow_empty else draw(st.integers(1, 12))
    return ((rows, k),)


def _multinomial_args(draw, shapes, dtypes):
    k = shapes[0][-1]
    if draw(st.booleans()):
        return {"num_samples": draw(st.one_of(st.integers(1, 8), st.integers(9, 400))), "replacement": True}
    return {"num_samples": draw(st.integers(1, max(1, k // 2))), "replacement": False}


def _bernoulli_tensor_shapes(draw, budget: ShapeBudget):
    (shape,) = any_shape(1)(draw, budget)
    return (shape, broadcastable_to(draw, shape))


# -- values of tensor inputs ------------------------------------------------------------------

PROBS = {"distribution": "uniform", "low": 0.0, "high": 1.0, "allow_specials": False}
WEIGHTS = {"distribution": "int_range", "low": 0, "high": 4, "allow_specials": False}
RATES = {"distribution": "uniform", "low": 0.0, "high": 10.0, "allow_specials": False}
STDS = {"distribution": "positive", "low": 0.125, "high": 4.0, "allow_specials": False}


def _const(options: dict):
    return lambda shapes, kwargs: dict(options)


# -- fns ----------------------------------------------------------------------------------------

@preparation
def _writable(x: torch.Tensor) -> torch.Tensor:
    """``x`` with stride-0 dims narrowed to one element: in-place samplers refuse an
    overlapping self, and writing the one element fills every alias (the judge keeps
    index 0 of those dims, the only independent samples)."""
    for d in range(x.dim()):
        if x.stride(d) == 0 and x.size(d) > 1:
            x = x.narrow(d, 0, 1)
    return x


@preparation
def generator_on(device, kw: dict) -> dict:
    """``kw`` with a drawn generator seed replaced by a ``torch.Generator`` on ``device``
    seeded with it (a case holds the seed; the generator lives on the target)."""
    if kw.get("generator") is None:
        kw.pop("generator", None)
        return kw
    return {**kw, "generator": torch.Generator(device=device).manual_seed(kw["generator"])}


def _like(factory):
    """A *_like factory with a drawn memory format (by its name in torch: channels_last)
    and generator."""
    def call(x, *args, **kw):
        if "memory_format" in kw:
            kw["memory_format"] = getattr(torch, kw["memory_format"])
        return factory(x, *args, **generator_on(x.device, kw))
    call.__name__ = factory.__name__
    return call


def _in_place(method: str):
    def call(x, **kw):
        getattr(_writable(x), method)(**generator_on(x.device, kw))
        return x
    call.__name__ = method
    return call


def _sized(factory):
    def call(x, **kw):
        size = tuple(kw.pop("size"))
        kw.setdefault("dtype", x.dtype)
        return factory(size, device=x.device, **generator_on(x.device, kw))
    call.__name__ = factory.__name__
    return call


def _bernoulli_tensor_inplace(x, p, **kw):
    """x.bernoulli_(p) with p broadcast to x; an expanded x is written through its
    first element along stride-0 dims (p narrowed alike)."""
    index = tuple(slice(0, 1) if x.stride(d) == 0 and x.size(d) > 1 else slice(None) for d in range(x.dim()))
    _writable(x).bernoulli_(p.expand(x.shape)[index], **generator_on(x.device, kw))
    return x


def _randint_fn(x, low, high, size, **kw):
    kw.setdefault("dtype", x.dtype)
    return torch.randint(low, high, tuple(size), device=x.device, **generator_on(x.device, kw))


def _randperm_fn(x, n, **kw):
    kw.setdefault("dtype", x.dtype)
    return torch.randperm(n, device=x.device, **generator_on(x.device, kw))


def _normal_size_fn(x, mean, std, size, **kw):
    kw.setdefault("dtype", x.dtype)
    return torch.normal(mean, std, tuple(size), device=x.device, **generator_on(x.device, kw))


# -- specs ----------------------------------------------------------------------------------------

def random_op(name: str, fn, shapes, dtypes, doc: str, law: Distribution, **kw) -> OpSpec:
    kw.setdefault("allow_specials", False)
    kw.setdefault("allow_nonfinite", False)
    return OpSpec(name=name, family=FAMILY, fn=fn, shapes=shapes, dtypes=tuple(dtypes), doc=doc,
                  semantics=RANDOM, distribution=law, **kw)


def law(kind: str, **options) -> Distribution:
    """What the op's output follows: a kind the distribution oracle knows (its
    parameters: the case's keyword arguments and inputs), with the op's own options."""
    return Distribution(kind, tuple(sorted(options.items())))


ANY_SHAPE = any_shape(1)
UNIFORM_DTYPES = FLOAT + ("complex32",) + WIDE_COMPLEX
RANDINT_DTYPES = INTS + ("uint16", "uint32") + FLOAT
PERM_DTYPES = ("int64", "int32", "int16", "int8", "uint8") + FLOAT

register(
    random_op("rand", _sized(torch.rand), _dummy_shapes, UNIFORM_DTYPES,
              "uniform [0,1) of a drawn size (0-d, empty, >4-D, up to 4096 elements)",
              law("unit-uniform"), args=_size_args, out=True),
    random_op("randn", _sized(torch.randn), _dummy_shapes, UNIFORM_DTYPES,
              "standard normal of a drawn size (complex: variance 1/2 per part)",
              law("standard-normal"), args=_size_args, out=True),
    random_op("randint", _randint_fn, _dummy_shapes, RANDINT_DTYPES,
              "uniform integers in [low, high) up to the dtype's whole range",
              law("uniform-integers"), args=_randint_args, out=True),
    random_op("randperm", _randperm_fn, _dummy_shapes, PERM_DTYPES,
              "random permutation of 0..n-1 (n up to 4096, within the dtype's exact range)",
              law("permutation"), args=_randperm_args, out=True),
    random_op("normal_size", _normal_size_fn, _dummy_shapes, FLOAT,
              "normal(mean, std, size) with float parameters", law("normal"),
              args=_normal_size_args, out=True),
    random_op("rand_like", _like(torch.rand_like), ANY_SHAPE, UNIFORM_DTYPES,
              "uniform [0,1) shaped like a (strided) input, a memory format", law("unit-uniform", like=True),
              args=_like_args(torch.rand_like)),
    random_op("randn_like", _like(torch.randn_like), ANY_SHAPE, UNIFORM_DTYPES,
              "standard normal shaped like a (strided) input, a memory format",
              law("standard-normal", like=True), args=_like_args(torch.randn_like)),
    random_op("randint_like", _like(lambda x, low, high, **kw: torch.randint_like(x, low, high, **kw)), ANY_SHAPE,
              RANDINT_DTYPES, "uniform integers in [low, high) shaped like the input",
              law("uniform-integers", like=True), args=_randint_like_args),
)

register(
    random_op("normal", lambda m, s, **kw: torch.normal(m, s, **generator_on(m.device, kw)), same_shapes(2), FLOAT,
              "normal(mean tensor, std tensor), per-element parameters",
              law("normal-per-element", form="both"),
              input_dtypes=(None, None), input_values=(None, _const(STDS)), args=with_rng(), out=True),
    random_op("normal_mean_tensor", lambda m, std, **kw: torch.normal(m, std=std, **generator_on(m.device, kw)),
              ANY_SHAPE, FLOAT, "normal(mean tensor, std float)", law("normal-per-element", form="mean"),
              args=with_rng(lambda draw, s, d: {"std": draw(st.sampled_from(_STDS))}), out=True),
    random_op("normal_std_tensor", lambda s, mean, **kw: torch.normal(mean=mean, std=s, **generator_on(s.device, kw)),
              ANY_SHAPE, FLOAT, "normal(mean float, std tensor)", law("normal-per-element", form="std"),
              input_values=(_const(STDS),),
              args=with_rng(lambda draw, s, d: {"mean": draw(st.sampled_from(_MEANS))}), out=True),
    random_op("bernoulli", lambda p, **kw: torch.bernoulli(p, **kw), ANY_SHAPE, FLOAT,
              "bernoulli with per-element probabilities (p=0/1 exact)", law("bernoulli-per-element"),
              input_values=(_const(PROBS),), method="bernoulli", out=True),
    random_op("bernoulli_p", lambda x, p, **kw: torch.bernoulli(x, p=p, **generator_on(x.device, kw)), ANY_SHAPE,
              FLOAT, "bernoulli(input, p float): samples shaped like input", law("bernoulli"), args=with_rng(_p_arg)),
    random_op("multinomial", lambda w, **kw: torch.multinomial(w, **kw), _multinomial_shapes, FLOAT,
              "multinomial over 1-D/2-D weights with zeros, with and without replacement",
              law("multinomial"), input_values=(_const(WEIGHTS),), args=_multinomial_args,
              method="multinomial", out=True),
    random_op("poisson", lambda r, **kw: torch.poisson(r, **generator_on(r.device, kw)), ANY_SHAPE, FLOAT,
              "poisson with per-element rates in [0, 10]", law("poisson-per-element"), input_values=(_const(RATES),),
              args=with_rng()),
)

register(
    random_op("normal_", _in_place("normal_"), ANY_SHAPE, FLOAT,
              "in-place normal(mean, std) on a strided self", law("normal-in-place"), args=with_rng(_mean_std)),
    random_op("uniform_", _in_place("uniform_"), ANY_SHAPE, FLOAT,
              "in-place uniform [from, to) on a strided self (to itself allowed: rounding)",
              law("uniform-in-place"), args=with_rng(_uniform_args)),
    random_op("bernoulli_", _in_place("bernoulli_"), ANY_SHAPE, FLOAT + INTS + ("bool",),
              "in-place bernoulli(p float) on a strided self", law("bernoulli-in-place"), args=with_rng(_p_arg)),
    random_op("bernoulli_tensor_", _bernoulli_tensor_inplace,
              _bernoulli_tensor_shapes, FLOAT, "in-place bernoulli with a broadcast probability tensor",
              law("bernoulli-per-element-in-place"), input_dtypes=(None, None), input_values=(None, _const(PROBS)),
              args=with_rng()),
    random_op("exponential_", _in_place("exponential_"), ANY_SHAPE, FLOAT,
              "in-place exponential(lambd) on a strided self", law("exponential-in-place"), args=with_rng(_lambd_arg)),
    random_op("geometric_", _in_place("geometric_"), ANY_SHAPE, FLOAT + ("int32", "int64"),
              "in-place geometric(p): integers >= 1", law("geometric-in-place"), args=with_rng(_geometric_arg)),
    random_op("log_normal_", _in_place("log_normal_"), ANY_SHAPE, FLOAT,
              "in-place log-normal(mean, std)", law("log-normal-in-place"), args=with_rng(_log_normal_args)),
    random_op("cauchy_", _in_place("cauchy_"), ANY_SHAPE, FLOAT,
              "in-place Cauchy(median, sigma)", law("cauchy-in-place"), args=with_rng(_cauchy_args)),
    random_op("random_", _in_place("random_"), ANY_SHAPE, FLOAT + INTS + ("bool",),
              "in-place uniform integers: [from, to), [0, to) or the dtype's default range",
              law("random-integers-in-place"), args=with_rng(_random_args)),
)

# Dims that may grow past 65,536 (the large size class, generation/large_sizes.py), where a
# sampler's kernel maps the shape of a tensor input onto its grid: long rows and many of
# them (a shaped-like factory, per-element parameters, an in-place sampler's strided
# self), and multinomial's categories. The judges are statistical and hold at any size
# (their false-alarm bounds are exact, not asymptotic, and take the dtype's rounding
# into account); the factories sized by an argument (rand, randperm) have no input dim.
_ROWS = (grows("length", (0, -1)), grows("rows", (0, 0)))
declare_grows({
    **{op: _ROWS for op in ("rand_like", "randn_like", "bernoulli", "uniform_", "normal_")},
    "normal": (grows("length", (0, -1), (1, -1)), grows("rows", (0, 0), (1, 0))),
    "multinomial": (grows("length", (0, -1)),),
})


# -- past 2^31 elements: a draw judged on windows (issue 38) ------------------------------------

def _rand_windows(x, **kw):
    """``torch.rand`` of ``x``'s shape on its device (``x``: a stride-0 view that carries the
    size, the dtype and the device), cut there to the windows the distribution oracle
    judges (generation/huge_samples.py)."""
    return windows_of(torch.rand(tuple(x.shape), dtype=x.dtype, device=x.device, **generator_on(x.device, kw)))


def _rand_windows_reference(x, **kw):
    """The CPU side's call: a draw of the windows' length alone (never compared by value:
    the generators differ; its shape and dtype are the metadata oracle's)."""
    return torch.rand(window_count(tuple(x.shape)), dtype=x.dtype, **generator_on(x.device, kw))


# rand past 2^31 and 2^32 elements, of ranks 1 to 5 (pytorch#155293: a 5-D bfloat16 draw of
# 2^31 elements fails on MPS where one of 2^30 works); the size rides on the input's shape,
# so that triage names and shrinks it as a large input's.
register(OpSpec(
    name="rand" + HUGE_SUFFIX, family=FAMILY, fn=_rand_windows, shapes=rng_shapes, dtypes=RNG_DTYPES,
    doc="uniform [0,1) past 2^31 and 2^32 elements, ranks 1 to 5, judged on windows at the start, the end, "
        "slices along dim 0 and across every power of two", allow_specials=False, allow_nonfinite=False,
    semantics=RANDOM | {"large"}, distribution=law("unit-uniform-windows"), args=with_rng(),
    reference_fn=_rand_windows_reference, size_class=SIZE_CLASS, base="rand"))
