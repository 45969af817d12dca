"""What an op spec is: the :class:`OpSpec` record, its shape and argument builders, the registry.

An :class:`OpSpec` says how to call the op (``fn(*tensors, **kwargs)``), which dtypes and
shapes it accepts (so that most generated cases are valid), which values make sense, and
the semantics an oracle needs (e.g. indices of ties are unspecified). The family modules
in :mod:`mpsfuzz.generation.ops` and :mod:`mpsfuzz.generation.opinfo` build specs from
this module and :func:`register` them; :mod:`mpsfuzz.generation.catalogue` loads those
modules and looks ops up (nothing else knows op names).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import torch
from hypothesis import strategies as st

from . import dtypes as dt
from .preparation import preparation

# Drawing one case builds a dozen small strategies (``st.integers(0, 19)`` per tensor,
# a ``sampled_from`` per choice), and Hypothesis' own strategy cache costs more than the
# draw itself. These keep one strategy per argument tuple: the same strategies, so a
# seed draws what it drew before.
@functools.lru_cache(maxsize=4096, typed=True)
def integers_once(low: int, high: int) -> st.SearchStrategy[int]:
    return st.integers(low, high)


def option_kinds(options: tuple) -> tuple:
    """What tells ``options`` apart from equal tuples of other values, for a cache key:
    1, 1.0 and True are equal and hash alike, and so are 0.0 and -0.0. Keyed on the
    values alone, a cached ``(1.0, 2.0)`` (a norm's p) answered a later ``(1, 2)`` (an
    index) and a gru case drew a float index (a harness error, in a parallel test run)."""
    return tuple((float, repr(o)) if isinstance(o, float) else type(o) for o in options)


def sampled_once(options) -> st.SearchStrategy:
    """``st.sampled_from(options)``, made once per distinct ``options``."""
    options = tuple(options)
    return _sampled_once(options, option_kinds(options))


@functools.lru_cache(maxsize=4096)
def _sampled_once(options: tuple, _kinds: tuple) -> st.SearchStrategy:
    return st.sampled_from(options)


def unique_lists_once(options, *, min_size: int, max_size: int) -> st.SearchStrategy[list]:
    """``st.lists(st.sampled_from(options), unique=True, ...)``, made once per arguments."""
    options = tuple(options)
    return _unique_lists(options, option_kinds(options), min_size, max_size)


@functools.lru_cache(maxsize=4096)
def _unique_lists(options: tuple, _kinds: tuple, min_size: int, max_size: int) -> st.SearchStrategy[list]:
    return st.lists(st.sampled_from(options), min_size=min_size, max_size=max_size, unique=True)


# A shape builder draws the shapes of all tensor inputs at once, because constraints
# relate them (broadcasting, inner dims of a matmul, square matrices).
#   builder(draw, shape_budget) -> tuple of shapes, one per tensor input
ShapeBuilder = Callable[[Callable, "ShapeBudget"], tuple]
# An argument builder draws the non-tensor arguments once shapes and dtypes are known.
#   builder(draw, shapes, dtype_names) -> dict of keyword arguments
ArgBuilder = Callable[[Callable, tuple, tuple], dict]
# A canonicaliser turns outputs into what is compared, on each side with its own inputs,
# e.g. replacing argmax's indices by the values they point at (ties are unspecified).
#   canonicalise(inputs, outputs, **the call's arguments named in canonical_kwargs)
Canonicaliser = Callable[..., Any]
# An input's values, when they depend on the drawn shapes and arguments (indices into
# another input's dim, a class count...):
#   values(shapes, kwargs) -> dict(distribution=..., low=..., high=..., allow_specials=...)
ValueBuilder = Callable[[tuple, dict], dict]
# A statistical judge of an op's own (the dropouts; random ops declare a Distribution
# instead): sees the DUT's outputs (on the CPU), its inputs and arguments, and returns a
# one-line problem description or None. Never compares values with the CPU's (different
# generators).
StatisticalJudge = Callable[[Any, list, dict], "str | None"]
# Where the gradient is not defined (a kink, a tie, a repeated eigen- or singular value):
# sees the case's inputs (CPU tensors in the case's dtypes and layouts), its keyword
# arguments and the relative tolerance gradients are compared with, and returns a
# one-line reason, or None where the gradient is defined. The grad variant gets no
# gradient verdict where it says so. Builders (ties, kinks, equal_operands,
# repeated_spectrum, any_of ...): :mod:`mpsfuzz.generation.grad_points`.
GradUndefined = Callable[[list, dict, float], "str | None"]

# Semantics an op may declare (``OpSpec.semantics``):
#   mixed_dtypes_sometimes  inputs after the first may take another dtype of the op's set
#   dtype-pairs             each free input draws its dtype on its own from the op's set,
#                           every case (the cast family: a copy_'s destination and source
#                           of any two dtypes, pytorch#160744); its result converts an
#                           input (``OpSpec.converts``)
#   promotes                its tensor inputs may be of any dtypes of the op's set, the
#                           result of torch.result_type's (type promotion): a boundary
#                           sibling mixes them (every binary and ternary elementwise op)
#   ties_unspecified        which of equal elements an index output names is unspecified
#                           (declared with a canonicaliser that compares what it points at)
#   undefined-values        output values are unspecified (``empty``-like): only metadata
#                           is compared, never values
#   random                  values come from an RNG: judged by ``statistical``, never
#                           against CPU values or across variants
#   order-dependent         the result legitimately depends on the order of accumulation
#                           (atomics, index_put accumulate): the layout and variants
#                           oracles use the CPU tolerance instead of near-exactness
#   accumulates             each output element sums or multiplies several input terms
#                           (reductions, matrix products, convolutions, pooling,
#                           normalisation): the arbiter holds half-precision results to a
#                           bound that grows with the number of terms, and terms whose
#                           magnitudes exceed the dtype make overflow of intermediates
#                           possible (oracles/accuracy.py)
#   structure-unknown       how many terms feed an output element is not known (OpInfo
#                           entries that are not reductions: matmul, conv, softmax, cumsum
#                           and sin alike): half-precision results get the accumulation
#                           bound for the estimated number of terms, scaled by the result's
#                           own magnitude (the op on |inputs| means nothing for sin)
#   determined-as-a-whole   an output is determined only as a whole (the factors of a
#                           decomposition, as OpInfo's LAPACK-backed ops return them: no
#                           canonical form): where float64 leaves any element of it
#                           undetermined (a rank-deficient input), none gets a verdict
#   zero-taps               a windowed op over implicit zeros (convolutions: zero padding,
#                           and the holes of stride and dilation in transposed ones; linear
#                           and cubic interpolation: taps of weight exactly 0):
#                           whether a backend multiplies those zeros by a non-finite value
#                           (IEEE: NaN) or skips them (cuDNN, MPSGraph) is its choice, so
#                           where an input holds nan/inf (under autocast: once rounded), a
#                           result that is non-finite on CPU and finite on the device, or
#                           NaN on CPU and an infinity on the device, is not compared (a NaN
#                           or an infinity the device invents is)
#   computed-weights        each output is a weighted sum of inputs whose weights the op
#                           computes (interpolation's filters, grid_sample's bilinear
#                           taps): a weight is known to a few roundoffs of its working
#                           precision (float32 for half inputs), and a tap whose exact
#                           weight is 0 may carry one. Where the inputs hold the dtype's
#                           extremes, an output is then known only to within about
#                           64 roundoffs of the largest input (issue 37, H200: CUDA's
#                           antialiased bicubic 2.8e22 off beside 1e28 and trilinear one
#                           float64 roundoff of its max off, against CPU's exact -2)
#   shifted-argument        the op evaluates its function at 2x - 1 of its first input x
#                           (the shifted Chebyshev polynomials on [0, 1]): a backend rounds
#                           2x - 1 to the grid of 1, however small x is, so the arbiter's
#                           conditioning check moves x by a roundoff of max(|x|, 1), not of
#                           x (at x = 0.03 the result amplifies that rounding 47 times)
#   slices-as-inputs        the op passes the slices of an input as separate tensors
#                           (cat_many: 65,537 of them in its large class): the jurors that
#                           trace its decomposition abstain (a traced node per slice takes
#                           minutes), numpy's reference judges it
#   structural-later-sizes  the sizes its later inputs alone have are structure its API
#                           keeps positive (a recurrent cell's hidden size: nn.LSTM refuses
#                           hidden_size=0; cuDNN answers BAD_PARAM where CPU's functional
#                           op returns): no `empty-other` boundary zeroes them
#   undefined-when-empty    eager CPU's value over an empty batch is uninitialised memory
#                           (multi_margin_loss and multilabel_margin_loss, mean and sum,
#                           torch 2.13) while an empty class dim is refused: the reference
#                           means nothing on any `empty` boundary, so none is drawn (the
#                           builders keep the batch non-empty for the same reason)
#   tensor-list             the op takes a list of as many tensors as its shape builder
#                           draws (1 to 5: the foreach ops, pytorch#169930), all in the
#                           drawn dtype: it has no fixed arity
#   window-sizes-output     its window's stride and dilation grow its output (transposed
#                           convolutions: L_out = (L - 1) * stride + dilation * (k - 1)
#                           + ...): they size an output and take no argument extremes (a
#                           stride of 2^31 - 1 asks the host for billions of elements)
SEMANTICS = ("mixed_dtypes_sometimes", "promotes", "dtype-pairs", "structural-later-sizes", "undefined-when-empty", "window-sizes-output", "ties_unspecified", "undefined-values", "random", "order-dependent",
             "accumulates", "structure-unknown", "determined-as-a-whole", "large", "zero-taps",
             "shifted-argument", "computed-weights", "slices-as-inputs", "tensor-list")

# The ``large`` family's inputs of more elements than this are drawn as stride-0 views
# of one element (constant tensors of billions of elements that take a few bytes);
# smaller ones are real allocations (a batch of 65,536 rows of a few elements).
LARGE_REAL_NUMEL = 1 << 20

# How an op can be called besides ``fn(*tensors, **kwargs)``; a Case names one of these.
# ``out-alias`` passes input 0 itself as ``out=`` (where the result has its shape and
# dtype): full aliasing of out and an input, which torch defines for ops that also work
# in place (so only those have it). ``autocast`` calls the functional form of float32
# inputs (some later ones already float16, as a model under autocast hands them on)
# inside ``torch.autocast`` for the device: judged against the float32 result cast to
# the dtypes the device's autocast chose (the release notes' autocast rules and dtype
# mismatches of conv3d, ConvTranspose3d and attention).
# ``out-cast`` writes into an ``out=`` of another dtype (dtypes.OUT_CASTS, by the main
# input's dtype): the result is computed in its own dtype and cast (issue 38).
# ``out-alias-N`` passes input N (> 0) itself as ``out=``, for an op that declares its
# result has that input's shape and dtype (``OpSpec.out_aliases``; pytorch#178379's
# ``solve_triangular(A, B, out=B)``): not in VARIANTS, one name per input.
VARIANTS = ("functional", "method", "inplace", "out", "out-strided", "out-resized", "out-alias", "grad", "autocast",
            "out-cast")
OUT_ALIAS = "out-alias"


def mixes_dtypes(spec) -> bool:
    """Whether ``spec`` takes inputs of several dtypes of its set (drawn sometimes, or as
    a boundary sibling): declared ``mixed_dtypes_sometimes`` or ``promotes``, with more
    than one dtype to mix. ``promotes`` speaks of the op at its ordinary sizes: its
    ``@large``/``@huge`` forms, judged on rows of one dtype's references, do not mix."""
    declared = ("mixed_dtypes_sometimes" in spec.semantics or "dtype-pairs" in spec.semantics
                or "promotes" in spec.semantics and not getattr(spec, "size_class", ""))
    return declared and len(spec.dtypes) > 1


def aliased_out_input(variant: str) -> int | None:
    """The input that ``variant`` passes as ``out=`` itself: 0 for ``out-alias``, N for
    ``out-alias-N``; None for every other variant."""
    if variant == OUT_ALIAS:
        return 0
    if variant.startswith(OUT_ALIAS + "-") and variant[len(OUT_ALIAS) + 1:].isdigit():
        return int(variant[len(OUT_ALIAS) + 1:])
    return None


def written_input(variant: str) -> int | None:
    """The input a call of ``variant`` writes as its result: self in place, the input
    passed as ``out=`` itself (one definition for the strategies that keep such an input
    writable and the oracles that read what the call wrote into it)."""
    return 0 if variant == "inplace" else aliased_out_input(variant)

# What an out= of another dtype means, by family (OpSpec.out_cast): "cast", the result is
# computed in its own dtype and cast into out= (TensorIterator's ops: pytorch#173110's
# maximum computing in the out= dtype is a bug); "computes", out='s dtype is the dtype
# the op computes in (a reduction's or scan's `dtype=`, a factory's result dtype: cumsum
# into float16 accumulates in float16 by design; cat and stack cast each input into out=
# directly, so an int32 past float16's range lands in a bfloat16 out= where the promoted
# float16 result is inf, on CPU and CUDA alike). Families not named refuse another
# dtype (linalg: "Expected out tensor to have dtype float"), or (random) whose oracle
# judges the draws of the functional dtype: no out-cast cases.
OUT_CAST_BY_FAMILY = {"elementwise": "cast", "indexing": "computes", "reduction": "computes", "factory": "computes"}
GRAD_DTYPES = dt.GRAD


@dataclass(frozen=True)
class Distribution:
    """What a random op's output should follow, declared with its spec. ``kind`` names a
    law the distribution oracle knows (oracles/distribution.py owns the table from kind
    to its checks: uniform on [0, 1), uniform integers, a permutation, normal with
    per-element parameters, an in-place sampler's law...); the law's parameters are the
    case's keyword arguments and inputs. ``options``: the op's own, as sorted (name,
    value) pairs (``like``: shaped like input 0 instead of by a ``size`` argument)."""

    kind: str
    options: tuple[tuple[str, Any], ...] = ()

    def option(self, name: str, default: Any = None) -> Any:
        return dict(self.options).get(name, default)


@dataclass(frozen=True)
class ShapeBudget:
    """Limits a shape builder must respect (set from the strategy's arguments)."""

    min_rank: int = 0
    max_rank: int = 8
    max_side: int = 8
    allow_empty: bool = True
    max_numel: int = 4096


@dataclass(frozen=True)
class OpSpec:
    name: str
    family: str
    fn: Callable
    shapes: ShapeBuilder
    dtypes: tuple[str, ...]
    # Per tensor input: a dtype tuple that overrides ``dtypes`` (e.g. where's bool
    # condition), or None to share the op's drawn dtype.
    input_dtypes: tuple[tuple[str, ...] | None, ...] = ()
    # Per tensor input: a value distribution that overrides the drawn one, a
    # ValueBuilder (e.g. indices in range of another input's dim), or None.
    input_values: tuple[str | ValueBuilder | None, ...] = ()
    args: ArgBuilder | None = None
    allow_nonfinite: bool = True
    allow_specials: bool = True
    min_rank: int = 0
    max_rank: int = 8
    canonicalise: Canonicaliser | None = None
    # Keyword arguments of the call that ``canonicalise`` receives too, by name: the dim
    # topk and argsort index along, which their outputs' shapes do not tell (k equal to
    # the dim's size, equal sizes of two dims), and which, inferred, could differ between
    # the two sides of one case. An argument the call leaves out is not passed: the
    # canonicaliser's own default is the op's. Call it through :meth:`canonical`.
    canonical_kwargs: tuple[str, ...] = ()
    # Outputs from this index on are each backend's own (an internal op's statistics saved
    # for its backward: float32 mean/rstd for float16 input on CUDA): their metadata is not
    # compared (their values are left out by the canonicaliser).
    private_outputs_from: int | None = None
    # Output leaves that must hold a NaN wherever a batch element of the first input (a
    # matrix) holds one (a determinant, an inverse, a solution: every element depends on
    # every entry). Such an op draws a NaN entry as a boundary sibling, and where a matrix
    # holds one its leaves are compared only by whether they hold a NaN
    # (:mod:`.nan_propagation`; issue 38, pytorch/pytorch#173638).
    nan_propagates: tuple[int, ...] = ()
    # Tolerance multipliers over the dtype table, for ops whose result legitimately
    # depends on evaluation order (long reductions, factorizations).
    rtol_scale: float = 1.0
    atol_scale: float = 1.0
    semantics: frozenset[str] = field(default_factory=frozenset)
    doc: str = ""
    # Other ways to call it. ``method``: ``getattr(inputs[0], method)(*inputs[1:], **kw)``;
    # ``inplace``: the in-place method (result: inputs[0] after the call); ``out``: ``fn``
    # accepts ``out=`` (a tuple for several outputs); ``grad``: differentiable in the
    # inputs listed by ``grad_inputs`` (None: every floating input).
    method: str | None = None
    inplace: str | None = None
    out: bool = False
    # Later inputs whose shape and dtype the result has, so that ``out=`` may be that
    # input itself (``linalg.solve_triangular(A, B, out=B)``, pytorch#178379): each gives
    # the ``out-alias-N`` variant (``out-alias`` is input 0, for ops that work in place).
    out_aliases: tuple[int, ...] = ()
    grad: bool = False
    # Ops that torch.autocast lowers to half precision (convolutions, matmuls, linear,
    # attention): they get the ``autocast`` variant.
    autocast: bool = False
    grad_inputs: tuple[int, ...] | None = None
    # Floating inputs whose values the op reads as integers or labels (a polynomial's
    # degree, a +-1 target): the arbiter's conditioning check does not move them by a
    # roundoff (8.0 would truncate to 7, 1.0 would be no target at all).
    discrete_inputs: tuple[int, ...] = ()
    # The magnitudes of each gradient element's terms, for an op whose backward on its
    # inputs' absolute values measures nothing (not linear in its inputs: attention's
    # softmax saturates there, and its gradient's terms cancel exactly): (inputs in
    # float64, kwargs, upstream gradient) -> per differentiated input, the sum of the
    # magnitudes of the terms each element's backward adds up (the float64 arbiter's
    # accumulation bound).
    grad_terms: Callable | None = None
    # The intermediates of the documented formula in each order a backend may evaluate
    # it: (inputs in float64, kwargs) -> tensors (x + value*a/b: a/b and value*a). One
    # past the dtype's range excuses a non-finite result (the float64 arbiter's
    # intermediate-overflow rule): which order overflows is the backend's choice.
    evaluation_steps: Callable | None = None
    # The op's textbook algebraic form, called like ``fn``, where torch has no
    # decomposition of its kernel and the kernel rounds intermediates of its own: the
    # first-order rounding bound (oracles/jury/rounding_bound.py) is measured on it
    # (complex pow: exp(w log z), whose rounding of w log z costs |w log z| roundoffs).
    rounding_form: Callable | None = None
    # The input whose values the result holds converted to the result's dtype (and
    # broadcast to its shape): ``copy_``'s source, ``to``'s input (the cast family). The
    # values and layout oracles give no verdict on an element whose conversion C++
    # leaves undefined (a float or complex value whose truncation an integer dtype cannot
    # hold, NaN or inf into an integer: oracles/conversions.py; pytorch#160744).
    converts: int | None = None
    # Non-smooth ops: where their gradient is undefined (see GradUndefined).
    grad_undefined: GradUndefined | None = None
    # Random ops: judged by what their output should follow (the distribution oracle)
    # instead of against CPU values; or by a judge of their own (``statistical``).
    distribution: Distribution | None = None
    statistical: StatisticalJudge | None = None
    # Inputs that the functional form itself writes (batch_norm's running statistics,
    # in-place-only ops): the variants oracle does not require them unchanged.
    mutates: tuple[int, ...] = ()
    # A smaller call that computes the same result, for when eager CPU rejects the call
    # itself (a limit of its library, e.g. an FFT over more dims than it plans): run on
    # CPU, it tells whether a device that accepts the call returns the right result.
    #   equivalent(inputs, kwargs) -> outputs
    equivalent: Callable[[list, dict], Any] | None = None
    # Users' kernels (generation/kernels.py): the right answer, called like ``fn`` on the
    # CPU reference side and by the float64 arbiter, where ``fn`` (the kernel) runs on the
    # target only. None: ``fn`` is its own reference (eager CPU), as for every torch op.
    reference_fn: Callable | None = None
    # Inputs drawn only with a contiguous layout (a kernel that documents that it
    # requires them).
    contiguous_inputs: tuple[int, ...] = ()
    # Layouts the op draws itself for some of its inputs, over the generic draw:
    # ``(choose, shapes, kwargs) -> {input index: Layout}`` (``choose``: the dressing's
    # choices, integer() and choice()). flex_attention@huge stores K and V sequence-major
    # in a share of its cases (pytorch#190857's [KV_LEN, B, D] storage, whose stride along
    # the keys passes 2^31 at the last key), a permutation the generic draw gives once in
    # dozens of cases.
    input_layouts: Callable | None = None
    # The file that defines a user's kernel (repro scripts import it from there).
    source_file: str | None = None
    # The CPU reference's inputs where they are not the case's own: ``(case) -> list`` of
    # CPU tensors. The large family's row-wise ops compare a few blocks of rows of a
    # result of billions of elements, and the reference builds only those rows of the
    # input (generation/ops/large_rows.py).
    reference_inputs: Callable | None = None
    # The part of each gradient the grad variant compares, where not all of it: ``(case,
    # inputs the side ran on, gradients, their input indices) -> gradients``, called on
    # each side where the gradients are made, before they are copied to the host. The
    # @huge class cuts a gradient of billions of elements to the rows its reference
    # builds (generation/large_sizes.py).
    judged_grads: Callable | None = None
    # Why a case lies outside what the op declares it takes, or None: ``(case) -> str |
    # None``. A user's kernel documents its inputs (generation/kernels.py); triage's
    # edits past that are not valid inputs.
    outside: Callable | None = None
    # Dims that may grow past 65,536 (generation/large_sizes.Grows): the op joins the
    # large size class, as ``<name>@large``, by declaring them.
    grows: tuple = ()
    # "large" for that class's variants, whose ``base`` names the op they were made from
    # (references and jurors keyed by op name look the base up).
    size_class: str = ""
    base: str = ""

    def __post_init__(self):
        unknown = set(self.semantics) - set(SEMANTICS)
        if unknown:
            raise ValueError(f"op {self.name!r}: unknown semantics {sorted(unknown)}; known: {SEMANTICS}")

    @property
    def out_cast(self) -> str | None:
        """What an out= of another dtype means for this op (OUT_CAST_BY_FAMILY), None
        where the op refuses one."""
        return OUT_CAST_BY_FAMILY.get(self.family)

    def variants(self) -> tuple[str, ...]:
        """The variants this op has, functional first (where shrinking goes)."""
        out = ["functional"]
        if self.method:
            out.append("method")
        if self.inplace:
            out.append("inplace")
        if self.out:
            out += ["out", "out-strided", "out-resized"]
        if self.out and self.inplace:
            out.append("out-alias")
        if self.out:
            out += [f"{OUT_ALIAS}-{i}" for i in self.out_aliases if i > 0]
        if self.grad and any(d in GRAD_DTYPES for d in self.dtypes):
            out.append("grad")
        if self.autocast and "float32" in self.dtypes:
            out.append("autocast")
        if self.out and self.out_cast:
            out.append("out-cast")
        return tuple(out)

    def canonical(self, inputs: list, outputs, kwargs: dict):
        """The outputs' canonical form: ``canonicalise`` given the call's arguments that
        it declares it reads (``canonical_kwargs``); the outputs themselves without one."""
        if self.canonicalise is not None:
            outputs = self.canonicalise(inputs, outputs,
                                        **{k: kwargs[k] for k in self.canonical_kwargs if k in kwargs})
        if self.nan_propagates:
            from .nan_propagation import nan_presence
            outputs = nan_presence(inputs, outputs, self.nan_propagates)
        return outputs

    def as_reference(self) -> "OpSpec":
        """The spec the CPU reference side calls: ``fn`` replaced by ``reference_fn``
        where the op declares one (a user's kernel), else the spec itself."""
        if self.reference_fn is None:
            return self
        return replace(self, fn=self.reference_fn, reference_fn=None)

    @property
    def base_name(self) -> str:
        """The op this spec calls: itself, or the op a size-class variant was made from."""
        return self.base or self.name

    @property
    def arity(self) -> int:
        return len(self.input_dtypes) if self.input_dtypes else 1


# Every op spec by name: the op modules register theirs (catalogue.py loads them and looks
# them up; OpInfo specs are added on request).
REGISTRY: dict[str, OpSpec] = {}


def register(*specs: OpSpec) -> None:
    for spec in specs:
        if spec.name in REGISTRY:
            raise ValueError(f"op {spec.name!r} is registered twice")
        REGISTRY[spec.name] = spec


def declare_grows(table: dict) -> None:
    """An op table's dims that may grow past 65,536, ``{op: (Grows, ...)}``
    (generation/large_sizes.py): each op named joins the large size class."""
    for name, groups in table.items():
        if name not in REGISTRY:
            raise ValueError(f"declare_grows: op {name!r} is not registered")
        REGISTRY[name] = replace(REGISTRY[name], grows=tuple(groups))


# -- shape builders ---------------------------------------------------------------------
# Each returns a ShapeBuilder. They draw sizes with a bias towards the awkward: 0 and 1
# sides, ranks above 4 and 0-d tensors all appear in a few percent of cases.

def draw_side(draw, budget: ShapeBudget, *, min_side: int = 0) -> int:
    """One side: 0 in one draw of twenty (where allowed), else 1..max_side."""
    low = min_side if budget.allow_empty else max(1, min_side)
    if draw(integers_once(0, 19)) == 0 and low == 0:
        return 0
    return draw(integers_once(max(low, 1), max(budget.max_side, max(low, 1))))


def draw_rank(draw, budget: ShapeBudget, low: int, high: int) -> int:
    """A rank in [low, high] within the budget, ranks above 4 in one draw of ten."""
    low, high = max(low, budget.min_rank), min(high, budget.max_rank)
    if high <= low:
        return low
    # Ranks above 4 get their own share so >4-D bugs are not rare. The high bucket is
    # the last one so that shrinking (towards 0) prefers low ranks.
    if high > 4 and draw(integers_once(0, 9)) == 9:
        return draw(integers_once(max(5, low), high))
    return draw(integers_once(low, min(high, 4)))


def fit(shape: list[int], budget: ShapeBudget) -> tuple[int, ...]:
    """Shrink sides (largest first) until numel fits the budget."""
    while shape and prod(shape) > budget.max_numel:
        i = max(range(len(shape)), key=lambda k: shape[k])
        shape[i] = max(1, shape[i] // 2)
    return tuple(shape)


def prod(xs) -> int:
    """The product of ``xs`` (a shape's numel)."""
    out = 1
    for x in xs:
        out *= x
    return out


def any_shape(n_inputs: int = 1, *, min_rank: int = 0, max_rank: int = 8) -> ShapeBuilder:
    """One independent shape per input (for ops that take one tensor, or unrelated ones)."""
    def build(draw, budget: ShapeBudget):
        out = []
        for _ in range(n_inputs):
            rank = draw_rank(draw, budget, min_rank, max_rank)
            out.append(fit([draw_side(draw, budget) for _ in range(rank)], budget))
        return tuple(out)
    return build


def broadcast_shapes(n_inputs: int = 2, *, min_rank: int = 0, max_rank: int = 8) -> ShapeBuilder:
    """Shapes that broadcast together: each input takes a suffix of a common shape and
    may replace some sides by 1."""
    def build(draw, budget: ShapeBudget):
        rank = draw_rank(draw, budget, min_rank, max_rank)
        full = list(fit([draw_side(draw, budget) for _ in range(rank)], budget))
        out = []
        for _ in range(n_inputs):
            if draw(st.booleans()):
                out.append(tuple(full))
                continue
            own_rank = draw(integers_once(min(min_rank, rank), rank))
            shape = full[rank - own_rank:]
            shape = [1 if draw(integers_once(0, 3)) == 0 else s for s in shape]
            out.append(tuple(shape))
        if all(len(s) < rank for s in out):
            out[0] = tuple(full)
        return tuple(out)
    return build


def same_shapes(n_inputs: int = 2, *, min_rank: int = 0, max_rank: int = 8) -> ShapeBuilder:
    def build(draw, budget: ShapeBudget):
        (shape,) = any_shape(1, min_rank=min_rank, max_rank=max_rank)(draw, budget)
        return (shape,) * n_inputs
    return build


def matrix_shapes(*, square: bool = False, min_batch: int = 0, max_batch: int = 3,
                  min_side: int = 0) -> ShapeBuilder:
    """One (batch..., m, n) input; ``square`` forces m == n."""
    def build(draw, budget: ShapeBudget):
        most = max(min_batch, min(max_batch, budget.max_rank - 2))
        batch = [draw_side(draw, budget) for _ in range(draw(integers_once(min_batch, most)))]
        m = draw_side(draw, budget, min_side=min_side)
        n = m if square else draw_side(draw, budget, min_side=min_side)
        return (fit_keep_last(batch, [m, n], budget),)
    return build


def fit_keep_last(batch: list[int], last: list[int], budget: ShapeBudget) -> tuple[int, ...]:
    """Shrink batch sides first so the matrix relation in the last dims survives."""
    while batch and prod(batch + last) > budget.max_numel:
        i = max(range(len(batch)), key=lambda k: batch[k])
        if batch[i] <= 1:
            batch.pop(i)
        else:
            batch[i] //= 2
    return tuple(batch + last)


def matmul_shapes(kind: str = "matmul") -> ShapeBuilder:
    """Shapes for the matmul family. ``kind`` is one of:
    mm (n,k)(k,m); bmm (b,n,k)(b,k,m); mv (n,k)(k,); dot (n,)(n,); outer (n,)(m,);
    matmul: any of 1-D..5-D with broadcast batch dims; solve: A (...,n,n), B (...,n,k)."""
    def build(draw, budget: ShapeBudget):
        n, k, m = (draw_side(draw, budget) for _ in range(3))
        if kind == "mm":
            return ((n, k), (k, m))
        if kind == "bmm":
            b = draw_side(draw, budget)
            return ((b, n, k), (b, k, m))
        if kind == "mv":
            return ((n, k), (k,))
        if kind == "dot":
            return ((k,), (k,))
        if kind == "outer":
            return ((n,), (m,))
        if kind == "solve":
            batch = [draw_side(draw, budget) for _ in range(draw(integers_once(0, max(0, min(2, budget.max_rank - 2)))))]
            a = fit_keep_last(list(batch), [n, n], budget)
            if draw(st.booleans()):
                return (a, tuple(batch) + (n, m))
            return (a, tuple(batch) + (n,)) if not batch else (a, tuple(batch) + (n, m))
        # matmul: pick ranks 1..5 for each side
        top = max(1, min(5, budget.max_rank))
        ra, rb = draw(integers_once(1, top)), draw(integers_once(1, top))
        batch = [draw_side(draw, budget) for _ in range(max(ra, rb) - 2)] if max(ra, rb) > 2 else []
        a = [k] if ra == 1 else batch[len(batch) - (ra - 2):] + [n, k] if ra > 2 else [n, k]
        b = [k] if rb == 1 else batch[len(batch) - (rb - 2):] + [k, m] if rb > 2 else [k, m]
        a = list(fit_keep_last(a[:-2], a[-2:], budget)) if len(a) > 2 else a
        b = list(fit_keep_last(b[:-2], b[-2:], budget)) if len(b) > 2 else b
        # re-align batches after fitting: batch dims must broadcast, so use 1 where they differ
        return _broadcastable_batches(tuple(a), tuple(b))
    return build


def _broadcastable_batches(a: tuple, b: tuple) -> tuple:
    if len(a) <= 2 or len(b) <= 2:
        return (a, b)
    ba, bb = list(a[:-2]), list(b[:-2])
    for i in range(1, min(len(ba), len(bb)) + 1):
        if ba[-i] != bb[-i] and ba[-i] != 1 and bb[-i] != 1:
            bb[-i] = 1
    return (tuple(ba) + a[-2:], tuple(bb) + b[-2:])


# -- argument builders -----------------------------------------------------------------

def dim_arg(*, keepdim: bool = True, allow_none: bool = True, allow_list: bool = False,
            name: str = "dim", input_index: int = 0) -> ArgBuilder:
    """A ``dim`` (and optionally ``keepdim``) for reductions: any valid dim, negative
    dims included; None (reduce all) when allowed; a tuple of dims when allowed."""
    def build(draw, shapes, dtypes):
        rank = len(shapes[input_index])
        out: dict[str, Any] = {}
        choices = ["one"] + (["none"] if allow_none else []) + (["list"] if allow_list and rank > 1 else [])
        how = draw(sampled_once(choices)) if rank else ("none" if allow_none else "zero")
        if how == "one":
            out[name] = draw(integers_once(-rank, rank - 1))
        elif how == "list":
            dims = draw(st.lists(integers_once(0, rank - 1), min_size=1, max_size=rank, unique=True))
            out[name] = tuple(dims)
        elif how == "zero":
            out[name] = 0
        if keepdim and name in out:
            out["keepdim"] = draw(st.booleans())
        return out
    return build


def scalar_arg(name: str, values: st.SearchStrategy) -> ArgBuilder:
    def build(draw, shapes, dtypes):
        return {name: draw(values)}
    return build


def combine_args(*builders: ArgBuilder) -> ArgBuilder:
    def build(draw, shapes, dtypes):
        out: dict[str, Any] = {}
        for b in builders:
            out.update(b(draw, shapes, dtypes))
        return out
    return build


def expand(spec_dtypes) -> tuple[str, ...]:
    return dt.expand_groups(spec_dtypes)


# -- helpers shared by the op modules (added with the linalg/elementwise/reduction ops) --

def first_dtype(dtype_names) -> str:
    """The dtype of the first tensor input, as an argument builder receives it."""
    return dtype_names if isinstance(dtype_names, str) else dtype_names[0]


def broadcastable_to(draw, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to ``shape`` (for addmm's ``input`` and the like): the
    whole shape, a suffix of it, some sides replaced by 1, or 0-d."""
    how = draw(integers_once(0, 3))
    if how == 0 or not shape:
        return tuple(shape)
    rank = len(shape)
    own = draw(integers_once(0, rank))
    out = list(shape[rank - own:])
    if how >= 2:
        out = [1 if draw(st.booleans()) else s for s in out]
    return tuple(out)


@preparation
def writable_copy(t):
    """A copy of ``t`` in fresh storage with ``t``'s sizes, strides and storage offset:
    what an in-place call (``F.elu(x, inplace=True)``) writes, so that it sees the drawn
    layout and leaves the case's input as it was. Elements that share memory (stride-0
    dims) cannot be written in place: such a tensor is copied dense. The copy is made
    with ``copy_``, so gradients flow back to ``t``."""
    if any(stride == 0 and n > 1 for stride, n in zip(t.stride(), t.shape)):
        return t.clone(memory_format=torch.contiguous_format)
    offset = t.storage_offset()
    extent = offset + (1 + sum((n - 1) * stride for n, stride in zip(t.shape, t.stride())) if t.numel() else 0)
    out = torch.empty(extent, dtype=t.dtype, device=t.device).as_strided(t.shape, t.stride(), offset)
    return out.copy_(t)


@preparation
def nonzero_int_divisor(t):
    """``t`` with zeros replaced by 1 when it is integral (an integer division by zero
    raises on CPU and is undefined elsewhere); floating/complex ``t`` is returned as is."""
    if t.is_floating_point() or t.is_complex():
        return t
    return t.masked_fill(t == 0, 1)


def _same_mask(a, b):
    """Elementwise exact equality with NaN equal to NaN."""
    same = torch.eq(a, b)
    if a.is_floating_point() or a.is_complex():
        same = torch.logical_or(same, torch.logical_and(torch.isnan(a), torch.isnan(b)))
    return same


def _same_values(a, b) -> bool:
    """Exact equality with NaN equal to NaN (both sides gather from the same tensor)."""
    return a.shape == b.shape and bool(_same_mask(a, b).all())


_NO_CPU_GATHER = (torch.uint16, torch.uint32, torch.uint64)


def _gather_reduced(x, idx, values=None, reducer: str | None = None):
    """x's values at ``idx``, where ``idx`` indexes one dim of ``x`` (a reduced dim with or
    without keepdim, or the dim of a cumulative op), or x flattened when it is a single
    index. The dim is inferred from the shapes; where several dims fit, the one whose
    gathered values match ``values`` (or ``reducer`` over that dim) is taken.
    Returns (gathered, in_range): indices out of range are clamped and flagged."""
    if x.dtype in _NO_CPU_GATHER:
        # CPU has no gather for these: gather their bit patterns as int64 (a bijection,
        # so equality is kept) and cast back.
        back = x.dtype
        gathered, in_range = _gather_reduced(x.to(torch.int64), idx,
                                             None if values is None else values.to(torch.int64), reducer)
        return (gathered.to(back) if gathered.dtype == torch.int64 else gathered), in_range
    if idx.numel() == 0 or x.numel() == 0:
        empty = torch.zeros(idx.shape, dtype=x.dtype, device=x.device)
        return empty, torch.ones(idx.shape, dtype=torch.bool, device=x.device)
    if idx.numel() == 1:
        n = x.numel()
        flat = idx.reshape(-1)
        in_range = torch.logical_and(flat.ge(0), flat.lt(n)).reshape(idx.shape)
        gathered = x.reshape(-1).gather(0, flat.clamp(0, n - 1)).reshape(idx.shape)
        return gathered, in_range
    xs, js = tuple(x.shape), tuple(idx.shape)
    squeezed = len(js) == len(xs) - 1
    candidates = []
    for d in range(len(xs)):
        if squeezed:
            fits = xs[:d] + xs[d + 1:] == js
        else:
            fits = (len(js) == len(xs) and js[d] in (1, xs[d])
                    and all(js[k] == xs[k] for k in range(len(xs)) if k != d))
        if fits:
            candidates.append(d)
    if not candidates:  # a wrong output shape: keep the raw indices so the mismatch shows
        return idx, torch.zeros(idx.shape, dtype=torch.bool, device=idx.device)
    candidates.sort(key=lambda d: xs[d] == 1)
    per_dim = []
    for d in candidates:
        index = idx.unsqueeze(d) if squeezed else idx
        in_range = torch.logical_and(index.ge(0), index.lt(xs[d]))
        gathered = x.gather(d, index.clamp(0, xs[d] - 1))
        if squeezed:
            gathered, in_range = gathered.squeeze(d), in_range.squeeze(d)
        per_dim.append((d, gathered, in_range))
    if len(per_dim) == 1:
        return per_dim[0][1:]
    if values is not None:
        # Whichever dim matches, the gathered values then equal ``values``: both sides
        # agree even if a wrong dim matches by coincidence on one of them. Where several
        # match (ties: every element equal), the dim along which every index is in range
        # is the one the op used: a valid result has no index out of range there, so two
        # valid orders of tied elements canonicalise alike.
        matching = [(gathered, in_range) for _, gathered, in_range in per_dim if _same_values(gathered, values)]
        for gathered, in_range in matching:
            if bool(in_range.all()):
                return gathered, in_range
        return matching[0] if matching else per_dim[0][1:]
    if reducer is not None:
        # No values to match and the wanted dim differs per candidate: say per element
        # whether the index points at an extremum along some candidate dim (all True on
        # any correct side, whatever its tie-breaking).
        ok = any_in_range = None
        for d, gathered, in_range in per_dim:
            want = getattr(torch, reducer)(x, dim=d, keepdim=not squeezed)
            hit = torch.logical_and(_same_mask(gathered, want), in_range)
            ok = hit if ok is None else torch.logical_or(ok, hit)
            any_in_range = in_range if any_in_range is None else torch.logical_or(any_in_range, in_range)
        return ok, any_in_range
    return per_dim[0][1:]


def gather_at_indices(*, values_at: int | None = 0, indices_at: int | None = 1,
                      input_index: int = 0, reducer: str | None = None) -> Canonicaliser:
    """Canonicaliser for ops whose indices are not unique under ties (max/min/median/
    kthvalue along a dim, argmax/argmin, cummax/cummin): the indices are replaced by the
    input values they point at (plus a flag per index saying it was in range).
    ``indices_at=None`` means the whole output is the indices (argmax); ``reducer``
    ("amax"/"amin") then picks the dim where the shapes leave it ambiguous."""
    def canonicalise(inputs, outputs):
        x = inputs[input_index]
        idx = outputs if indices_at is None else outputs[indices_at]
        values = None if values_at is None else outputs[values_at]
        gathered, in_range = _gather_reduced(x, idx, values, reducer)
        if values is None:
            return (gathered, in_range)
        return (values, gathered, in_range)
    return canonicalise
