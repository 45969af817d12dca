"""Explanation by ablation: which features of a minimised case the failure needs.

Each feature present in the case is taken away on its own (contiguous inputs, a
non-empty tensor, one dim fewer, a 0-d input made 1-D, another dtype of the class,
finite values, no special values, an argument left out) and the case re-run. If it then
passes, the feature is *necessary*: a condition. The conditions name the bug rather
than its symptom, so they go into the finding's signature (two causes on one op stay
apart; one cause across dtypes of a class and shapes is one finding), they are matched
against new failing cases during a campaign (a case that meets the conditions of a
finding already found is a sighting, not a new bug), and they make the one-line explanation:
"wrong values only when `other` is non-contiguous (transposed); contiguous inputs pass;
all float dtypes".

A condition is a short stable string:

``layout:I``        input I has an awkward layout (non-contiguous, offset, expanded)
``layout:any``      some input must be awkward, none in particular
``empty``           some input has no elements
``rank>=R``         the inputs have R or more dims
``0-d:I``           input I is 0-d
``mixed-dtypes``    the op's inputs of the drawn dtype (not an index or a mask) are of
                    several dtypes; all in the main input's dtype pass (issue 38's mixed
                    dtypes class: pytorch#153209's float64 0-d beside float16)
``three-dtypes``    the op's free inputs are of three dtypes or more (a compound boundary
                    sibling that retyped two inputs: pytorch#153210's int64, int16 and
                    int32 operands); the third made the second's (two dtypes) passes
``classes:C+D``     only these dtype classes fail (float, complex, integral, bool)
``dtypes:A+B``      only these dtypes of their class fail (says nothing of other classes)
``nonfinite``       an input holds nan or an infinity
``specials``        an input holds a finite special value (-0.0, a subnormal, an extreme)
``negative``        an input holds a negative value
``kwarg:NAME``      the argument NAME (with a value other than its default) is passed
``extreme:NAME``    the argument NAME is at an extreme of its range (arg_extremes); an
                    ordinary value passes. Each feature is taken away on its own, so a
                    bug needing two (a compound boundary sibling's: pytorch#153210's mixed
                    integer dtypes and ``value`` ~1e18) is explained by both
``variant:V``       the op is called in form V (method, inplace, out, out-strided,
                    out-resized, out-alias, grad); the functional form passes
``alias:J``         input J shares a storage with an earlier input (adjacent or
                    overlapping); storages of their own pass. (Taking an overlap away
                    also gives the earlier input back its own values where the later one
                    had overwritten them: a recipe cannot keep them.)
``alias:out``       ``out=`` is an input itself (input 0: variant out-alias; input N:
                    out-alias-N); a separate ``out=`` passes
``lastdim%K``       the main input's last dim is not a multiple of K (a kernel that handles
                    K elements a thread and skips the tail): rounding it up to a multiple
                    of K passes, and growing it by K (the same remainder) still fails
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import torch

from ..generation import catalogue
from ..generation.arg_extremes import extreme_arguments, ordinary
from ..generation import dtypes as dt
from ..generation.large_sizes import long_dim_phrase
from ..generation.input_classes import free_inputs
from ..generation.opspec import aliased_out_input
from ..generation.recipes import NONFINITE_SPECIALS, Case, Layout, main_input
from . import edits
from .probe import PASSES, SAME, Prober, out_of_time
from .reduce import DTYPE_PREFERENCE


_FIRST = ("x", "a", "t", "self", "input", "inp")
_SECOND = ("y", "b", "other", "u")


def _declared_names(spec, n: int) -> list[str]:
    """The op callable's own positional parameter names (``lambda x, index, dim: ...``
    names its inputs ``input`` and ``index``), or [] when it has none to read."""
    import inspect
    try:
        params = [p for p in inspect.signature(spec.fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []
    if len(params) < n:
        return []
    names = [p.name for p in params[:n]]
    if names and names[0] in _FIRST:
        names[0] = "input"
    if len(names) > 1 and names[1] in _SECOND:
        names[1] = "other"
    return names


def input_names(case: Case) -> list[str]:
    """What to call each input in words: the op callable's parameter names where it
    has them, else ``input``, ``other``, then ``input3``..."""
    try:
        declared = _declared_names(catalogue.get(case.op), len(case.inputs))
    except KeyError:
        declared = []
    if len(set(declared)) == len(declared) == len(case.inputs):
        return declared
    return [("input", "other")[i] if i < 2 else f"input{i + 1}" for i in range(len(case.inputs))]


_LAYOUT_WORDS = {"offset": "has a storage offset", "gapped": "is non-contiguous (gapped)",
                 "transposed": "is non-contiguous (transposed)", "permuted": "is non-contiguous (permuted)",
                 "channels_last": "is channels_last", "expanded": "is expanded (stride 0)",
                 "conj": "is a conjugate view (conj bit)", "neg": "is a negative view (neg bit)"}


def _layout_phrase(recipe) -> str:
    kinds = recipe.layout.kinds()
    words = [_LAYOUT_WORDS[k] for k in kinds]
    if len(words) > 1:
        return words[0] + " and " + " and ".join(w.removeprefix("is ") for w in words[1:])
    return words[0] if words else "is contiguous"


# -- conditions: matching a case ---------------------------------------------------------

def holds(condition: str, case: Case) -> bool:
    """Whether ``case`` has the feature ``condition`` names (unknown conditions: no)."""
    kind, _, arg = condition.partition(":")
    inputs = case.inputs
    if kind == "layout":
        if arg == "any":
            return any(not r.layout.is_plain() for r in inputs)
        i = int(arg)
        return i < len(inputs) and not inputs[i].layout.is_plain()
    if condition == "empty":
        return any(r.numel == 0 for r in inputs)
    if condition.startswith("rank>="):
        return max((r.rank for r in inputs), default=0) >= int(condition[len("rank>="):])
    if condition.startswith("numel>="):
        return max((r.numel for r in inputs), default=0) >= int(condition[len("numel>="):])
    if condition.startswith("side>="):
        return max((n for r in inputs for n in r.shape), default=0) >= int(condition[len("side>="):])
    if condition.startswith(DIVISIBILITY):
        main = inputs[main_input(case)] if inputs else None
        return main is not None and main.rank > 0 and main.shape[-1] % int(condition[len(DIVISIBILITY):]) != 0
    if kind == "0-d":
        i = int(arg)
        return i < len(inputs) and inputs[i].rank == 0
    if kind == "dtypes":
        # A dtype restriction speaks of its own class only ("only int32, int64; uint8
        # passes"): a case of another class meets it, and ``classes:`` decides for that.
        if not inputs:
            return False
        main, listed = inputs[main_input(case)].dtype, arg.split("+")
        return main in listed or all(dt.dtype_class(d) != dt.dtype_class(main) for d in listed)
    if kind == "classes":
        return bool(inputs) and dt.dtype_class(inputs[main_input(case)].dtype) in arg.split("+")
    if condition == "nonfinite":
        return any(n in NONFINITE_SPECIALS for r in inputs for _, n in r.values.specials)
    if condition == "specials":
        return any(n not in NONFINITE_SPECIALS for r in inputs for _, n in r.values.specials)
    if kind == "kwarg":
        return any(k == arg for k, _ in case.kwargs)
    if kind == "extreme":
        return arg in extreme_arguments(case)
    if kind == "variant":
        return case.variant == arg
    if kind == "alias":
        if arg == "out":
            return aliased_out_input(case.variant) is not None
        j = int(arg)
        return j < len(inputs) and inputs[j].alias is not None
    if condition == "negative":
        return _holds_negative(case)
    if kind == "grouped":
        i, j, d = (int(x) for x in arg.split(":"))
        return (i, j, d) in _grouped_dims(inputs)
    if condition == MIXED_DTYPES:
        return _mixed_dtypes(case)
    if condition == THREE_DTYPES:
        return len({case.inputs[i].dtype for i in _free_inputs(case)}) > 2
    if kind == "broadcast":
        j = int(arg)
        return j < len(inputs) and inputs[j].shape != _broadcast_shape(inputs)
    return False


def _broadcast_shape(inputs) -> tuple | None:
    """The shape all inputs broadcast to, or None where they do not."""
    try:
        return tuple(torch.broadcast_shapes(*(r.shape for r in inputs)))
    except RuntimeError:
        return None


def _broadcast_source(case: Case) -> int | None:
    """The input the op's result converts (``OpSpec.converts``: the cast family's source)
    where its shape broadcasts to a larger one (0-d, sides of 1, fewer dims): the class of
    pytorch#160744, a 0-d source converted into several elements."""
    try:
        j = catalogue.get(case.op).converts
    except KeyError:
        return None
    if j is None or j >= len(case.inputs):
        return None
    full = _broadcast_shape(case.inputs)
    return j if full is not None and case.inputs[j].shape != full else None


def _grouped_dims(inputs) -> list[tuple[int, int, int]]:
    """(i, j, d): inputs i and j of one rank whose dim d differs, input i's a multiple of
    input j's, which is above 1 (not a broadcast): grouped heads (query heads over
    key/value heads in grouped-query attention), groups of channels. A kernel that maps
    an index of i to one of j with the wrong operator is right only where they are equal."""
    return [(i, j, d) for i, a in enumerate(inputs) for j, b in enumerate(inputs)
            if i != j and a.rank == b.rank for d in range(a.rank)
            if b.shape[d] > 1 and a.shape[d] > b.shape[d] and a.shape[d] % b.shape[d] == 0]


MIXED_DTYPES = "mixed-dtypes"
THREE_DTYPES = "three-dtypes"


def _free_inputs(case: Case) -> list[int]:
    """The inputs whose dtype the op's drawn dtype sets (input_classes.free_inputs): not
    an index or a mask, which declare dtypes of their own."""
    try:
        spec = catalogue.get(case.op)
    except KeyError:
        return list(range(len(case.inputs)))
    return free_inputs(spec, len(case.inputs))


def _mixed_dtypes(case: Case) -> bool:
    """Whether the case's free inputs are of several dtypes."""
    return len({case.inputs[i].dtype for i in _free_inputs(case)}) > 1


def _one_dtype(case: Case) -> str:
    """The dtype the mixed-dtypes probe gives every free input: the main input's where it
    is free, else the first free input's."""
    free = _free_inputs(case)
    main = main_input(case)
    return case.inputs[main if main in free else free[0]].dtype


def _two_dtypes(case: Case) -> tuple[list[int], str]:
    """The free inputs the three-dtypes probe retypes, each to the dtype of the first
    free input not of the main one's: every input of a dtype past the first two."""
    free = _free_inputs(case)
    one = _one_dtype(case)
    second = next(case.inputs[i].dtype for i in free if case.inputs[i].dtype != one)
    return [i for i in free if case.inputs[i].dtype not in (one, second)], second


def _holds_negative(case: Case) -> bool:
    """Whether an input (real, signed) holds a value below 0: built on CPU to look."""
    try:
        tensors = case.materialize("cpu")
    except Exception:
        return False
    try:
        # Unsigned dtypes never hold one (and CPU has no ``lt`` for uint16/32/64).
        return any(t.numel() and t.is_signed() and not t.is_complex() and bool((t < 0).any())
                   for t in tensors)
    except Exception:  # a comparison kernel this torch lacks: cannot tell, so no
        return False


def holds_all(conditions, case: Case) -> bool:
    return all(holds(c, case) for c in conditions)


# Conditions that restrict a trigger rather than name it: the dtypes and sizes ablation
# found failing among the few it tried ("only int64, int32", "rank>=5"). A failure of the
# same symptom that has the trigger but not the restriction shows the restriction was
# drawn too narrow, not a second bug (see FoundBug.covers_beyond_restrictions).
RESTRICTIONS = ("dtypes:", "classes:", "rank>=", "numel>=", "side>=")
# Conditions on one input that another input meeting them meets as well (which input is
# awkward is the route to the kernel: corpus/bugs.py normalises them the same way).
_ANY_INPUT = {"layout": "layout:any"}


def is_restriction(condition: str) -> bool:
    return condition.startswith(RESTRICTIONS)


def holds_on_any_input(condition: str, case: Case) -> bool:
    """``holds``, with a condition on input ``i`` met by any input (``layout:1`` by a
    gapped input 0, ``0-d:2`` by a 0-d input 0, ``alias:1`` by any input aliased)."""
    kind, _, arg = condition.partition(":")
    if kind in ("layout", "0-d", "alias") and arg.isdigit():
        if kind == "layout":
            return holds("layout:any", case)
        if kind == "0-d":
            return any(r.rank == 0 for r in case.inputs)
        return any(r.alias is not None for r in case.inputs) or aliased_out_input(case.variant) is not None
    return holds(condition, case)


# -- ablation -------------------------------------------------------------------------

@dataclass
class Probe:
    """One ablation: the feature taken away, and what the run said."""
    feature: str          # the condition it would establish
    question: str         # e.g. "contiguous `other`"
    verdict: str          # probe verdict: same, passes, invalid, different
    necessary: bool


@dataclass
class Explanation:
    conditions: tuple[str, ...]
    text: str
    probes: list[Probe] = field(default_factory=list)
    failing_dtypes: tuple[str, ...] = ()
    tested_dtypes: tuple[str, ...] = ()
    seconds: float = 0.0
    failing_classes: tuple[str, ...] = ()
    tested_classes: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"conditions": list(self.conditions), "text": self.text,
                "failing_dtypes": list(self.failing_dtypes), "tested_dtypes": list(self.tested_dtypes),
                "failing_classes": list(self.failing_classes), "tested_classes": list(self.tested_classes),
                "probes": [{"feature": p.feature, "question": p.question, "verdict": p.verdict,
                            "necessary": p.necessary} for p in self.probes],
                "seconds": round(self.seconds, 3)}

    @classmethod
    def from_json(cls, d: dict | None) -> "Explanation | None":
        if not isinstance(d, dict):
            return None
        return cls(conditions=tuple(str(c) for c in d.get("conditions", ())), text=str(d.get("text", "")),
                   probes=[Probe(str(p["feature"]), str(p["question"]), str(p["verdict"]), bool(p["necessary"]))
                           for p in d.get("probes", ()) if isinstance(p, dict)],
                   failing_dtypes=tuple(d.get("failing_dtypes", ())), tested_dtypes=tuple(d.get("tested_dtypes", ())),
                   seconds=float(d.get("seconds", 0.0)), failing_classes=tuple(d.get("failing_classes", ())),
                   tested_classes=tuple(d.get("tested_classes", ())))


def _ablations(case: Case, names: list[str]):
    """(condition, question, ablated case) for each feature the case has."""
    inputs = case.inputs
    awkward = [i for i, r in enumerate(inputs) if not r.layout.is_plain()]
    if len(awkward) > 1:
        # All inputs contiguous first: under the time budget the question that settles
        # whether a layout matters at all is asked before which input's does (a failure
        # that needs K or V awkward passes neither single probe: flex_attention@huge's
        # sequence-major K and V, whose ablation ran out of time after the single ones)
        yield "layout:any", "contiguous inputs", edits.with_inputs(case, [edits.plain(r) for r in inputs])
    for i in awkward:
        yield f"layout:{i}", f"contiguous `{names[i]}`", edits.with_input(case, i, edits.plain(inputs[i]))
    if any(r.numel == 0 for r in inputs):
        grown = [replace(r, shape=tuple(s or 1 for s in r.shape)) for r in inputs]
        yield "empty", "non-empty inputs", edits.with_inputs(case, grown)
    top = max((r.rank for r in inputs), default=0)
    fewer = [edits.drop_dim(r, 0) if r.rank == top else r for r in inputs]
    large = any(r.numel >= LARGE_NUMEL or max(r.shape, default=0) >= LARGE_SIDE for r in inputs)
    if large:
        # The size first: a dim fewer would also take billions of elements away.
        halved = [_below_numel(r) for r in inputs]
        if halved != list(inputs):
            yield f"numel>={LARGE_NUMEL}", f"fewer than 2^31 elements", edits.with_inputs(case, halved)
        capped = [replace(r, shape=tuple(min(n, LARGE_SIDE - 1) for n in r.shape)) for r in inputs]
        # (capping a 1-D input of 2^31 elements also takes the elements away: that probe
        # would say nothing of the dim on its own)
        confounded = halved != list(inputs) and all(r.numel < LARGE_NUMEL for r in capped)
        if capped != list(inputs) and not confounded:
            yield f"side>={LARGE_SIDE}", "every dim shorter than 65,536", edits.with_inputs(case, capped)
    # One dim fewer, unless that also takes a layout feature away (a transpose needs
    # two dims): then the layout, not the rank, is what the failure needs.
    elif top >= 2 and all(a.layout.kinds() == b.layout.kinds() for a, b in zip(inputs, fewer)):
        yield f"rank>={top}", f"{top - 1} dims instead of {top}", edits.with_inputs(case, fewer)
    for i, r in enumerate(inputs):
        if r.rank == 0 and top > 0 or (r.rank == 0 and i == main_input(case)):
            yield f"0-d:{i}", f"a 1-element 1-D `{names[i]}`", edits.with_input(case, i, edits.add_leading_dim(r))
    j = _broadcast_source(case)
    if j is not None:
        r, full = inputs[j], _broadcast_shape(inputs)
        whole = replace(r, shape=full, layout=Layout(offset=r.layout.offset, bit=r.layout.bit))
        yield f"broadcast:{j}", f"`{names[j]}` of the shape {list(full)} (not broadcast)", edits.with_input(case, j, whole)
    if case.variant != "autocast" and _mixed_dtypes(case):
        # (autocast's inputs are mixed by design: its own probe below takes them to one dtype)
        one = _one_dtype(case)
        yield MIXED_DTYPES, f"every input in {one}", edits.with_inputs(
            case, [edits.with_dtype(r, one) if i in _free_inputs(case) else r for i, r in enumerate(inputs)])
        if holds(THREE_DTYPES, case):
            past, second = _two_dtypes(case)
            yield THREE_DTYPES, f"{', '.join(f'`{names[i]}`' for i in past)} in {second} (two dtypes)", \
                edits.with_inputs(case, [edits.with_dtype(r, second) if i in past else r for i, r in enumerate(inputs)])
    if any(n in NONFINITE_SPECIALS for r in inputs for _, n in r.values.specials):
        yield "nonfinite", "finite values", edits.with_inputs(case, [edits.without_nonfinite(r) for r in inputs])
    if any(n not in NONFINITE_SPECIALS for r in inputs for _, n in r.values.specials):
        finite_names = {n for r in inputs for _, n in r.values.specials if n not in NONFINITE_SPECIALS}
        yield "specials", "no special values", edits.with_inputs(
            case, [edits.without_specials(r, finite_names) for r in inputs])
    if _holds_negative(case):
        yield "negative", "non-negative values", edits.with_inputs(case, [edits.non_negative(r) for r in inputs])
    for j, r in enumerate(inputs):
        if r.alias is not None:
            yield f"alias:{j}", f"`{names[j]}` in a storage of its own", edits.with_input(case, j, edits.unaliased(r))
    if aliased_out_input(case.variant) is not None:
        yield "alias:out", "a separate `out=` tensor", replace(case, variant="out")
    for i, j, d in _grouped_dims(inputs):
        yield (f"grouped:{i}:{j}:{d}", f"`{names[i]}`'s dim {d} as long as `{names[j]}`'s",
               edits.with_input(case, i, edits.resize(inputs[i], d, inputs[j].shape[d])))
    for name in extreme_arguments(case):
        # before the argument is dropped: an extreme that is the condition reads as one
        # ("only when `stride` is at an extreme: 2^31"), not as the argument being given
        value = ordinary(dict(case.kwargs)[name])
        yield f"extreme:{name}", f"`{name}={value!r}`", edits.set_kwarg(case, name, value)
    for name, value in case.kwargs:
        yield f"kwarg:{name}", f"no `{name}` argument", edits.drop_kwarg(case, name)
    if case.variant == "autocast":
        # outside autocast, the inputs as autocast would take them: all in the main dtype
        main = inputs[main_input(case)].dtype if inputs else "float32"
        same = [edits.with_dtype(r, main) if r.dtype in ("float16", "bfloat16") else r for r in inputs]
        yield "variant:autocast", "outside autocast (inputs all float32)", replace(
            edits.with_inputs(case, same), variant="functional")
    elif case.variant != "functional":
        yield f"variant:{case.variant}", "the functional form", replace(case, variant="functional")


# Size conditions (the large family): 2^31 elements (32-bit indexing) and a dim of
# 65,536 (Metal's threadgroups per grid dim).
LARGE_NUMEL = 2**31
LARGE_SIDE = 65536


def _below_numel(recipe, limit: int = LARGE_NUMEL):
    """The recipe with its longest dims halved until it has fewer than ``limit`` elements."""
    shape = list(recipe.shape)
    while math.prod(shape) >= limit:
        d = max(range(len(shape)), key=lambda i: shape[i])
        shape[d] = max(1, shape[d] // 2)
    return recipe if tuple(shape) == recipe.shape else replace(recipe, shape=tuple(shape))


# The divisibility condition: ``lastdim%4`` (see the module docstring). Vector widths a
# kernel may assume, tried smallest first so that the condition names the width itself
# (a size of 5 fails for a width of 4 and of 8 alike; rounding to 8 passes too).
DIVISIBILITY = "lastdim%"
_WIDTHS = (2, 4, 8, 16)


def _rounded_up(n: int, k: int) -> int:
    return -(-n // k) * k


def _with_last_dim(case: Case, size: int) -> Case:
    """``case`` with the main input's last dim set to ``size``, and each other input whose
    last dim matched it (same-shaped or broadcast operands) changed alike."""
    m = main_input(case)
    n = case.inputs[m].shape[-1]
    return edits.with_inputs(case, [edits.resize(r, r.rank - 1, size) if i == m or (r.rank and r.shape[-1] == n)
                                    else r for i, r in enumerate(case.inputs)])


def _divisibility_probes(case: Case, names: list[str], prober: Prober, symptom: tuple,
                         deadline: float) -> tuple[list[Probe], str | None]:
    """(probes, ``lastdim%K`` or None). K is the smallest width such that rounding the last
    dim up to a multiple of K passes; the condition holds when growing the dim by K (the
    same remainder, a larger size) still fails, which tells "not a multiple of 4" from "too
    small". One probe (rounding to the widest width) for a failure that does not care."""
    if not case.inputs:
        return [], None
    main = case.inputs[main_input(case)]
    if main.rank == 0 or main.numel >= LARGE_NUMEL or main.shape[-1] == 0:
        return [], None
    n = main.shape[-1]
    widths = [k for k in _WIDTHS if n % k]
    if not widths:
        return [], None
    name = names[main_input(case)]
    probes: list[Probe] = []

    def probe(k, size, question, want) -> bool:
        verdict = _verdict(prober, _with_last_dim(case, size), symptom, deadline)
        probes.append(Probe(f"{DIVISIBILITY}{k}", question, verdict, verdict == want))
        return verdict == want

    def rounding(k) -> bool:
        return probe(k, _rounded_up(n, k), f"the last dim of `{name}` a multiple of {k}", PASSES)

    if not rounding(widths[-1]):
        return probes, None
    for k in widths:
        if out_of_time(prober, deadline):
            break
        if k != widths[-1] and not rounding(k):
            continue
        # the same remainder with K more elements: still failing, or only the size mattered
        if probe(k, n + k, f"the last dim of `{name}` {n + k} (not a multiple of {k} either)", SAME):
            return probes, f"{DIVISIBILITY}{k}"
        break
    return probes, None


# Fresh value seeds a probe tries before it calls the ablated case passing.
RESEEDS = 2


def _verdict(prober: Prober, case: Case, symptom: tuple, deadline: float, negative: bool = False) -> str:
    """The probe's verdict, where "passes" must hold for fresh values too: a failure that
    depends on its values (a float16 accumulator's error, a tolerance just crossed) may
    pass by chance in another dtype, size or layout, and a condition read from that
    luck would misname the bug. A "same" verdict needs no second run."""
    verdict = prober.classify(case, symptom).verdict
    for step in range(1, RESEEDS + 1):
        if verdict != PASSES or out_of_time(prober, deadline):
            break
        fresh = _reseeded(case, step)
        verdict = prober.classify(_holding_negatives(fresh) if negative else fresh, symptom).verdict
    return verdict


def _reseeded(case: Case, step: int) -> Case:
    return edits.with_inputs(case, [replace(r, values=replace(r.values, seed=r.values.seed + step))
                                    for r in case.inputs])


def _holding_negatives(case: Case, tries: int = 32) -> Case:
    """``case`` with negative values again where a dtype change lost them (the values
    of another dtype are drawn anew from the recipe: a float case's small negative
    may become an integer case's 0 or 3): other seeds of the same recipes, until an
    input holds a negative. A dtype probe of a failure that needs negative values asks
    about the dtype, not about the values. Unchanged where no seed gives one (unsigned)."""
    if _holds_negative(case):
        return case
    for step in range(1, tries + 1):
        reseeded = _reseeded(case, step)
        if _holds_negative(reseeded):
            return reseeded
    return case


def _allowed_dtypes(case: Case) -> set[str]:
    try:
        return set(catalogue.get(case.op).dtypes)
    except KeyError:
        return set(dt.ALL_DTYPE_NAMES)


def _dtype_alternatives(case: Case) -> list[str]:
    """Other dtypes of the main dtype's class the op takes."""
    if not case.inputs:
        return []
    main = case.inputs[main_input(case)].dtype
    allowed = _allowed_dtypes(case)
    return [d for d in DTYPE_PREFERENCE[dt.dtype_class(main)] if d in allowed and d != main]


def _class_representatives(case: Case) -> list[str]:
    """The simplest dtype of each other class the op takes."""
    if not case.inputs:
        return []
    main_class = dt.dtype_class(case.inputs[main_input(case)].dtype)
    allowed = _allowed_dtypes(case)
    out = []
    for cls, names in DTYPE_PREFERENCE.items():
        if cls != main_class:
            out += [d for d in names if d in allowed][:1]
    return out


_SYMPTOMS = {"wrong-values": "wrong values", "crash": "crashes", "hang": "hangs",
             "device-fault": "a device fault", "wrong-grads": "wrong gradients"}


def symptom_phrase(failure) -> str:
    if failure.kind == "crash":
        return f"crashes ({failure.details.get('signal', 'signal')})"
    if failure.kind == "dut-raises":
        return f"raises {failure.dedup_key[1] if len(failure.dedup_key) > 1 else 'an error'} where CPU does not"
    if failure.kind == "ref-raises":
        return "accepts input that CPU rejects"
    if failure.oracle == "grads":
        return "wrong gradients"
    if failure.oracle == "layout":
        return "results that differ between non-contiguous inputs and contiguous copies"
    return _SYMPTOMS.get(failure.kind, failure.kind.replace("-", " "))


def _condition_phrase(condition: str, case: Case, names: list[str]) -> str:
    kind, _, arg = condition.partition(":")
    if kind == "layout":
        if arg == "any":
            return "an input is non-contiguous"
        i = int(arg)
        return f"`{names[i]}` {_layout_phrase(case.inputs[i])}"
    if condition == "empty":
        return "an input is empty"
    if condition.startswith("rank>="):
        return f"inputs have {condition[len('rank>='):]} or more dims"
    if condition.startswith("numel>="):
        most = max(r.numel for r in case.inputs)
        return f"an input has {_power_of_two(int(condition[len('numel>='):]))} or more elements ({most:,} here)"
    if condition.startswith("side>="):
        return long_dim_phrase(catalogue.all_ops().get(case.op), [r.shape for r in case.inputs], names,
                               int(condition[len("side>="):]))
    if condition.startswith(DIVISIBILITY):
        m = main_input(case)
        k, n = int(condition[len(DIVISIBILITY):]), case.inputs[m].shape[-1]
        return f"the last dim of `{names[m]}` is not a multiple of {k} ({n} here; {_rounded_up(n, k)} passes)"
    if kind == "0-d":
        return f"`{names[int(arg)]}` is 0-d"
    if kind == "dtypes":
        return "the dtype is " + " or ".join(arg.split("+"))
    if kind == "classes":
        return "the dtype is " + " or ".join(arg.split("+"))
    if condition == "nonfinite":
        held = sorted({n for r in case.inputs for _, n in r.values.specials if n in NONFINITE_SPECIALS})
        return "an input holds " + "/".join(held)
    if condition == "specials":
        held = sorted({n for r in case.inputs for _, n in r.values.specials if n not in NONFINITE_SPECIALS})
        return "an input holds " + "/".join(held)
    if condition == "negative":
        return "an input holds negative values"
    if kind == "grouped":
        i, j, d = (int(x) for x in arg.split(":"))
        a, b = case.inputs[i].shape[d], case.inputs[j].shape[d]
        return (f"dim {d} of `{names[i]}` is a multiple of `{names[j]}`'s ({a} over {b} here; "
                f"equal, it passes)")
    if kind == "broadcast":
        j = int(arg)
        full = _broadcast_shape(case.inputs)
        return (f"`{names[j]}` is broadcast ({list(case.inputs[j].shape)} into {list(full or ())} here; "
                f"of the full shape, it passes)")
    if condition == MIXED_DTYPES:
        free = _free_inputs(case)
        return ("the inputs are of different dtypes ("
                + ", ".join(f"`{names[i]}` {case.inputs[i].dtype}" for i in free) + ")")
    if condition == THREE_DTYPES:
        free = _free_inputs(case)
        count = len({case.inputs[i].dtype for i in free})
        return (f"the inputs are of {_COUNT_WORDS.get(count, count)} different dtypes ("
                + ", ".join(f"`{names[i]}` {case.inputs[i].dtype}" for i in free) + ")")
    if kind == "extreme":
        value = dict(case.kwargs).get(arg)
        return f"`{arg}` is at an extreme of its range (`{arg}={_extreme_words(value)}` here)"
    if kind == "kwarg":
        # Ablation dropped the argument (its default passes): that it is given is what is
        # known, not that this value is needed (the fault target's add aborts for any
        # alpha but 1, and its finding once read "only when `alpha=0`").
        value = dict(case.kwargs).get(arg)
        return f"`{arg}` is given (`{arg}={value!r}` here)"
    if kind == "variant":
        if arg not in _VARIANT_WORDS and aliased_out_input(arg) is not None:
            return f"writing `out=` into input {aliased_out_input(arg)} itself"
        return _VARIANT_WORDS.get(arg, f"called as {arg}")
    if kind == "alias":
        if arg == "out":
            j = aliased_out_input(case.variant) or 0
            return f"`out=` is `{names[j]}` itself" if j < len(names) else "`out=` is an input itself"
        j = int(arg)
        alias = case.inputs[j].alias
        how = "adjacent" if alias.how == "adjacent" else "overlapping"
        return f"`{names[j]}` and `{names[alias.of]}` are views of one storage ({how})"
    return condition


def _extreme_words(value) -> str:
    """An argument's value as its extreme reads: 2^31 - 1 rather than 2147483647."""
    if isinstance(value, tuple):
        return "(" + ", ".join(_extreme_words(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, int) and not isinstance(value, bool):
        for exp in (31, 32, 63):
            for delta, tail in ((0, ""), (-1, " - 1"), (1, " + 1")):
                if abs(value) == 2**exp + delta:
                    return f"{'-' if value < 0 else ''}2^{exp}{tail}"
    return repr(value)


_COUNT_WORDS = {3: "three", 4: "four"}


def _power_of_two(n: int) -> str:
    return f"2^{n.bit_length() - 1}" if n > 0 and n & (n - 1) == 0 else f"{n:,}"


_VARIANT_WORDS = {"method": "called as a method", "inplace": "called in place",
                  "out": "writing into `out=`", "out-strided": "writing into a non-contiguous `out=`",
                  "out-resized": "writing into an `out=` that must be resized",
                  "out-alias": "writing `out=` into the first input itself", "grad": "computing gradients",
                  "autocast": "called under torch.autocast",
                  "out-cast": "writing into an `out=` of another dtype"}


def explain(case: Case, failure, symptom: tuple, prober: Prober, *, budget_s: float = 20.0) -> Explanation:
    """Ablate each feature of ``case`` (which fails with ``symptom``) and explain."""
    start = time.monotonic()
    names = input_names(case)
    probes: list[Probe] = []
    incomplete = False
    for condition, question, ablated in _ablations(case, names):
        if out_of_time(prober, start + budget_s):
            incomplete = True
            break
        verdict = _verdict(prober, ablated, symptom, start + budget_s)
        probes.append(Probe(condition, question, verdict, verdict == PASSES))
    conditions = [p.feature for p in probes if p.necessary]
    if not incomplete:
        more, divisibility = _divisibility_probes(case, names, prober, symptom, start + budget_s)
        probes += more
        conditions += [divisibility] if divisibility else []
    if "layout:any" in conditions and any(c.startswith("layout:") and c != "layout:any" for c in conditions):
        conditions.remove("layout:any")
    for name in [c.partition(":")[2] for c in conditions if c.startswith("extreme:")]:
        if f"kwarg:{name}" in conditions:
            conditions.remove(f"kwarg:{name}")  # the extreme says more than that it is given
    if "alias:out" in conditions and f"variant:{case.variant}" in conditions \
            and aliased_out_input(case.variant) is not None:
        conditions.remove(f"variant:{case.variant}")  # the out= form passes: the aliasing is the trigger
    m = main_input(case) if case.inputs else 0
    main = case.inputs[m].dtype if case.inputs else ""

    def try_dtypes(alternatives, label, failing: list, tested: list) -> bool:
        """Run the case with the main dtype replaced by each alternative; append the
        label of each that still runs to ``tested`` and of each that fails to
        ``failing``. False when the budget ran out."""
        for other in alternatives:
            if out_of_time(prober, start + budget_s):
                return False
            ablated = edits.with_inputs(case, [edits.with_dtype(r, other) if r.dtype == main else r
                                               for r in case.inputs])
            if "negative" in conditions:
                ablated = _holding_negatives(ablated)
            verdict = _verdict(prober, ablated, symptom, start + budget_s, negative="negative" in conditions)
            probes.append(Probe(f"{label[0]}:{label[1](other)}", f"`{names[m]}` in {other}", verdict,
                                verdict == PASSES))
            if verdict in (SAME, PASSES):
                tested.append(label[1](other))
                if verdict == SAME:
                    failing.append(label[1](other))
        return True

    failing, tested = ([main], [main]) if main else ([], [])
    incomplete |= not try_dtypes(_dtype_alternatives(case), ("dtypes", str), failing, tested)
    if main and len(failing) < len(tested):
        conditions.append("dtypes:" + "+".join(sorted(failing)))
    classes_failing = [dt.dtype_class(main)] if main else []
    classes_tested = list(classes_failing)
    incomplete |= not try_dtypes(_class_representatives(case), ("classes", dt.dtype_class),
                                 classes_failing, classes_tested)
    if main and len(classes_failing) < len(classes_tested):
        conditions.append("classes:" + "+".join(sorted(classes_failing)))
    text = _sentence(case, failure, conditions, probes, names, failing, tested, classes_failing, classes_tested)
    if incomplete:
        text += " (ablation cut short by the time budget)"
    return Explanation(tuple(sorted(conditions)), text, probes, tuple(failing), tuple(tested),
                       time.monotonic() - start, tuple(classes_failing), tuple(classes_tested))


def _sentence(case, failure, conditions, probes, names, failing, tested, classes_failing, classes_tested) -> str:
    phrase = symptom_phrase(failure)
    needs = [c for c in conditions if not c.startswith(("dtypes:", "classes:"))]
    if THREE_DTYPES in needs and MIXED_DTYPES in needs:
        needs.remove(MIXED_DTYPES)      # (three dtypes says the inputs are mixed, and lists them)
    parts = []
    if needs:
        parts.append(f"{phrase} only when " + " and ".join(_condition_phrase(c, case, names) for c in needs))
    else:
        parts.append(f"{phrase} whatever the layout, size and values tried")
    layout_probe = [p for p in probes if p.feature.startswith("layout:")]
    if any(p.necessary for p in layout_probe):
        parts.append("contiguous inputs pass")
    elif any(p.verdict == SAME for p in layout_probe if p.feature == "layout:any" or len(layout_probe) == 1):
        # (said only of the probe that made every input contiguous: "layout:any", or the
        # one awkward input's own; one at a time, each may pass the failure to another)
        parts.append("contiguous inputs fail too")
    alias_probe = [p for p in probes if p.feature.startswith("alias:")]
    if any(p.necessary and p.feature != "alias:out" for p in alias_probe):
        parts.append("separate storages pass")
    if any(p.necessary and p.feature == "alias:out" for p in alias_probe):
        parts.append("a separate `out=` passes")
    elif alias_probe and all(p.verdict == SAME for p in alias_probe):
        parts.append("separate storages fail too")
    if any(p.feature == "nonfinite" and p.necessary for p in probes):
        parts.append("finite values pass")
    if any(p.feature == MIXED_DTYPES and p.necessary for p in probes):
        parts.append("inputs of one dtype pass")
    if any(p.feature == THREE_DTYPES and p.necessary for p in probes):
        parts.append("inputs of two dtypes pass")
    if failing:
        cls = dt.dtype_class(failing[0])
        if len(failing) == len(tested) and len(tested) > 1:
            parts.append(f"all {cls} dtypes")
        elif len(tested) > 1:
            passing = [d for d in tested if d not in failing]
            parts.append(f"only {', '.join(failing)} ({', '.join(passing)} pass)")
        else:
            parts.append(f"{failing[0]} (no other {cls} dtype tried)")
    if len(classes_tested) > 1:
        if len(classes_failing) == len(classes_tested):
            parts.append("every dtype class tried fails (" + ", ".join(classes_tested) + ")")
        else:
            passing = [c for c in classes_tested if c not in classes_failing]
            parts.append(f"{', '.join(passing)} dtypes pass")
    return "; ".join(parts)
