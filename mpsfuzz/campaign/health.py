"""A campaign never dies of one case; an op that keeps failing the harness is set aside.

An exception of mpsfuzz itself in generating, executing, judging, triaging or recording a
case (or in a listener) is a *harness error*: counted by stage (``count_harness``) and
reported, and the campaign goes on. :class:`OpHealth` keeps, per op, the cases attempted
and those lost to harness errors, and says when an op is to be set aside for the rest of
the run: after SET_ASIDE_STREAK harness errors in a row on its cases, or once more than
SET_ASIDE_SHARE of at least SET_ASIDE_MIN cases failed so.
"""
from __future__ import annotations

from ..events import Stats

SET_ASIDE_STREAK = 8
SET_ASIDE_MIN = 20
SET_ASIDE_SHARE = 0.5


def count_harness(stats: Stats, stage: str) -> None:
    """Count one harness error of ``stage`` in ``stats``."""
    stats.harness_errors += 1
    stats.harness_by_stage[stage] = stats.harness_by_stage.get(stage, 0) + 1


class OpHealth:
    """Per op: [cases attempted, harness errors, harness errors in a row]."""

    def __init__(self):
        self._ops: dict[str, list[int]] = {}

    def outcome(self, op: str, ok: bool, *, set_aside: bool = False) -> str | None:
        """One case of ``op`` attempted: ``ok`` unless it was lost to a harness error.
        Why ``op`` is to be set aside now, if it is (never where it is already,
        ``set_aside``)."""
        health = self._ops.setdefault(op, [0, 0, 0])
        health[0] += 1
        if ok:
            health[2] = 0
            return None
        health[1] += 1
        health[2] += 1
        attempts, errors, streak = health
        if set_aside:
            return None
        if streak >= SET_ASIDE_STREAK:
            return f"{streak} harness errors in a row"
        if errors >= SET_ASIDE_MIN and errors > SET_ASIDE_SHARE * attempts:
            return f"harness errors on {errors} of its {attempts} cases"
        return None
