"""Users' kernels: ``@mpsfuzz.kernel`` turns a kernel and its reference into an op spec.

A user declares what a kernel takes, one :func:`tensor` per tensor argument (dtypes,
rank and side ranges, divisibility of one dim, whether it requires contiguous inputs,
value ranges) plus extra scalar arguments, and a ``reference`` that computes the right
answer (on the CPU, in the input's dtype or wider)::

    import mpsfuzz

    @mpsfuzz.kernel(reference=softmax_reference,
                    inputs=[mpsfuzz.tensor(dtypes=["float32", "float16"], min_dims=1)])
    def my_softmax(x): ...

The decorator validates the declaration at once (a one-line ``ValueError`` naming the
bad ``name=value``) and registers an :class:`~mpsfuzz.generation.opspec.OpSpec` in the
``kernels`` family whose ``fn`` is the kernel and whose ``reference_fn`` is the
reference: the target side calls the kernel, the CPU reference side (and the float64
arbiter) calls the reference. Everything else (awkward layouts, empty and >4-D inputs,
special values, every oracle, triage) is what any op gets.

``mpsfuzz run --kernels FILE`` imports the file (:func:`load_file`) and names it in the
campaign's GenerationSettings (``kernel_files``: generation/settings.py), which every
process the campaign starts is handed and installs; the catalogue imports the installed
files on every look-up (:func:`load_installed`): workers, drafters and repro checks,
started from other processes, import the same files.
"""
from __future__ import annotations

import hashlib
import importlib.util
import inspect
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from hypothesis import strategies as st

from . import dtypes as dt
from .opspec import REGISTRY, OpSpec, ShapeBudget, draw_rank, draw_side, fit, integers_once, sampled_once
from .settings import installed as installed_settings

FAMILY = "kernels"
# Sides a kernel input may declare at most: beyond this a case no longer fits the
# campaign's per-case element budget anyway.
MAX_SIDE = 1 << 16
MAX_DIMS = 8


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass(frozen=True)
class TensorDecl:
    """What a kernel accepts for one tensor argument (made by :func:`tensor`)."""

    dtypes: tuple[str, ...]
    min_dims: int = 0
    max_dims: int = MAX_DIMS
    min_side: int = 0
    max_side: int | None = None
    multiple_of: tuple[int, int] | None = None
    contiguous: bool = False
    low: float | None = None
    high: float | None = None
    allow_specials: bool = True
    allow_nonfinite: bool = True
    like: int | None = None
    large: bool = False


def tensor(*, dtypes=("float32",), min_dims: int = 0, max_dims: int = MAX_DIMS, min_side: int = 0,
           max_side: int | None = None, multiple_of: tuple[int, int] | None = None,
           contiguous: bool = False, low: float | None = None, high: float | None = None,
           allow_specials: bool = True, allow_nonfinite: bool = True, like: int | None = None,
           large: bool = False) -> TensorDecl:
    """One tensor argument of a kernel.

    ``dtypes``: names or groups ("float"); ``min_dims``/``max_dims``: the rank range;
    ``min_side``/``max_side``: every side's range (``max_side`` default: the campaign's
    ``--max-side``); ``multiple_of=(dim, k)``: side ``dim`` is a multiple of ``k`` (the
    dim must exist at every allowed rank); ``contiguous``: the kernel documents that it
    requires contiguous inputs, so only those are drawn (a separate check says whether
    it rejects others); ``low``/``high``: the values' range (special values ignore it:
    ``allow_specials=False`` turns them off, ``allow_nonfinite=False`` only nan/inf);
    ``like=i``: the same shape as tensor argument ``i`` (an earlier one); ``large``: the
    kernel takes inputs past 2^31 elements, so with ``--large`` some cases draw this
    input at the large family's sizes (a batch of 65,536+ rows; within ``--max-bytes``,
    2^31 - 1 to 2^32 + 1 elements as a stride-0 view of one element: the reference then
    runs on that view, so it must not copy it densely)."""
    _check(not isinstance(dtypes, str) and len(dtypes) > 0, f"dtypes={dtypes!r} must be a non-empty list of dtype names")
    try:
        names = dt.expand_groups(dtypes)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"dtypes={dtypes!r}: {exc}") from None
    for name, value in (("min_dims", min_dims), ("max_dims", max_dims), ("min_side", min_side)):
        _check(_is_int(value) and value >= 0, f"{name}={value!r} must be an integer >= 0")
    _check(min_dims <= max_dims <= MAX_DIMS,
           f"min_dims={min_dims!r} and max_dims={max_dims!r} must satisfy min_dims <= max_dims <= {MAX_DIMS}")
    if max_side is not None:
        _check(_is_int(max_side) and max(1, min_side) <= max_side <= MAX_SIDE,
               f"max_side={max_side!r} must be an integer in [max(1, min_side={min_side!r}), {MAX_SIDE}]")
    if multiple_of is not None:
        _check(isinstance(multiple_of, tuple) and len(multiple_of) == 2 and all(_is_int(v) for v in multiple_of)
               and multiple_of[1] >= 1,
               f"multiple_of={multiple_of!r} must be a (dim, k) pair of integers with k >= 1")
        dim = multiple_of[0]
        _check(-min_dims <= dim < min_dims,
               f"multiple_of={multiple_of!r}: dim {dim} does not exist at every rank from min_dims={min_dims!r}")
    _check(isinstance(contiguous, bool), f"contiguous={contiguous!r} must be True or False")
    _check(isinstance(allow_specials, bool), f"allow_specials={allow_specials!r} must be True or False")
    _check(isinstance(allow_nonfinite, bool), f"allow_nonfinite={allow_nonfinite!r} must be True or False")
    for name, value in (("low", low), ("high", high)):
        _check(value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                                 and math.isfinite(value)), f"{name}={value!r} must be a finite number or None")
    if low is not None and high is not None:
        _check(low <= high, f"low={low!r} and high={high!r} must satisfy low <= high")
    _check(like is None or (_is_int(like) and like >= 0), f"like={like!r} must be the index of an earlier tensor")
    _check(isinstance(large, bool), f"large={large!r} must be True or False")
    _check(not (large and contiguous),
           "large=True with contiguous=True: inputs past 2^31 elements are stride-0 views (a few bytes of "
           "memory), which a kernel that requires contiguous inputs never gets")
    _check(not (large and like is not None), "large=True with like=: the shape comes from the earlier tensor")
    _check(not large or max_dims >= 1, f"large=True with max_dims={max_dims!r}: a large input has dims")
    return TensorDecl(dtypes=names, min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side,
                      multiple_of=multiple_of, contiguous=contiguous, low=low, high=high,
                      allow_specials=allow_specials, allow_nonfinite=allow_nonfinite, like=like, large=large)


# -- what a declaration draws --------------------------------------------------------------

def _side_ok(side: int, k: int) -> int:
    """``side`` rounded down to a multiple of ``k`` (0 stays 0, others at least ``k``)."""
    return 0 if side == 0 else max(k, side - side % k)


def _shapes(decls: tuple[TensorDecl, ...]):
    """The kernel's ShapeBuilder: each input's rank and sides from its declaration."""
    def build(draw, budget: ShapeBudget):
        out: list[tuple[int, ...]] = []
        for decl in decls:
            if decl.like is not None:
                out.append(out[decl.like])
                continue
            if decl.large and large_sizes_enabled() and draw(integers_once(0, 3)) == 0:
                out.append(_large_shape(draw, budget, decl))
                continue
            own = ShapeBudget(min_rank=budget.min_rank, max_rank=budget.max_rank,
                              max_side=decl.max_side or budget.max_side, allow_empty=budget.allow_empty,
                              max_numel=budget.max_numel)
            # The declared rank wins over the campaign's limits (a kernel of 2-D inputs
            # takes nothing else).
            rank = draw_rank(draw, own, decl.min_dims, decl.max_dims)
            rank = min(max(rank, decl.min_dims), decl.max_dims)
            shape = [draw_side(draw, own, min_side=decl.min_side) for _ in range(rank)]
            shape = list(fit(shape, own))
            shape = [max(s, decl.min_side) for s in shape]
            if decl.multiple_of is not None:
                dim, k = decl.multiple_of
                shape[dim] = _side_ok(shape[dim], k) if shape[dim] >= decl.min_side else k
            out.append(tuple(shape))
        return tuple(out)
    return build


def large_sizes_enabled() -> bool:
    """``--large`` was given (GenerationSettings.large_inputs, installed in every process)."""
    return installed_settings().large_inputs


def _large_shape(draw, budget: ShapeBudget, decl: TensorDecl) -> tuple[int, ...]:
    """One of the large family's shapes, fitted to the declared rank range (leading 1s
    added, leading dims merged)."""
    from .ops.large import large_shapes
    shape = list(large_shapes(draw, budget)[0])
    while len(shape) > max(1, decl.max_dims):
        shape[:2] = [shape[0] * shape[1]]
    shape = [1] * (decl.min_dims - len(shape)) + shape
    if decl.multiple_of is not None:
        dim, k = decl.multiple_of
        shape[dim] = _side_ok(shape[dim], k)
    return tuple(shape)


def _values(decl: TensorDecl):
    """The input's ValueBuilder: its range (a uniform distribution between ``low`` and
    ``high``; integer dtypes take the range as is) and whether specials are drawn."""
    def build(shapes, kwargs):
        out: dict[str, Any] = {}
        if decl.low is not None or decl.high is not None:
            low = decl.low if decl.low is not None else decl.high - 8
            high = decl.high if decl.high is not None else decl.low + 8
            out.update(distribution="uniform", low=low, high=high)
        if not decl.allow_specials:
            out["allow_specials"] = False
        if not decl.allow_nonfinite:
            out["allow_nonfinite"] = False
        return out
    return build


def _arg_strategy(name: str, value) -> st.SearchStrategy:
    if isinstance(value, st.SearchStrategy):
        return value
    _check(isinstance(value, (list, tuple)) and len(value) > 0,
           f"args={{{name!r}: {value!r}}}: each argument takes a non-empty list of values or a Hypothesis strategy")
    return sampled_once(tuple(value))


def _args(args: dict):
    strategies = {name: _arg_strategy(name, value) for name, value in args.items()}

    def build(draw, shapes, dtypes):
        return {name: draw(strategy) for name, strategy in strategies.items()}
    return build


def _outside(decls: tuple[TensorDecl, ...]):
    """The kernel's ``admits``: why a case lies outside its declarations (None: inside).
    Triage edits cases (drops dims, halves sides, changes dtypes): a kernel documents
    what it takes, so an edit past that is not a smaller case of the bug but a call the
    kernel never promised to handle."""
    def outside(case) -> str | None:
        tensors = case.inputs
        for i, decl in enumerate(decls[:len(tensors)]):
            r = tensors[i]
            if not decl.min_dims <= r.rank <= decl.max_dims:
                return f"input {i} has {r.rank} dims (declared {decl.min_dims}..{decl.max_dims})"
            if any(n < decl.min_side and n != 0 for n in r.shape) or \
                    (decl.max_side is not None and any(n > decl.max_side for n in r.shape)):
                return f"input {i} has a side outside the declared range"
            if decl.multiple_of is not None and r.shape[decl.multiple_of[0]] % decl.multiple_of[1]:
                return f"input {i}'s dim {decl.multiple_of[0]} is not a multiple of {decl.multiple_of[1]}"
            if decl.contiguous and not r.layout.is_plain():
                return f"input {i} is not contiguous (the kernel requires it)"
            if r.dtype not in decl.dtypes:
                return f"input {i} is {r.dtype} (declared {', '.join(decl.dtypes)})"
            if decl.like is not None and r.shape != tensors[decl.like].shape:
                return f"input {i} is not shaped like input {decl.like}"
            if not decl.allow_specials and r.values.specials:
                return f"input {i} holds special values (not allowed)"
        return None
    return outside


# -- the decorator ---------------------------------------------------------------------------

def _source_file(fn) -> str | None:
    """The file that defines ``fn`` (None for a callable without Python source)."""
    try:
        found = inspect.getsourcefile(fn)
    except TypeError:
        return None
    return os.path.realpath(found) if found else None


def spec_of(fn: Callable, *, reference: Callable, inputs, args: dict | None = None, name: str | None = None,
            rtol_scale: float = 1.0, atol_scale: float = 1.0, accumulates: bool = False, doc: str = "") -> OpSpec:
    """The OpSpec of a kernel (validated; not registered)."""
    _check(callable(reference), f"reference={reference!r} must be a callable (the right answer, run on the CPU)")
    _check(isinstance(inputs, (list, tuple)) and len(inputs) > 0,
           f"inputs={inputs!r} must be a non-empty list of mpsfuzz.tensor(...) declarations")
    for i, decl in enumerate(inputs):
        _check(isinstance(decl, TensorDecl), f"inputs[{i}]={decl!r} must be an mpsfuzz.tensor(...) declaration")
        _check(decl.like is None or decl.like < i, f"inputs[{i}]: like={decl.like!r} must name an earlier tensor")
    args = {} if args is None else args
    _check(isinstance(args, dict) and all(isinstance(k, str) and k.isidentifier() for k in args),
           f"args={args!r} must be a dict from argument names to lists of values or strategies")
    name = name if name is not None else getattr(fn, "__name__", None)
    _check(isinstance(name, str) and bool(name) and "," not in name and ":" not in name,
           f"name={name!r} must be a non-empty op name without ',' or ':'")
    for what, value in (("rtol_scale", rtol_scale), ("atol_scale", atol_scale)):
        _check(isinstance(value, (int, float)) and value > 0, f"{what}={value!r} must be a number > 0")
    decls = tuple(inputs)
    first = decls[0].dtypes
    # Inputs declared with the first one's dtypes share its drawn dtype (a kernel of two
    # float tensors gets two of one dtype); others draw their own.
    per_input = tuple(None if d.dtypes == first else d.dtypes for d in decls)
    return OpSpec(name=name, family=FAMILY, fn=fn, shapes=_shapes(decls), dtypes=first,
                  input_dtypes=per_input, input_values=tuple(_values(d) for d in decls),
                  args=_args(args) if args else None,
                  min_rank=min(d.min_dims for d in decls), max_rank=max(d.max_dims for d in decls),
                  rtol_scale=float(rtol_scale), atol_scale=float(atol_scale),
                  semantics=frozenset(({"accumulates"} if accumulates else set())
                                      | ({"large"} if any(d.large for d in decls) else set())),
                  doc=doc or (getattr(fn, "__doc__", None) or "").strip().split("\n")[0],
                  reference_fn=reference,
                  contiguous_inputs=tuple(i for i, d in enumerate(decls) if d.contiguous),
                  source_file=_source_file(fn), outside=_outside(decls))


def kernel(fn: Callable | None = None, *, reference: Callable, inputs, args: dict | None = None,
           name: str | None = None, rtol_scale: float = 1.0, atol_scale: float = 1.0,
           accumulates: bool = False, doc: str = ""):
    """Declare a kernel for mpsfuzz (a decorator; returns the kernel unchanged).

    ``reference``: the right answer, called like the kernel on CPU tensors (also on
    float64 copies, by the arbiter): compute in the input's dtype or wider and cast the
    result to the kernel's output dtype. ``inputs``: one :func:`tensor` per tensor
    argument, in order; ``args``: extra keyword arguments, name -> a list of values (or
    a Hypothesis strategy). ``name``: the op name for ``--ops`` (default: the function's
    name). ``rtol_scale``/``atol_scale``: multiply the dtype's tolerance.
    ``accumulates=True`` excuses what summing in half precision may cost (leave it off
    when the kernel should accumulate in float32, so that one which does not is found)."""
    def register_it(f):
        spec = spec_of(f, reference=reference, inputs=inputs, args=args, name=name, rtol_scale=rtol_scale,
                       atol_scale=atol_scale, accumulates=accumulates, doc=doc)
        _register(spec)
        return f
    return register_it if fn is None else register_it(fn)


def _register(spec: OpSpec) -> None:
    from . import catalogue
    catalogue.all_ops()   # the built-in ops first: a kernel must not take one of their names
    old = REGISTRY.get(spec.name)
    if old is not None and not (old.family == FAMILY and old.source_file == spec.source_file):
        where = "a built-in op" if old.family != FAMILY else f"the kernel in {old.source_file}"
        raise ValueError(f"name={spec.name!r} is taken by {where}; pass name= to mpsfuzz.kernel")
    # The same file imported twice (as a module and by --kernels): the newer one stands.
    REGISTRY[spec.name] = spec


# -- kernel files --------------------------------------------------------------------------------

class KernelFileError(ValueError):
    """A ``--kernels`` file that cannot be used (missing, fails to import, declares no kernel)."""


_LOADED: dict[str, tuple[str, ...]] = {}   # real path -> the kernels it declared
_FILES_SEEN: tuple[str, ...] | None = None   # the installed kernel_files last imported
# Set in the worker zygote (execution/preload.py), cleared in each worker forked from it: a
# user's file may touch the device when imported (``torch.cuda.is_available()``, ``import
# triton``), and a device context never survives a fork (CUDA refuses to initialise again in
# the child: every case of every worker would fail). So the zygote imports none; each
# worker imports them after the fork.
_DEFERRED = False


def load_file(path: str | os.PathLike) -> tuple[str, ...]:
    """Import a kernel file (once per process) and return the names of its kernels."""
    real = os.path.realpath(path)
    if real in _LOADED:
        return _LOADED[real]
    if not os.path.isfile(real):
        raise KernelFileError(f"--kernels {os.fspath(path)!r}: no such file")
    before = {n: s for n, s in REGISTRY.items() if s.family == FAMILY}
    module_name = "mpsfuzz_kernels_" + "".join(c if c.isalnum() else "_" for c in Path(real).stem) \
        + "_" + hashlib.sha1(real.encode()).hexdigest()[:8]
    module_spec = importlib.util.spec_from_file_location(module_name, real)
    if module_spec is None or module_spec.loader is None:
        raise KernelFileError(f"--kernels {os.fspath(path)!r}: not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    # Its own folder is importable, as for `python FILE`: a kernel file may import its siblings.
    folder = os.path.dirname(real)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    sys.modules[module_name] = module
    _LOADED[real] = ()
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:  # the user's file: any failure is theirs, in one line
        del _LOADED[real]
        sys.modules.pop(module_name, None)
        first = (str(exc).strip().splitlines() or [""])[0]
        raise KernelFileError(f"--kernels {os.fspath(path)!r}: importing it failed: "
                              f"{type(exc).__name__}: {first}") from None
    names = tuple(n for n, s in REGISTRY.items() if s.family == FAMILY and before.get(n) is not s)
    if not names:
        raise KernelFileError(f"--kernels {os.fspath(path)!r}: declares no kernel (decorate one with "
                              "@mpsfuzz.kernel(reference=..., inputs=[...]))")
    _LOADED[real] = names
    return names


def defer_loading() -> None:
    """This process forks workers (the forkserver zygote): :func:`load_installed` imports
    no kernel file here until :func:`resume_loading` (in each forked worker)."""
    global _DEFERRED
    _DEFERRED = True


def resume_loading() -> None:
    """After the fork: the next look-up imports the installed settings' kernel files."""
    global _DEFERRED
    _DEFERRED = False


def load_installed() -> None:
    """Import the kernel files the installed GenerationSettings name (once each), in any
    process but one that defers them (:func:`defer_loading`)."""
    global _FILES_SEEN
    if _DEFERRED:
        return
    files = installed_settings().kernel_files
    if files is _FILES_SEEN or files == _FILES_SEEN:
        return
    _FILES_SEEN = files
    for path in files:
        load_file(path)


def kernel_files() -> dict[str, tuple[str, ...]]:
    """The kernel files imported in this process, with their kernels."""
    return dict(_LOADED)
