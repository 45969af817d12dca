"""How many generated cases are valid, per op: the share the CPU reference accepts.

A case the CPU rejects still tests the ``errors`` oracle, but nothing else; an op whose
shape or argument builders produce mostly rejected cases spends its budget on error
paths. This measures the share with the strategies and the reference exactly as a
campaign uses them (same ``cases`` strategy, same variants, same widened reference),
in-process and on the CPU only: no target, no workers. The reference is handed in
(``rejection``: :func:`mpsfuzz.execution.executor.reference_rejection`, which the CLI
passes), so that generation imports nothing of execution.
"""
from __future__ import annotations

import statistics
import time
import warnings
from dataclasses import dataclass
from typing import Callable

from . import catalogue
from .strategies import example_cases

# rejection(case, spec) -> why the CPU reference rejects the case (one line), or None
# where it accepts it.
Rejection = Callable[[object, object], "str | None"]

# The share every op should reach, and the floor no op may fall below (issue 3).
TARGET_SHARE = 0.70
FLOOR_SHARE = 0.30


@dataclass(frozen=True)
class OpValidity:
    op: str
    family: str
    cases: int
    valid: int
    seconds: float
    first_rejection: str = ""   # the CPU's first error message, to say why cases are invalid

    @property
    def share(self) -> float:
        return self.valid / self.cases if self.cases else 0.0


def is_valid(case, spec, rejection: Rejection) -> tuple[bool, str]:
    """Whether the CPU reference accepts ``case``, and its error message if not."""
    why = rejection(case, spec)
    return (True, "") if why is None else (False, why)


def measure(ops: list[str], *, rejection: Rejection, cases_per_op: int = 100, seed: int = 0,
            **strategy_limits) -> list[OpValidity]:
    """The valid share of ``cases_per_op`` generated cases for each op of ``ops``, as
    ``rejection`` (the CPU reference) judges them."""
    results = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in ops:
            spec = catalogue.get(op)
            start = time.perf_counter()
            drawn = example_cases(spec, cases_per_op, seed=seed, **strategy_limits)
            valid, first_rejection = 0, ""
            for case in drawn:
                ok, why = is_valid(case, spec, rejection)
                valid += ok
                first_rejection = first_rejection or why
            results.append(OpValidity(op, spec.family, len(drawn), valid,
                                      time.perf_counter() - start, first_rejection))
    return results


@dataclass(frozen=True)
class FamilyValidity:
    family: str
    ops: int
    cases: int
    valid: int
    median_share: float
    worst: OpValidity

    @property
    def share(self) -> float:
        return self.valid / self.cases if self.cases else 0.0


def by_family(results: list[OpValidity]) -> list[FamilyValidity]:
    groups: dict[str, list[OpValidity]] = {}
    for r in results:
        groups.setdefault(r.family, []).append(r)
    return [FamilyValidity(fam, len(rs), sum(r.cases for r in rs), sum(r.valid for r in rs),
                           statistics.median(r.share for r in rs), min(rs, key=lambda r: r.share))
            for fam, rs in sorted(groups.items())]
