"""Oracles: plain check functions in one registry, enabled by name (``--oracles``).

A check returns ``None`` (pass) or a :class:`Failure` with a title, a severity and an
explicit deduplication key. ``case`` checks run inside the worker on an
:class:`~mpsfuzz.oracles.observation.Observation` (both sides' outputs or errors);
``process`` checks run in the supervisor when a worker dies or stops answering.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

# A shape or size list in an error message once its numbers are masked ("[N, N, N]",
# "[]"): one cause raises with every rank (isclose with equal_nan=True, whose 0-d result
# cannot take the broadcast shape, gave eleven records on an H100 run, one per rank).
_SHAPE_LISTS = re.compile(r"[\[(](?:N, )*N[\])]|\[\]")


def collapse_shapes(text: str) -> str:
    """``text`` (a masked error message) with each shape list written ``[shape]``."""
    return _SHAPE_LISTS.sub("[shape]", text)


@dataclass(frozen=True)
class Failure:
    oracle: str
    kind: str              # e.g. wrong-values, dut-raises, ref-raises, crash, hang
    title: str             # one line, upstream style
    message: str           # full detail (assert_close layout for values)
    severity: str          # critical (crash/hang), high (silent wrong values), medium
    dedup_key: tuple[str, ...] = ()
    details: dict = field(default_factory=dict)
    # Whose bug it is: "target" (the device under test), "cpu" (the reference is the
    # one that is wrong, as the jury decided), "both" (the target and eager CPU alike: a
    # bug of PyTorch itself), "undecided" (no evidence that does not come from CPU's
    # kernel says who) or "capability" (nobody's: the device does what CPU cannot); all
    # but the first are kept apart from the target's bugs.
    blame: str = "target"

    def to_json(self) -> dict:
        return {"oracle": self.oracle, "kind": self.kind, "title": self.title,
                "message": self.message, "severity": self.severity,
                "dedup_key": list(self.dedup_key), "details": self.details, "blame": self.blame}

    @classmethod
    def from_json(cls, d: dict) -> "Failure":
        return cls(oracle=d["oracle"], kind=d["kind"], title=d["title"], message=d["message"],
                   severity=d["severity"],
                   # keys written before shape lists were collapsed, or with the form
                   # of a FORM_FREE failure, read as they are written now
                   # and a heap corruption recorded under its frames, by its kind
                   dedup_key=heap_keyed(d["oracle"], d["message"],
                                        harness_free(d["oracle"], form_keyed(d["oracle"], d["kind"],
                                                     tuple(collapse_shapes(k) if isinstance(k, str) else k
                                                           for k in d.get("dedup_key", ()))))),
                   details=dict(d.get("details", {})),
                   # a memory format recorded as a finding before 2026-11-27 reads as the
                   # note it is now (layout propagation: no bug to file)
                   blame="note" if (d["oracle"], d["kind"]) == ("metadata", "wrong-memory-format")
                   else str(d.get("blame", "target")))


# Failures whose dedup key leaves out the form of the call (out=, in place, method): an
# input modified can happen in any form, the functional one included, so the form is a
# trigger feature the reducer and ablation test like the layout (an H200 run filed CUDA's
# eig overwriting a transposed input as seven findings, one per form and op). Until
# 2026-11-27 the key held the form: keys read from a corpus are cut the same way, so an
# old finding still matches its bug.
FORM_FREE = frozenset({("variants", "input-modified")})


def form_keyed(oracle_name: str, kind: str, key: tuple) -> tuple:
    """``key`` (the kind first, then the form) without the form where FORM_FREE says."""
    return key[:1] if (oracle_name, kind) in FORM_FREE else key


# The files of mpsfuzz's own harness around an op call, and of the worker process's
# start, as a crash's cleaned frames name them (``file.py:function``): they tell how
# the worker called the op, not where it crashed. On an H200 (docs/real-findings.md), one SIGFPE of CUDA's
# SDPA on empty inputs was filed twice, its second frame ``executor.py:forward_backward``
# (the grad variant) in one and ``targets.py:run`` in the other. Until 2026-11-27 crash
# keys held these frames: keys read from a corpus drop them the same way.
HARNESS_FILES = frozenset({"executor.py", "targets.py", "worker.py", "judge.py", "process.py", "spawn.py",
                           "forkserver.py", "<string>"})
# The test targets' ``run``, the wrapper targets.py's own targets have: a crash of eager
# CPU inside the fault target (the target is eager CPU there) named it, and the same
# crash met in the CPU reference did not, so one bug was filed twice (triu into out= of
# its own negative view, a heap corruption). Their other frames stay: a fault's own
# effect is where it crashes.
HARNESS_FRAMES = frozenset({"faults.py:run", "cpu_faults.py:run", "chaos.py:run", "slow.py:run"})


# A heap corruption: the allocator found its bookkeeping damaged (glibc's malloc_printerr,
# macOS's malloc) and aborted. It aborts wherever the heap is next used, not where it was
# damaged, so its frames differ from run to run: eager CPU's triu into out= of its own
# permuted negative view (torch 2.13, "free(): invalid next size (fast)") was filed under
# several crash keys. Such a crash keys on this kind and the op (symptom_key), not frames.
HEAP_CORRUPTION = "heap-corruption"
_HEAP_MESSAGES = re.compile(
    # glibc (malloc_printerr's messages): "free(): invalid next size (fast)", "malloc():
    # corrupted top size", "munmap_chunk(): invalid pointer", "double free or corruption
    # (out)", "tcache_thread_shutdown(): unaligned tcache chunk detected", ...; and the one
    # without a function's name, "invalid fastbin entry (free)" (a real heap corruption's
    # abort that this list had missed was keyed by its frames: one bug, two findings)
    r"\b(?:free|malloc|realloc|calloc|munmap_chunk|mremap_chunk|malloc_consolidate|tcache_thread_shutdown|"
    r"_int_free|_int_malloc|_int_realloc)"
    r"\(\): [^\n]*|double free or corruption[^\n]*|corrupted size vs\. prev_size[^\n]*|"
    r"corrupted double-linked list[^\n]*|invalid fastbin entry[^\n]*|"
    # macOS malloc: "malloc: *** error for object 0x...: pointer being freed was not
    # allocated", "Incorrect checksum for freed object", "Heap corruption detected"
    r"pointer being (?:freed|realloc'd) was not allocated|Incorrect checksum for freed object|"
    r"Heap corruption detected[^\n]*")


def heap_corruption(stderr_tail: str) -> str | None:
    """The allocator's message where ``stderr_tail`` shows a heap corruption (addresses
    masked), else None."""
    found = _HEAP_MESSAGES.search(stderr_tail or "")
    return re.sub(r"0x[0-9a-fA-F]+", "0xN", found.group(0).strip()) if found else None


def heap_keyed(oracle_name: str, message: str, key: tuple) -> tuple:
    """A crash's key read from a corpus: ``(crash, heap-corruption)`` where its message
    (the stderr it recorded) shows a heap corruption, as check_crash keys one now."""
    if oracle_name == "crash" and len(key) > 1 and key[1] != HEAP_CORRUPTION and heap_corruption(message):
        return ("crash", HEAP_CORRUPTION)
    return key


def is_harness_frame(frame: str) -> bool:
    return frame.rsplit(":", 1)[0] in HARNESS_FILES or frame in HARNESS_FRAMES


def harness_free(oracle_name: str, key: tuple) -> tuple:
    """A crash's dedup key (kind, signal, frames...) without the harness's frames."""
    if oracle_name != "crash" or len(key) < 2:
        return key
    return key[:2] + tuple(k for k in key[2:] if not (isinstance(k, str) and is_harness_frame(k)))


def symptom_key(case, failure: Failure) -> tuple:
    """What a failure looks like, without what triggers it: op, oracle and the oracle's
    dedup key (crashes: the signal and cleaned top frames; hangs and leaks: the target).
    How the op was called (method, out=, in-place, grad) is a trigger feature like the
    layout, found necessary or not by ablation. The reducer keeps a case only while its
    failure has the same symptom. (``case``: a :class:`~mpsfuzz.generation.recipes.Case`.)"""
    return (case.op, failure.oracle, *failure.dedup_key)


@dataclass(frozen=True)
class Oracle:
    name: str
    # "case": check(observation) in the worker; "verdict": check(observation, failure)
    # after the case checks, returning the failure confirmed, re-attributed or None
    # (dismissed); "process": check(process_event) in the supervisor.
    stage: str
    check: Callable
    doc: str


ORACLES: dict[str, Oracle] = {}


def oracle(name: str, *, stage: str, doc: str):
    def register(fn):
        ORACLES[name] = Oracle(name, stage, fn, doc)
        return fn
    return register


def _load() -> None:
    from . import (arbiter, distribution, errors, grads, layout, leak, metadata,  # noqa: F401
                   process, values, variants)  # (they register)


def all_oracles() -> dict[str, Oracle]:
    _load()
    return dict(ORACLES)


def worker_oracles(names) -> tuple[str, ...]:
    """Those of ``names`` that run in the worker: the case checks and the verdicts on
    their failures (the float64 arbiter). Process checks run in the supervisor."""
    oracles = all_oracles()
    return tuple(n for n in names if oracles[n].stage in ("case", "verdict"))


DEFAULT = ("values", "metadata", "grads", "variants", "layout", "distribution", "errors", "leak",
           "arbiter", "crash", "hang")


def select(names: str | None) -> tuple[str, ...]:
    known = all_oracles()
    if not names:
        return DEFAULT
    chosen = tuple(n.strip() for n in names.split(",") if n.strip())
    unknown = [n for n in chosen if n not in known]
    if unknown or not chosen:
        raise ValueError(f"--oracles: unknown oracle {', '.join(unknown) or '(empty)'}; "
                         f"available: {', '.join(sorted(known))}")
    return chosen
