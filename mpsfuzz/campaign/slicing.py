"""How many cases each slice gets: a time budget covers every selected op.

A slice is one op's turn: a seeded Hypothesis run of a few cases. With a fixed size
(``--slice N``) a budget too short for one round over the selection tries the first ops
only: a 90 s run over the 68 linalg ops on a target that runs a case a second (Inductor
compiles each) tried three of them and said "no findings" (issue 37, point 4). So where a
run has a budget and no ``--slice``, :class:`SliceSizer` sizes each slice from the rest of
the budget, the ops still to be visited in this round and the case rate measured so far:
the round is planned to end at PLAN_SHARE of the time left (the rate falls as triage
takes its share of the cores), between one case and ``most`` a slice. Before any case
has been judged (no rate yet), slices hold one drawn case.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

# The largest slice (and the size of every slice of a run without a budget, or of a
# round the budget covers many times over): a few dozen cases per turn, so that
# Hypothesis explores an op a while before moving on.
MOST = 30
# The share of the time left a round is planned to take.
PLAN_SHARE = 0.6


@dataclass(frozen=True)
class SliceSizer:
    """``fixed``: every slice has this many cases (``--slice``); else, with
    ``budget_s``, slices are sized by :meth:`cases`; without a budget, ``most``."""
    fixed: int | None = None
    budget_s: float | None = None
    most: int = MOST

    def __post_init__(self):
        if self.fixed is not None and self.fixed < 1:
            raise ValueError(f"fixed={self.fixed!r}: a slice holds at least one case")
        if self.most < 1:
            raise ValueError(f"most={self.most!r}: a slice holds at least one case")

    @property
    def adaptive(self) -> bool:
        return self.fixed is None and self.budget_s is not None

    def cases(self, *, ops_left_in_round: int, seconds_left: float, cases_per_s: float | None) -> int:
        """The size of the next slice: the cases the rest of the budget holds at the
        measured rate, shared among the ``ops_left_in_round`` ops (this one included)
        still to have their turn in this round."""
        if self.fixed is not None:
            return self.fixed
        if self.budget_s is None:
            return self.most
        if cases_per_s is None or cases_per_s <= 0:
            return 1
        share = cases_per_s * PLAN_SHARE * max(0.0, seconds_left) / max(1, ops_left_in_round)
        return max(1, min(self.most, math.floor(share)))
