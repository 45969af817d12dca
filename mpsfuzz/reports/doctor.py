"""`mpsfuzz doctor`: what this machine can test, in one screen.

Every probe is guarded: doctor reports what fails ("cuda: not available (...)") and
never fails itself. The checks are plain functions returning (label, value) rows, so
the CLI prints them and tests read them.
"""
from __future__ import annotations

import platform
import sys
from pathlib import Path

import torch

from .. import __version__
from ..corpus.store import Corpus
from ..execution import cpu_kernels
from ..execution.targets import BUILTIN, best_available
from ..generation import dtypes as dt
from ..generation import opinfo

GIB = 1 << 30


def _guarded(probe, *args) -> str:
    try:
        return probe(*args)
    except Exception as exc:  # doctor reports a failing probe, it never fails
        return f"unknown ({type(exc).__name__}: {str(exc).strip().splitlines()[0][:120] if str(exc).strip() else ''})"


def torch_build() -> str:
    parts = [f"torch {torch.__version__}"]
    if torch.version.cuda:
        parts.append(f"CUDA {torch.version.cuda}")
    mps = getattr(torch.backends, "mps", None)
    parts.append("MPS built" if mps is not None and mps.is_built() else "no MPS")
    if getattr(torch.version, "debug", False):
        parts.append("debug build")
    git = getattr(torch.version, "git_version", "")
    if git:
        parts.append(f"git {git[:10]}")
    return ", ".join(parts)


def system() -> str:
    words = f"Python {platform.python_version()}, {platform.system()} {platform.release()} {platform.machine()}"
    mac = platform.mac_ver()[0]
    return words + (f", macOS {mac}" if mac else "")


def _device_words(device: str) -> str:
    kind = torch.device(device).type
    if kind == "cuda":
        free, total = torch.cuda.mem_get_info()
        return f"{torch.cuda.get_device_name()}, {free / GIB:.1f} of {total / GIB:.1f} GiB free"
    if kind == "mps":
        return f"Apple GPU, recommended max memory {torch.mps.recommended_max_memory() / GIB:.1f} GiB"
    import psutil
    return f"CPU ({psutil.cpu_count()} cores), {psutil.virtual_memory().available / GIB:.1f} GiB free"


def targets() -> list[tuple[str, str]]:
    """Each built-in target: available (with its device) or not; the one `run` picks."""
    chosen = _guarded(best_available)
    rows = []
    for name, make in BUILTIN.items():
        def probe(make=make):
            target = make()
            if not target.is_available():
                return "not available here"
            return f"available: {_device_words(str(target.device))}"
        words = _guarded(probe)
        rows.append((name, words + ("  <- `mpsfuzz run` tests this one" if name == chosen else "")))
    return rows


def device_lacks(device: str) -> list[str]:
    """Dtypes the device cannot hold: no tensor of them there, or none that comes back
    (MPS has no float64 or complex128)."""
    import warnings
    missing = []
    for name in dt.ALL_DTYPE_NAMES:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")   # complex32 is "experimental"
                torch.ones(2, dtype=dt.to_torch(name), device=device).to("cpu")
        except Exception:
            missing.append(name)
    return missing


# A dtype lacks a kernel when the widest dtype of its class has it: complex numbers have
# no ``lt`` anywhere, uint32 lacks it only where int64 has one.
_CLASS_WIDEST = {"float": "float64", "complex": "complex128", "integral": "int64", "bool": "bool"}


def cpu_lacks() -> str:
    lacking = {}
    for name in dt.ALL_DTYPE_NAMES:
        widest = _CLASS_WIDEST.get(dt.dtype_class(name), name)
        lacking[name] = sorted(cpu_kernels.lacking(name) - cpu_kernels.lacking(widest))
    words = [f"{name} ({', '.join(kernels)})" for name, kernels in lacking.items() if kernels]
    return ("; ".join(words) + ": cases that need them are 'unsupported here'") if words else "nothing mpsfuzz needs"


def corpus_words(path: Path) -> str:
    if not path.exists():
        return f"{path}: none yet (`mpsfuzz run` creates it)"
    found, problems = Corpus(path).load()
    new = sum(f.status == "new" for _, f in found)
    words = f"{path}: {len(found)} finding(s), {new} new"
    return words + (f", {len(problems)} unreadable file(s)" if problems else "")


def rows(corpus: Path) -> list[tuple[str, str]]:
    """Everything doctor says, as (label, value) rows."""
    chosen = _guarded(best_available)
    device = str(BUILTIN[chosen]().device) if chosen in BUILTIN else "cpu"
    out = [("mpsfuzz", f"{__version__} ({Path(__file__).resolve().parents[1]})"),
           ("torch", _guarded(torch_build)),
           ("system", _guarded(system))]
    out += [(f"target {name}", words) for name, words in targets()]
    lacks = _guarded(device_lacks, device)
    out.append((f"dtypes {device} cannot hold", ", ".join(lacks) if isinstance(lacks, list) and lacks
                else (lacks if isinstance(lacks, str) else "none: every dtype mpsfuzz draws")))
    out.append(("CPU reference lacks", _guarded(cpu_lacks)))
    ok, why = opinfo.available()
    out.append(("OpInfo database", "imports (`--ops opinfo` works)" if ok else f"not available: {why}"))
    out.append(("corpus", _guarded(corpus_words, corpus)))
    out.append(("interpreter", sys.executable))
    return out
