"""Which parameters of each op's public function its drawn cases exercise, and over
which values (``mpsfuzz coverage``).

For an op, :mod:`.public_api` names the function and maps a case's call onto its
parameters; this module draws cases as a campaign does (``strategies.example_cases``, or
only their skeletons, ``strategies.example_skeletons``: the same builders' draws without
the layouts and values), collects the labels of every value each parameter took
(:mod:`.value_classes`; a parameter a case leaves out takes its default) and holds them
against the parameter's documented range. A parameter is *drawn* when every label of
its range was seen, and *never drawn* when no case passed it anything but its default.
The share of parameters drawn counts every parameter of every measured op but those
:mod:`.public_api` leaves out, with their reasons.

It also says which input classes of issue 38 (:mod:`.input_classes`: mixed dtypes,
``out-cast``, argument extremes, ``empty-other``, conjugate and negative views, the
large size classes) each op admits and which of them its cases draw. A campaign reaches
several of these only through the boundary siblings it makes of each drawn case
(``strategies.siblings(..., boundaries=True)``), so each drawn case is measured with the
:data:`CAMPAIGN_SIBLINGS` siblings a campaign makes of it. The parameters are measured
on the drawn cases alone, as before: siblings repeat their arguments.
"""
from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass, field
from typing import Iterable

from . import catalogue, input_classes
from .opspec import OpSpec
from .public_api import (Public, UnboundArgument, call_arguments, default_ranges, excluded_reason, public,
                         signature_of)
from .recipes import Case
from .signatures import REQUIRED, Parameter, Signature, SignatureUnknown
from .strategies import example_cases, example_skeletons, siblings
from .value_classes import OTHER, TENSOR, WILDCARDS, default_range, labels

# Ops whose parameters are not measured: the large family (reductions over billions of
# elements, off unless asked for), the programs (several ops in one function: no one
# public function's parameters) and OpInfo's entries (their own sample inputs, not this
# catalogue's builders).
UNMEASURED_FAMILIES = ("large", "programs")

# The cases a 10-minute campaign of all ops draws per op, on the slower of the two
# machines it runs on (a campaign round-robins over its ops, a slice of each in turn).
# Measured 2026-11-27 with `mpsfuzz run --ops all` (the run log's cases and elapsed_s):
#   this 2-core machine (one lane, fault target without faults, torch 2.13): 39,556 cases
#     in 128.5 s, 308 a second;
#   the H100 host (16 cores, 8 lanes of 2 drafters, --target cuda, torch 2.11): 265,048
#     cases in 450 s, 589 a second.
# Both run two siblings per drawn case (lanes.default_siblings), which repeat its
# skeleton, arguments included: a third of the cases draw arguments. Over 540 ops:
#   308 / 3 * 600 / 540 = 114 drawn cases per op here, 589 / 3 * 600 / 540 = 218 there.
CAMPAIGN_CASES_PER_S = 308          # the slower machine's (this 2-core one's)
CAMPAIGN_SIBLINGS = 2
CAMPAIGN_S = 600
CAMPAIGN_OPS = 540                  # the catalogue's measured ops then


def campaign_cases_per_op(ops: int = CAMPAIGN_OPS) -> int:
    """The drawn cases each of ``ops`` ops gets in a 10-minute campaign of all of them."""
    return max(1, CAMPAIGN_CASES_PER_S * CAMPAIGN_S // ((1 + CAMPAIGN_SIBLINGS) * max(ops, 1)))


CAMPAIGN_CASES_PER_OP = campaign_cases_per_op()


def default_cases_per_op() -> int:
    """What a 10-minute campaign of all ops (the catalogue's, as ``--ops all``) draws per op."""
    return campaign_cases_per_op(len(measurable_ops(catalogue.select("all"))))


@dataclass(frozen=True)
class ParameterCoverage:
    name: str
    treatment: str                 # drawn, tensor, out, device, fixed, excluded
    expected: tuple[str, ...]      # the documented range, as labels
    seen: tuple[str, ...]          # every label seen
    has_default: bool = True
    reason: str = ""               # why an excluded parameter is left out

    @property
    def counted(self) -> bool:
        return self.treatment != "excluded"

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(label for label in self.expected if label not in self.seen)

    @property
    def drawn(self) -> bool:
        return self.counted and not self.missing

    @property
    def never_drawn(self) -> bool:
        """No case passed anything but the default (a required parameter: nothing)."""
        if not self.counted or self.treatment == "fixed":
            return False
        return OTHER not in self.seen if self.has_default else not self.seen


@dataclass(frozen=True)
class OpCoverage:
    op: str
    function: str
    cases: int
    parameters: tuple[ParameterCoverage, ...] = ()
    source: str = ""               # where the signature came from
    error: str = ""                # why the op could not be measured

    @property
    def counted(self) -> list[ParameterCoverage]:
        return [p for p in self.parameters if p.counted]

    @property
    def drawn(self) -> list[ParameterCoverage]:
        return [p for p in self.parameters if p.drawn]

    @property
    def never_drawn(self) -> list[ParameterCoverage]:
        return [p for p in self.parameters if p.never_drawn]

    @property
    def short(self) -> list[ParameterCoverage]:
        """Drawn, but not over the whole documented range."""
        return [p for p in self.parameters if p.counted and not p.drawn and not p.never_drawn]


@dataclass(frozen=True)
class Summary:
    ops: int
    parameters: int
    drawn: int
    never_drawn: int
    excluded: int
    unmeasured: tuple[str, ...] = field(default_factory=tuple)  # ops with an error

    @property
    def share(self) -> float:
        return self.drawn / self.parameters if self.parameters else 1.0


def measurable(spec: OpSpec) -> bool:
    """Whether ``spec`` is measured at all (a size-class variant, ``<op>@large``: for
    its input classes alone)."""
    return spec.family not in UNMEASURED_FAMILIES and not spec.name.startswith("opinfo:")


def measurable_ops(names: Iterable[str]) -> list[str]:
    """The ops of ``names`` whose parameters are measured (not the large family's, not
    OpInfo's: those are not looked up, building them costs seconds)."""
    return [n for n in names if not n.startswith("opinfo:") and measurable(catalogue.get(n))]


def gaps(result: OpCoverage) -> list[str]:
    """What ``result`` never draws, in words: the parameters never drawn, then the
    values of the others' documented ranges never drawn (or why it was not measured)."""
    if result.error:
        return [f"not measured: {result.error}"]
    out = []
    never = [p.name for p in result.never_drawn]
    if never:
        out.append("never drawn: " + ", ".join(never))
    short = [f"{p.name} ({', '.join(p.missing)})" for p in result.short]
    if short:
        out.append("values never drawn: " + ", ".join(short))
    return out


def _range(pub: Public, sig: Signature, param: Parameter, treatment: str, fixed_value=None) -> tuple[str, ...]:
    if treatment == "fixed":
        return tuple(sorted(labels(fixed_value, param.default) - set(WILDCARDS)))
    if param.name in pub.ranges:
        return pub.ranges[param.name]
    if treatment == "tensor":
        return ("tensor", "None") if param.default is None else ("tensor",)
    if treatment == "device":
        return ("device",)
    declared = default_ranges(sig.function, param.name, param.default)
    return declared if declared is not None else default_range(param.default, param.annotation)


def _treatment(pub: Public, param: Parameter, values: list) -> str:
    if excluded_reason(pub, param.name):
        return "excluded"
    if param.name in pub.fixed:
        return "fixed"
    if param.name == "out":
        return "out"
    if param.name == "device":
        return "device"
    if any(v is TENSOR for v in values):
        return "tensor"
    return "drawn"


def coverage_of(spec: OpSpec, cases: list[Case]) -> OpCoverage:
    """How ``cases`` of ``spec`` cover the parameters of its public function."""
    pub = public(spec.name, spec.family)
    if pub is None:
        return OpCoverage(spec.name, "?", len(cases), error="no public function: declare it in public_api.TABLE")
    try:
        sig = signature_of(pub, cases)
        calls = [call_arguments(pub, sig, case) for case in cases]
    except (SignatureUnknown, UnboundArgument, AttributeError) as exc:
        return OpCoverage(spec.name, pub.function, len(cases), error=str(exc))
    params = []
    for param in sig.parameters:
        values = [call.get(param.name, param.default) for call in calls]
        treatment = _treatment(pub, param, values)
        seen: set[str] = set()
        for value in values:
            if value is REQUIRED:
                continue   # a required parameter a case left out: reported by the seen set (empty)
            seen |= labels(value, param.default)
        expected = _range(pub, sig, param, treatment, pub.fixed.get(param.name))
        params.append(ParameterCoverage(param.name, treatment, tuple(expected), tuple(sorted(seen)),
                                        has_default=param.default is not REQUIRED,
                                        reason=excluded_reason(pub, param.name) or ""))
    return OpCoverage(spec.name, pub.function, len(cases), tuple(params), source=sig.source)


def measure(ops: Iterable[str], *, cases_per_op: int, seed: int = 0, skeletons: bool = False) -> list[OpCoverage]:
    """Draw ``cases_per_op`` cases of each op as a campaign draws them and say how they
    cover each op's parameters. ``skeletons``: draw only what the op's builders draw
    (shapes, dtypes, arguments, variant: ``strategies.example_skeletons``), not the
    layouts and values, which draw no argument and most of a case's cost."""
    return survey(ops, cases_per_op=cases_per_op, seed=seed, skeletons=skeletons, siblings_per_case=0).parameters


@dataclass(frozen=True)
class ClassCoverage:
    """The input classes of one op (a size-class variant's count for its base op)."""
    op: str
    admissible: tuple[str, ...]
    seen: tuple[str, ...]          # every class a case drew, admissible or not
    cases: int = 0                 # drawn cases and their siblings

    @property
    def drawn(self) -> tuple[str, ...]:
        return input_classes.ordered(set(self.admissible) & set(self.seen))

    @property
    def never_drawn(self) -> tuple[str, ...]:
        return input_classes.ordered(set(self.admissible) - set(self.seen))

    def merged(self, other: "ClassCoverage") -> "ClassCoverage":
        """This op's classes with those of another spec of it (its ``@large`` variant)."""
        return ClassCoverage(self.op, input_classes.ordered({*self.admissible, *other.admissible}),
                             input_classes.ordered({*self.seen, *other.seen}), self.cases + other.cases)


@dataclass(frozen=True)
class ClassSummary:
    ops: int
    admissible: int                # (op, class) pairs
    drawn: int
    by_class: tuple[tuple[str, int, int], ...] = ()   # (class, ops admitting it, ops drawing it)

    @property
    def share(self) -> float:
        return self.drawn / self.admissible if self.admissible else 1.0


@dataclass(frozen=True)
class Survey:
    parameters: list[OpCoverage]
    classes: list[ClassCoverage]


def sibling_salt(seed: int, op: str, index: int) -> int:
    """The salt of drawn case ``index``'s siblings. A campaign salts a slice's siblings
    with the slice's seed (campaign.drafts.slice_seed: a hash of the seed, op and round)
    and ``strategies.siblings`` mixes in each case's value seeds; here each drawn case
    gets a salt of its own from the same kind of hash, which spreads the boundary
    siblings alike and also where the values are not drawn (skeletons: every value seed
    0)."""
    return int(hashlib.sha1(f"{seed}:{op}:{index}".encode()).hexdigest()[:12], 16)


def campaign_families(spec: OpSpec, drawn: list[Case], *, seed: int, siblings_per_case: int) -> list[Case]:
    """``drawn`` with the siblings a campaign runs after each (boundary siblings
    included: strategies.siblings with ``boundaries=True``, whatever kinds
    strategies.BOUNDARIES holds)."""
    out = []
    for index, case in enumerate(drawn):
        out.append(case)
        if siblings_per_case:
            out += siblings(spec, case, sibling_salt(seed, spec.name, index), siblings_per_case, boundaries=True)
    return out


def classes_of(spec: OpSpec, cases: list[Case]) -> ClassCoverage:
    """Which input classes ``spec`` admits and which ``cases`` of it draw, on the row of
    its base op (a size-class variant's cases are its base op's large classes)."""
    seen: set[str] = set()
    for case in cases:
        seen |= input_classes.drawn(spec, case)
    return ClassCoverage(spec.base_name, input_classes.ordered(input_classes.admissible(spec, cases)),
                         input_classes.ordered(seen), len(cases))


def _by_base_op(results: list[ClassCoverage]) -> list[ClassCoverage]:
    """One row per base op, in the order first met: its own classes and those of its
    size-class variants."""
    rows: dict[str, ClassCoverage] = {}
    for r in results:
        rows[r.op] = rows[r.op].merged(r) if r.op in rows else r
    return list(rows.values())


def survey(ops: Iterable[str], *, cases_per_op: int, seed: int = 0, skeletons: bool = False,
           siblings_per_case: int = CAMPAIGN_SIBLINGS) -> Survey:
    """Draw ``cases_per_op`` cases of each op as a campaign draws them (and the
    ``siblings_per_case`` siblings it makes of each) and say how they cover the
    parameters of each op's public function (the drawn cases: siblings repeat their
    arguments) and the input classes it admits (the drawn cases and their siblings).
    Size-class variants (``<op>@large``, ``--large``) are measured for their classes
    alone, with as many cases as the others: a campaign's round robin gives each op
    of its selection the same share of cases (a large case takes seconds on the device
    and slows the rate of all). ``skeletons``: see :func:`measure`."""
    draw = example_skeletons if skeletons else example_cases
    parameters, classes = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in ops:
            spec = catalogue.get(name)
            if not measurable(spec):
                continue
            drawn = draw(spec, cases_per_op, seed=seed)
            if not spec.size_class:
                parameters.append(coverage_of(spec, drawn))
            family = campaign_families(spec, drawn, seed=seed, siblings_per_case=siblings_per_case)
            classes.append(classes_of(spec, family))
    return Survey(parameters, _by_base_op(classes))


def class_gaps(result: ClassCoverage) -> str:
    """One op's input classes in words: those drawn, those admissible but never drawn."""
    drawn = ", ".join(result.drawn) or "none"
    never = ", ".join(result.never_drawn) or "none"
    return f"input classes drawn: {drawn}; admissible but never drawn: {never}"


def summarise_classes(results: list[ClassCoverage]) -> ClassSummary:
    """The (op, class) pairs admissible and drawn, overall and per class."""
    by_class = tuple((name, sum(name in r.admissible for r in results), sum(name in r.drawn for r in results))
                     for name in input_classes.CLASSES)
    return ClassSummary(ops=sum(bool(r.admissible) for r in results),
                        admissible=sum(len(r.admissible) for r in results),
                        drawn=sum(len(r.drawn) for r in results),
                        by_class=tuple(row for row in by_class if row[1]))


def report_json(parameters: list[OpCoverage], classes: list[ClassCoverage]) -> dict:
    """The survey as JSON-ready data (``mpsfuzz coverage --json``)."""
    total, class_total = summarise(parameters), summarise_classes(classes)
    return {
        "parameters": {
            "ops": {r.op: {"function": r.function, "cases": r.cases, "error": r.error,
                           "never_drawn": [p.name for p in r.never_drawn],
                           "values_never_drawn": {p.name: list(p.missing) for p in r.short}}
                    for r in parameters},
            "total": {"ops": total.ops, "parameters": total.parameters, "drawn": total.drawn,
                      "never_drawn": total.never_drawn, "excluded": total.excluded, "share": total.share},
        },
        "input_classes": {
            "ops": {r.op: {"cases": r.cases, "admissible": list(r.admissible), "drawn": list(r.drawn),
                           "never_drawn": list(r.never_drawn)} for r in classes},
            "by_class": {name: {"admissible": ops, "drawn": drawn} for name, ops, drawn in class_total.by_class},
            "total": {"ops": class_total.ops, "admissible": class_total.admissible, "drawn": class_total.drawn,
                      "share": class_total.share},
        },
    }


def summarise(results: list[OpCoverage]) -> Summary:
    counted = [p for r in results for p in r.counted]
    return Summary(ops=len(results), parameters=len(counted), drawn=sum(p.drawn for p in counted),
                   never_drawn=sum(p.never_drawn for p in counted),
                   excluded=sum(not p.counted for r in results for p in r.parameters),
                   unmeasured=tuple(r.op for r in results if r.error))
