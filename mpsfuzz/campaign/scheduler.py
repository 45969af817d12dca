"""Which op to fuzz next: round-robin (``mpsfuzz run``) or by yield (the daemon).

An unattended daemon has days, not minutes, and most ops stop producing anything new
after a while: spending the same time on each wastes most of it. :class:`YieldScheduler`
gives each op picks in proportion to its *yield*, (new findings x ``finding_weight`` +
new behaviours) per second of fuzzing that op, smoothed two ways:

- a prior (``prior_gain`` over ``prior_seconds``: 1 per second by default) is added to
  every op's statistics, so an op with no data looks promising until tried, and one
  lucky slice does not dominate;
- the statistics decay with the op's own fuzzing time (``half_life_s``), so an op that
  was productive once and has gone dry loses its picks, and one that starts producing
  (a new torch, a new strategy) gains them back.

A share ``explore`` of the picks is uniform over all ops whatever their yield: no op
ever starves (each gets at least ``explore / len(ops)`` of the picks in expectation),
which is also how a dry op gets the chance to show it produces again.

Both schedulers have the same interface (``next_op``, ``record``, ``stats``,
``to_json``, ``from_json``) and are deterministic for a given seed and history. The JSON
is what the daemon keeps in its state file (corpus/daemon_state.py sums its per-op
``cases``, ``seconds``, ``findings`` and ``behaviours`` when shards merge; the smoothed
statistics are rebuilt from those when missing).
"""
from __future__ import annotations

import random

SCHEDULER_VERSION = 1


def _check_ops(ops) -> tuple[str, ...]:
    ops = tuple(dict.fromkeys(ops))
    if not ops or not all(isinstance(op, str) and op for op in ops):
        raise ValueError(f"ops={list(ops)!r}: expected one or more op names")
    return ops


def _check_record(op, known, *, cases, seconds, new_findings, new_behaviours) -> None:
    if op not in known:
        raise ValueError(f"op={op!r}: not one of the scheduled ops")
    for name, value in (("cases", cases), ("new_findings", new_findings), ("new_behaviours", new_behaviours)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name}={value!r}: expected an integer >= 0")
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not seconds >= 0:
        raise ValueError(f"seconds={seconds!r}: expected a number >= 0")


def _add_totals(stats: dict, op: str, *, cases: int, seconds: float, new_findings: int,
                new_behaviours: int) -> "OpStats":
    """Check a slice's record and add it to ``op``'s totals; its OpStats."""
    _check_record(op, stats, cases=cases, seconds=seconds, new_findings=new_findings, new_behaviours=new_behaviours)
    s = stats[op]
    s.cases += cases
    s.seconds += seconds
    s.findings += new_findings
    s.behaviours += new_behaviours
    return s


class OpStats:
    """One op's totals (these add up across shards) and its decayed statistics."""

    __slots__ = ("cases", "seconds", "findings", "behaviours", "recent_gain", "recent_seconds")

    def __init__(self, cases=0, seconds=0.0, findings=0, behaviours=0, recent_gain=None, recent_seconds=None):
        self.cases, self.seconds, self.findings, self.behaviours = cases, float(seconds), findings, behaviours
        # Missing (a merged state, an older file): the totals stand in.
        self.recent_gain = recent_gain
        self.recent_seconds = float(seconds) if recent_seconds is None else float(recent_seconds)

    def to_json(self) -> dict:
        # Not rounded: a restored scheduler picks exactly as the saved one would have.
        return {"cases": self.cases, "seconds": self.seconds, "findings": self.findings,
                "behaviours": self.behaviours, "recent_gain": self.recent_gain or 0.0,
                "recent_seconds": self.recent_seconds}

    @classmethod
    def from_json(cls, d: dict, *, finding_weight: float) -> "OpStats":
        if not isinstance(d, dict):
            raise ValueError(f"op statistics={d!r}: expected an object")
        try:
            stats = cls(int(d.get("cases", 0)), float(d.get("seconds", 0.0)), int(d.get("findings", 0)),
                        int(d.get("behaviours", 0)),
                        None if d.get("recent_gain") is None else float(d["recent_gain"]),
                        None if d.get("recent_seconds") is None else float(d["recent_seconds"]))
        except (TypeError, ValueError):
            raise ValueError(f"op statistics={d!r}: expected numbers") from None
        if stats.recent_gain is None:
            stats.recent_gain = float(stats.findings * finding_weight + stats.behaviours)
        return stats


class RoundRobin:
    """Each op in turn (``mpsfuzz run``'s order): fair and predictable, blind to yield.
    ``record`` only keeps the totals, for ``stats``."""

    kind = "round-robin"

    def __init__(self, ops, *, state: dict | None = None):
        self.ops = _check_ops(ops)
        self._stats = {op: OpStats() for op in self.ops}
        self._next = 0                    # index into ops of the next op to try
        self._last: str | None = None     # saved by name: the ops may differ when restored
        if state is not None:
            self._restore(state)

    def next_op(self, *, exclude=()) -> str:
        """The next op in turn, skipping ``exclude`` (ops set aside); ValueError where
        every op is excluded."""
        for _ in range(len(self.ops)):
            op = self.ops[self._next % len(self.ops)]
            self._next = (self._next + 1) % len(self.ops)
            if op not in exclude:
                self._last = op
                return op
        raise ValueError(f"exclude={sorted(exclude)!r}: every op is excluded")

    def record(self, op: str, *, cases: int, seconds: float, new_findings: int, new_behaviours: int) -> None:
        _add_totals(self._stats, op, cases=cases, seconds=seconds, new_findings=new_findings,
                    new_behaviours=new_behaviours)

    def stats(self) -> dict[str, dict]:
        return {op: {"cases": s.cases, "seconds": s.seconds, "findings": s.findings, "behaviours": s.behaviours,
                     "yield": (s.findings + s.behaviours) / s.seconds if s.seconds else 0.0}
                for op, s in self._stats.items()}

    def to_json(self) -> dict:
        return {"kind": self.kind, "version": SCHEDULER_VERSION, "last": self._last,
                "ops": {op: s.to_json() for op, s in self._stats.items()}}

    @classmethod
    def from_json(cls, data: dict, ops) -> "RoundRobin":
        return cls(ops, state=data)

    def _restore(self, data) -> None:
        _check_kind(data, self.kind)
        for op, row in data.get("ops", {}).items():
            if op in self._stats:
                self._stats[op] = OpStats.from_json(row, finding_weight=1.0)
        last = data.get("last")
        if last in self.ops:  # goes on after it (an op gone since: from the first)
            self._last, self._next = last, (self.ops.index(last) + 1) % len(self.ops)


def _check_kind(data, kind: str) -> None:
    if not isinstance(data, dict):
        raise ValueError(f"scheduler state={data!r}: expected an object")
    if data.get("kind") != kind:
        raise ValueError(f"scheduler kind={data.get('kind')!r}: expected {kind!r}")
    if data.get("version") != SCHEDULER_VERSION:
        raise ValueError(f"scheduler version={data.get('version')!r}: this mpsfuzz reads {SCHEDULER_VERSION}")
    if not isinstance(data.get("ops", {}), dict):
        raise ValueError(f"scheduler ops={data.get('ops')!r}: expected an object")


class YieldScheduler:
    """Picks ops by smoothed yield, with a share ``explore`` of uniform picks (see the
    module docstring). ``state``: a ``to_json()`` to go on from (ops added to the
    catalogue since are added with no data, ops gone are dropped)."""

    kind = "yield"

    def __init__(self, ops, *, explore: float = 0.2, seed: int = 0, state: dict | None = None,
                 finding_weight: float = 10.0, half_life_s: float = 600.0, prior_gain: float = 1.0,
                 prior_seconds: float = 1.0):
        self.ops = _check_ops(ops)
        if not isinstance(explore, (int, float)) or not 0 < explore <= 1:
            raise ValueError(f"explore={explore!r}: expected a share in (0, 1] (0 would let ops starve)")
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ValueError(f"seed={seed!r}: expected an integer")
        for name, value in (("finding_weight", finding_weight), ("half_life_s", half_life_s),
                            ("prior_gain", prior_gain), ("prior_seconds", prior_seconds)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise ValueError(f"{name}={value!r}: expected a number > 0")
        self.explore, self.seed = float(explore), seed
        self.finding_weight, self.half_life_s = float(finding_weight), float(half_life_s)
        self.prior_gain, self.prior_seconds = float(prior_gain), float(prior_seconds)
        self._stats = {op: OpStats(recent_gain=0.0) for op in self.ops}
        self.picks = 0
        if state is not None:
            self._restore(state)

    # -- picking -----------------------------------------------------------------------
    def yield_of(self, op: str) -> float:
        """(weighted new findings + new behaviours) per second, smoothed by the prior."""
        s = self._stats[op]
        return (s.recent_gain + self.prior_gain) / (s.recent_seconds + self.prior_seconds)

    def next_op(self, *, exclude=()) -> str:
        """An op: uniformly at random with probability ``explore``, else in proportion
        to its yield; never one of ``exclude`` (ops set aside); ValueError where every
        op is excluded."""
        choices = [op for op in self.ops if op not in exclude]
        if not choices:
            raise ValueError(f"exclude={sorted(exclude)!r}: every op is excluded")
        # A generator per pick, seeded by (seed, pick number): a restored scheduler picks
        # exactly as the saved one would have, without the generator's 2.5 kB state in
        # the state file (a pick is once per slice: the seeding costs nothing).
        rng = random.Random(f"{self.seed}:{self.picks}")
        self.picks += 1
        if rng.random() < self.explore:
            return rng.choice(choices)
        return rng.choices(choices, weights=[self.yield_of(op) for op in choices])[0]

    def record(self, op: str, *, cases: int, seconds: float, new_findings: int, new_behaviours: int) -> None:
        """What a slice of ``op`` produced in ``seconds`` of fuzzing (new findings, not
        sightings; behaviours never seen before, behaviour.py)."""
        s = _add_totals(self._stats, op, cases=cases, seconds=seconds, new_findings=new_findings,
                        new_behaviours=new_behaviours)
        keep = 0.5 ** (seconds / self.half_life_s)
        s.recent_gain = s.recent_gain * keep + new_findings * self.finding_weight + new_behaviours
        s.recent_seconds = s.recent_seconds * keep + seconds

    # -- display and persistence -------------------------------------------------------
    def stats(self) -> dict[str, dict]:
        """Per op: cases, seconds, findings, behaviours (totals) and the smoothed yield."""
        return {op: {"cases": s.cases, "seconds": s.seconds, "findings": s.findings, "behaviours": s.behaviours,
                     "yield": self.yield_of(op)} for op, s in self._stats.items()}

    def to_json(self) -> dict:
        return {"kind": self.kind, "version": SCHEDULER_VERSION, "seed": self.seed, "explore": self.explore,
                "finding_weight": self.finding_weight, "half_life_s": self.half_life_s,
                "prior_gain": self.prior_gain, "prior_seconds": self.prior_seconds, "picks": self.picks,
                "ops": {op: s.to_json() for op, s in self._stats.items()}}

    @classmethod
    def from_json(cls, data: dict, ops) -> "YieldScheduler":
        """The scheduler ``to_json`` saved, over today's ``ops``. ValueError (naming the
        bad field) where ``data`` is not a yield scheduler's state."""
        _check_kind(data, cls.kind)
        settings = {name: data[name] for name in ("explore", "seed", "finding_weight", "half_life_s",
                                                   "prior_gain", "prior_seconds") if name in data}
        return cls(ops, state=data, **settings)

    def _restore(self, data) -> None:
        _check_kind(data, self.kind)
        for op, row in data.get("ops", {}).items():
            if op in self._stats:
                self._stats[op] = OpStats.from_json(row, finding_weight=self.finding_weight)
        picks = data.get("picks", 0)
        if not isinstance(picks, int) or picks < 0:
            raise ValueError(f"scheduler picks={picks!r}: expected an integer >= 0")
        self.picks = picks
