"""Replaying a real device's recorded values on CPU: a target that computes what eager
CPU computes but returns, at the disputed positions, the values the device returned
(the corpus records them), so a rule made of a device run is tested here."""
from __future__ import annotations

import json

import torch

from mpsfuzz.generation.recipes import Case
from mpsfuzz.oracles import DEFAULT, Failure, worker_oracles
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.oracles.values import flatten_outputs


class Replayed:
    """Eager CPU, but with the recorded target's values at the given (leaf, index)
    positions of the outputs (the gradients, for the grad variant)."""

    device = "cpu"
    name = "replayed-h200"

    def __init__(self, positions, scale: float = 1.0):
        self.positions = positions
        self.scale = scale

    def is_available(self):
        return True

    def _patch(self, leaves):
        for leaf, index, value in self.positions:
            t = leaves[leaf]
            value = float(value) if isinstance(value, str) else value   # 'nan', 'inf' as recorded
            t.detach().__setitem__(tuple(index), value * self.scale)

    def run(self, fn, *args, **kwargs):
        out = fn(*args, **kwargs)
        if getattr(fn, "__name__", "") == "forward_backward":
            self._patch([g for g in out[1]])
        else:
            self._patch([t for t in flatten_outputs(out) if isinstance(t, torch.Tensor)])
        return out

    def synchronize(self):
        pass

    def memory_allocated(self):
        return 0


def replay(case_json: str, positions, scale: float = 1.0) -> list[Failure]:
    """The failures of ``case_json`` judged with the recorded values at ``positions``
    (output leaf, index, value), each scaled by ``scale``."""
    case = Case.from_json(json.loads(case_json))
    return [Failure.from_json(f) for f in judge_case(case, Replayed(positions, scale), worker_oracles(DEFAULT)).failures]


def targets(failures) -> list:
    return [(f.oracle, f.kind) for f in failures if f.blame == "target"]
