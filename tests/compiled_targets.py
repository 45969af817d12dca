"""Compiled targets of the tests' own (issue 37, point 7), loaded in workers as
``compiled_targets:NAME`` (this folder is on the workers' path, as it is on pytest's).

``faulty_compiled``: Inductor on the CPU under the fault target's dispatch mode. Inductor
lowers most ops to its own code, which no fault reaches; an op it does not lower
(``linalg.lu_factor``) stays an eager kernel that the compiled graph calls, and the fault
(``MPSFUZZ_FAULTS``) fires there as it does on the fault target itself, which is this
target's eager counterpart. ``faulty_compiled_clean_eager`` is the same compiled target
whose counterpart is eager CPU: the eager kernel there is correct.
"""
from __future__ import annotations

from mpsfuzz.execution.targets import CompiledTarget
from mpsfuzz.testing import faults

FAULT_TARGET = "mpsfuzz.testing.faults:target"


class FaultyCompiled(CompiledTarget):
    def __init__(self, eager_counterpart: str):
        super().__init__("faulty-cpu-compiled", "cpu")
        self.eager_counterpart = eager_counterpart
        self._faults = faults.target()

    def run(self, fn, *args, **kwargs):
        return self._faults.run(super().run, fn, *args, **kwargs)


def faulty_compiled() -> FaultyCompiled:
    return FaultyCompiled(FAULT_TARGET)


def faulty_compiled_clean_eager() -> FaultyCompiled:
    return FaultyCompiled("cpu")
