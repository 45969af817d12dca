"""The op catalogue: every op spec, looked up by name or family.

The specs themselves (:class:`~mpsfuzz.generation.opspec.OpSpec`: how to call an op,
which dtypes, shapes and values it takes, how to judge it) are built in
:mod:`mpsfuzz.generation.ops` (and :mod:`mpsfuzz.generation.opinfo`, on request) from
:mod:`mpsfuzz.generation.opspec`; this module loads them and answers ``--ops``. Nothing
else knows op names.
"""
from __future__ import annotations

import hashlib
import threading

from .opspec import REGISTRY, OpSpec

_LOADED = False
_LOADING = False
# Threads of one process (a lane's drafting and its desk) may look ops up at once: the
# registry is filled under the lock, and a second thread waits until it is whole rather
# than reading a half-filled one (a KeyError for a real op).
_LOAD_LOCK = threading.RLock()
LARGE_FAMILY = "large"


def _load() -> None:
    global _LOADED, _LOADING
    if not _LOADED:
        with _LOAD_LOCK:
            # (_LOADING: the op modules' own lookups while they register, in the loading
            # thread, see the registry as it stands.)
            if not _LOADED and not _LOADING:
                _LOADING = True
                try:
                    from .ops import (cast, elementwise, factory, fft, indexing, large, large_rows,  # (they register)
                                      linalg, nn, nn_losses, programs, random, reduction)
                    _register_size_classes()
                    _LOADED = True
                finally:
                    _LOADING = False
    # Users' kernel files named in the installed GenerationSettings (``run --kernels``),
    # in whatever process looks an op up: workers, drafters and repro checks are started
    # elsewhere and handed the settings. Looked at on every call (a tuple compared): a
    # forkserver may have loaded the catalogue before the settings were installed.
    from . import kernels
    kernels.load_installed()


def _register_size_classes() -> None:
    """Every op that declares dims that may grow joins the large size class."""
    from .large_sizes import huge_variant, large_variant
    for spec in [s for s in REGISTRY.values() if s.grows and not s.size_class]:
        for variant in (large_variant(spec), huge_variant(spec)):
            if variant is not None:
                REGISTRY.setdefault(variant.name, variant)


def all_ops() -> dict[str, OpSpec]:
    _load()
    return dict(REGISTRY)


def families() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for spec in all_ops().values():
        if not spec.size_class:         # (the large class is named apart: large_class())
            out.setdefault(spec.family, []).append(spec.name)
    return {k: sorted(v) for k, v in sorted(out.items())}


def get(name: str) -> OpSpec:
    # (No copy of the registry: a worker looks an op up for every case.)
    _load()
    spec = REGISTRY.get(name)
    if spec is None and name.startswith("opinfo:"):
        # OpInfo specs are built on request only (importing torch's test database costs
        # seconds): a worker asked for one builds it here.
        from . import opinfo
        spec = REGISTRY.setdefault(name, opinfo.spec(name))  # KeyError if unknown/unavailable
    if spec is None:
        raise KeyError(name)
    return spec


class UnknownOpError(ValueError):
    pass


def large_class(ops: list[str]) -> list[str]:
    """The large size class of ``ops`` (``--large``): each one's ``@large`` variant, where
    it declares dims that may grow, and ``@huge`` (past 2^31 elements), where it declares
    rows that are sliced."""
    from .large_sizes import SUFFIXES
    registry = all_ops()
    return [v for op in ops for v in (op + suffix for suffix in SUFFIXES) if v in registry]


def select(selection: str) -> list[str]:
    """Resolve ``--ops``: ``all``, a family, an op name, or a comma list of these. The
    large sizes (the ``large`` family, an op's ``@large`` variant) only where named:
    ``--large`` adds them (:func:`large_class`)."""
    ops, fams = all_ops(), families()
    chosen: list[str] = []
    for item in (s.strip() for s in selection.split(",")):
        if not item:
            continue
        if item == "all":
            # Every family but the large sizes (seconds a case, on a device with the
            # memory): `run --large` or `--ops large` asks for those.
            names = sorted(n for n, spec in ops.items() if spec.family != LARGE_FAMILY and not spec.size_class)
        elif item in fams:
            names = fams[item]
        elif item in ops:
            names = [item]
        elif item == "opinfo" or item.startswith("opinfo:"):
            from . import opinfo
            try:
                found = opinfo.resolve(item, {n for n in REGISTRY if not n.startswith("opinfo:")})
            except LookupError as exc:
                raise UnknownOpError(f"--ops: {exc}") from None
            names = [REGISTRY.setdefault(s.name, s).name for s in found]
        else:
            raise UnknownOpError(
                f"--ops: {item!r} is neither a family ({', '.join(fams)}), an op, nor 'all'; "
                "'mpsfuzz ops' lists them")
        chosen += [n for n in names if n not in chosen]
    if not chosen:
        raise UnknownOpError("--ops: the selection is empty")
    return chosen


def shard(ops: list[str], index: int, count: int) -> list[str]:
    """``--shard K/N``: the ops of shard ``index`` (1-based) of ``count``, in the order given.

    Every op lands in exactly one shard, chosen by a stable hash of its name (SHA-1, not
    Python's ``hash``, which changes with ``PYTHONHASHSEED``): the split is the same on every
    machine and run whatever the order of ``ops``, and adding an op to the catalogue moves
    no other op. Shards are equal in size only on average: a small selection can leave a
    shard empty (the CLI says so).
    """
    if not 1 <= index <= count:
        raise ValueError(f"--shard={index}/{count}: expected K/N with 1 <= K <= N")
    return [op for op in ops if shard_of(op, count) == index]


def shard_of(op: str, count: int) -> int:
    """The shard (1-based, of ``count``) that ``op`` belongs to."""
    if count < 1:
        raise ValueError(f"--shard=?/{count}: the number of shards must be >= 1")
    return int.from_bytes(hashlib.sha1(op.encode()).digest()[:8], "big") % count + 1
