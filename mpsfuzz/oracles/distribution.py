"""``distribution``: random ops are judged statistically on the DUT (support, shape,
distribution tests with a fixed, tiny false-alarm rate), never against CPU values: the
two sides' generators differ. Each op's judge lives with its spec (``statistical``)."""
from __future__ import annotations

from . import Failure, oracle
from ..execution.observation import Observation, Raised


@oracle("distribution", stage="case", doc="random ops' outputs pass their statistical checks")
def check_distribution(obs: Observation) -> Failure | None:
    judge = getattr(obs.spec, "statistical", None)
    if judge is None or isinstance(obs.dut, Raised):
        return None
    problem = judge(obs.dut, obs.case.materialize("cpu"), obs.case.kwargs_dict())
    if not problem:
        return None
    return Failure(oracle="distribution", kind="wrong-distribution", severity="high",
                   title=f"`{obs.spec.name}` produces values that fail a statistical check on {obs.target_name}",
                   # Which statistic fails depends on the sample (its size, its shape), not
                   # on the bug: the key is the symptom alone; ablation tells causes apart.
                   message=problem, dedup_key=("wrong-distribution",))
