"""The jury: who is wrong when the target and eager CPU disagree on values.

Eager CPU is a witness, not the truth: its kernels have bugs too, and a float64 run of
them shares those bugs. So a disagreement that the float64 rules do not dismiss (they
excuse what rounding, overflow and conditioning explain: ``float64.py``) is decided by
*jurors*, plain functions in one registry as the oracles are, one module each:

- **independent** jurors compute the result without the kernel eager CPU ran: the
  documented formula (``formula.py``), numpy (``numpy_juror.py``), each disputed element
  alone with Python's ``math``/``cmath``/mpmath (``scalar.py``), the op's decomposition
  into smaller aten ops where those differ from CPU's kernel (``decomposition.py``), a
  user kernel's declared reference (``declared.py``), and for gradients, central
  differences of numpy's forward (``finite_differences.py``). They say who is off their value:
  the target, CPU, both, or neither.
- **self** jurors read a backend against itself (``self_checks.py``): the target on
  contiguous copies or in a wider dtype agreeing with CPU shows the target wrong; CPU on
  contiguous copies or on one element at a time agreeing with the target shows CPU
  wrong. They can only accuse their own backend.
- the **float64** run gives an opinion that counts for nothing here: it is CPU's kernel.

The verdict (:func:`deliberate`): where independent jurors voted, theirs, if they agree
(``target-wrong``, ``cpu-wrong``, ``both-wrong``; all saying both sides are within
tolerance of them dismisses the failure); where they disagree, ``undecided``. Where none
applies, the self jurors decide if only one backend contradicts itself; else
``undecided``: no evidence that does not come from CPU's kernel, listed apart, never new.
Each vote keeps the reference's values at the disputed positions, which the finding,
its repro script and its issue draft show.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

# What a juror can show: "independent" (both sides), "target" (the target against
# itself), "cpu" (CPU against itself), "opinion" (shares CPU's kernel: recorded only).
WITNESSES = ("independent", "target", "cpu", "opinion")
SAYS = ("target-wrong", "cpu-wrong", "both-wrong", "both-right")
VERDICTS = ("target-wrong", "cpu-wrong", "both-wrong", "both-right", "undecided")


@dataclass(frozen=True)
class Vote:
    juror: str
    witness: str
    says: str                  # one of SAYS
    reference: str             # what the juror computed, in words
    values: list = field(default_factory=list)   # its values at the disputed positions

    def to_json(self) -> dict:
        return {"juror": self.juror, "witness": self.witness, "says": self.says,
                "reference": self.reference, "values": list(self.values)}


@dataclass(frozen=True)
class Juror:
    name: str
    witness: str
    # vote(obs, failure, ballots) -> Vote, or a string saying why it abstains
    vote: Callable
    doc: str
    # Dearer jurors (a traced decomposition) sit out once a cheaper independent one decided.
    costly: bool = False


JURORS: dict[str, Juror] = {}


def juror(name: str, *, witness: str, doc: str, costly: bool = False):
    if witness not in WITNESSES:
        raise ValueError(f"juror {name!r}: witness={witness!r} must be one of {WITNESSES}")

    def register(fn):
        JURORS[name] = Juror(name, witness, fn, doc, costly)
        return fn
    return register


def _load() -> None:
    from . import (declared, decomposition, finite_differences, formula, numpy_juror, scalar,  # noqa: F401
                   self_checks)  # (they register)


def all_jurors() -> dict[str, Juror]:
    _load()
    return dict(JURORS)


@dataclass
class Deliberation:
    verdict: str                          # one of VERDICTS
    decided_by: tuple[str, ...] = ()
    votes: list[Vote] = field(default_factory=list)
    abstained: dict[str, str] = field(default_factory=dict)   # juror -> why
    positions: list[dict] = field(default_factory=list)       # disputed positions, both sides' values
    reason: str = ""

    def to_json(self) -> dict:
        return {"verdict": self.verdict, "decided_by": list(self.decided_by),
                "votes": [v.to_json() for v in self.votes], "abstained": dict(self.abstained),
                "positions": list(self.positions), "reason": self.reason}

    def summary(self) -> str:
        """One line: the verdict and who decided it."""
        if self.verdict == "undecided":
            return f"undecided: {self.reason}"
        return f"{self.verdict} (decided by {', '.join(self.decided_by)})"

    def lines(self) -> list[str]:
        """What each juror returned at the disputed positions, for a finding's message."""
        out = [f"jury: {self.summary()}"]
        if self.positions:
            out.append("  disputed: " + "; ".join(
                f"{p['index']}: target {p['target']}, CPU {p['cpu']}" for p in self.positions))
        for v in self.votes:
            out.append(f"  {v.juror} ({v.witness}; {v.reference}): {v.says}"
                       + (f", values {v.values}" if v.values else ""))
        for name, why in self.abstained.items():
            out.append(f"  {name}: abstains ({why})")
        return out


def decide(votes: list[Vote]) -> tuple[str, tuple[str, ...], str]:
    """(verdict, the jurors that decided it, why undecided) from the votes cast."""
    independent = [v for v in votes if v.witness == "independent"]
    decisive = [v for v in independent if v.says != "both-right"]
    if decisive:
        said = {v.says for v in decisive}
        if len(said) == 1:
            return said.pop(), tuple(v.juror for v in decisive), ""
        return "undecided", (), "independent references disagree: " + ", ".join(
            f"{v.juror} says {v.says}" for v in decisive)
    if independent:
        return "both-right", tuple(v.juror for v in independent), ""
    accuse_target = [v for v in votes if v.witness == "target" and v.says == "target-wrong"]
    accuse_cpu = [v for v in votes if v.witness == "cpu" and v.says == "cpu-wrong"]
    if accuse_target and not accuse_cpu:
        return "target-wrong", tuple(v.juror for v in accuse_target), ""
    if accuse_cpu and not accuse_target:
        return "cpu-wrong", tuple(v.juror for v in accuse_cpu), ""
    if accuse_target and accuse_cpu:
        return "undecided", (), "each backend contradicts itself"
    return "undecided", (), "no independent reference for this call"


def deliberate(obs, failure, *, only=None) -> Deliberation:
    """The jury's verdict on ``failure`` (a values or grads disagreement). ``only``:
    the juror names to consult (tests); by default every registered one, dear ones
    only while no cheaper independent juror has decided."""
    from .ballots import ballots_of, disputed_positions
    ballots = ballots_of(obs, failure)
    result = Deliberation("undecided", positions=disputed_positions(ballots))
    if not ballots:
        result.reason = "no disputed position to vote on"
        return result
    jurors = [j for j in all_jurors().values() if only is None or j.name in only]
    # independent ones first (cheap before dear), then the self checks, which only
    # speak where no independent juror applies
    jurors.sort(key=lambda j: (j.witness != "independent", j.costly, j.name))
    for j in jurors:
        decided = any(v.witness == "independent" and v.says != "both-right" for v in result.votes)
        if j.witness == "independent" and j.costly and decided:
            continue
        if j.witness in ("target", "cpu") and any(v.witness == "independent" for v in result.votes):
            continue
        try:
            vote = j.vote(obs, failure, ballots)
        except Exception as exc:  # a juror's own failure: it abstains, and says why
            vote = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
        if isinstance(vote, Vote):
            result.votes.append(vote)
        elif vote:
            result.abstained[j.name] = str(vote)
    result.verdict, result.decided_by, result.reason = decide(result.votes)
    return result
