"""Which elementary kernels the installed eager CPU lacks, per dtype (probed once per
process, cached).

mpsfuzz's own code runs small CPU ops on every case: comparisons in the oracles,
canonicalisers that gather what an index points at, ablation's checks. Which dtypes
those kernels cover depends on the torch version: torch 2.13's CPU has no ``lt`` for
uint16/32/64, torch 2.11's has no ``where`` for them either, and older versions lack
more. Where mpsfuzz's own processing of a case meets a kernel this CPU lacks, the case
cannot be judged *here*: it is counted as ``unsupported here`` (this torch, not the
target, is the limit), never as an internal error that kills a campaign.
"""
from __future__ import annotations

import functools

import torch

from ..generation import dtypes as dt

# The kernels mpsfuzz's own code (not the op under test) calls on case tensors, each
# probed on a tiny tensor of the dtype.
_PROBES = {
    "eq": lambda t: t == t,
    "ne": lambda t: t != t,
    "lt": lambda t: t < t,
    "where": lambda t: torch.where(torch.ones(t.shape, dtype=torch.bool), t, t),
    "abs": lambda t: t.abs(),
    "sub": lambda t: t - t,
    "max": lambda t: t.max(),
    "sort": lambda t: t.sort(),
    "gather": lambda t: t.gather(0, torch.zeros(1, dtype=torch.int64)),
    "index_select": lambda t: t.index_select(0, torch.zeros(1, dtype=torch.int64)),
    "masked_fill": lambda t: t.masked_fill(torch.zeros(t.shape, dtype=torch.bool), 0),
    "nonzero": lambda t: t.nonzero(),
    "to_float64": lambda t: t.to(torch.complex128 if t.is_complex() else torch.float64),
}


def _sample(dtype_name: str) -> torch.Tensor:
    base = torch.tensor([1, 2, 3], dtype=torch.int64)
    if dtype_name in dt.COMPLEX:
        return base.to(torch.complex64).to(dt.to_torch(dtype_name))
    return base.to(dt.to_torch(dtype_name))


@functools.lru_cache(maxsize=None)
def lacking(dtype_name: str) -> frozenset[str]:
    """Names of the probed kernels this process's eager CPU has no kernel for."""
    try:
        sample = _sample(dtype_name)
    except Exception:  # not even a tensor of it: everything is lacking
        return frozenset(_PROBES)
    missing = set()
    for name, probe in _PROBES.items():
        try:
            probe(sample)
        except Exception:
            missing.add(name)
    return frozenset(missing)


def lacking_for(dtype_names) -> dict[str, frozenset[str]]:
    """{dtype: lacking kernels} for those of ``dtype_names`` the CPU lacks any for."""
    return {d: m for d in sorted(set(dtype_names)) if (m := lacking(d))}


def describe(dtype_names) -> str:
    """'uint32 (lt, where)' style summary of what this CPU lacks for these dtypes."""
    return "; ".join(f"{d} ({', '.join(sorted(m))})" for d, m in lacking_for(dtype_names).items())


def case_dtypes(case, *results) -> set[str]:
    """Every dtype a case touches: its inputs' and those of the tensors in ``results``."""
    names = {r.dtype for r in case.inputs}

    def walk(x):
        if isinstance(x, torch.Tensor):
            names.add(dt.name_of(x.dtype))
        elif isinstance(x, (tuple, list)):
            for y in x:
                walk(y)
    for r in results:
        walk(r)
    return names
