"""A sum of integers into a floating ``dtype=`` rounds its partial sums in that dtype:
cumsum of int64 values of +-2^62 with ``dtype=float32`` accumulated in float32 (as CUDA
does; eager CPU accumulates in double) is within the rounding bound of its terms'
magnitudes, not of its cancelled result. The bound once read the integer input as no
data (only floating arguments' absolute values were summed), and such a case was filed
as the target's bug."""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from mpsfuzz.execution.targets import DeviceTarget
from mpsfuzz.generation.recipes import Case
from mpsfuzz.oracles import DEFAULT
from mpsfuzz.oracles.judge import judge_case

# int64 values over the int_range distribution's full width (about +-4.6e18), scans of 5
CASE = Case.from_json({"format": 3, "op": "cumsum", "variant": "functional", "inputs": [
    {"shape": [4, 2, 5, 7, 5], "dtype": "int64", "layout": {"offset": 0, "gaps": [], "permutation": [], "expanded": []},
     "values": {"distribution": "int_range", "seed": 0, "low": None, "high": None, "specials": []}, "alias": None}],
    "kwargs": {"dim": -1, "dtype": {"dtype": "float32"}}})


class _ScanInFloat32(TorchDispatchMode):
    """cumsum with dtype=float32 accumulated term by term in float32; ``drop_last``: the
    last term left out (a wrong scan)."""

    def __init__(self, drop_last: bool = False):
        super().__init__()
        self.drop_last = drop_last

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten.cumsum.default and kwargs.get("dtype") == torch.float32:
            x, dim = args[0].to(torch.float32), args[1]
            out = torch.empty_like(x)
            acc = torch.zeros_like(x.select(dim, 0))
            for i in range(x.shape[dim]):
                if not (self.drop_last and i == x.shape[dim] - 1):
                    acc = acc + x.select(dim, i)
                out.select(dim, i).copy_(acc)
            return out
        return func(*args, **kwargs)


class _Float32Scans(DeviceTarget):
    def __init__(self, drop_last: bool = False):
        super().__init__("float32-scans", "cpu")
        self.drop_last = drop_last

    def run(self, fn, *args, **kwargs):
        with _ScanInFloat32(self.drop_last):
            return fn(*args, **kwargs)


def test_a_scan_of_integers_accumulated_in_the_float_dtype_is_within_its_rounding():
    assert judge_case(CASE, _Float32Scans(), DEFAULT).failures == ()


def test_a_scan_that_drops_a_term_is_still_wrong():
    failures = judge_case(CASE, _Float32Scans(drop_last=True), DEFAULT).failures
    assert [f["oracle"] for f in failures] == ["values"] and failures[0]["blame"] == "target"
