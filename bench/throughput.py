"""Throughput of `mpsfuzz run` per op family, against a bare in-process loop doing the
same work: materialise the same cases' tensors, run the op on the target and on CPU,
compare. The ratio is what isolation (worker processes, in-flight files), Hypothesis and
the oracles cost.

    python bench/throughput.py [--target T] [--cases N] [--families linalg,elementwise,reduction]

Prints one line per family: cases/s for mpsfuzz, cases/s for the bare loop, and the ratio.
"""
from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

from mpsfuzz.campaign.engine import Campaign, CampaignConfig
from mpsfuzz.events import CaseFinished
from mpsfuzz.execution.targets import best_available, load_target
from mpsfuzz.generation import catalogue
from mpsfuzz.generation.dtypes import name_of
from mpsfuzz.oracles.tolerances import tolerance
from mpsfuzz.oracles.values import compare_tensors, flatten_outputs


def bare_loop(cases, target) -> float:
    """Seconds for the same cases run in-process with no isolation and no Hypothesis."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in cases:
            spec = catalogue.get(case.op)
            kwargs = case.kwargs_dict()
            try:
                out = target.run(spec.fn, *case.materialize(target.device), **kwargs)
                target.synchronize()
                ref = spec.fn(*case.materialize("cpu"), **kwargs)
            except Exception:
                continue
            for a, e in zip(flatten_outputs(out), flatten_outputs(ref)):
                if hasattr(a, "cpu") and hasattr(e, "dtype"):
                    compare_tensors(a.cpu(), e, *tolerance(name_of(e.dtype)))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", default=None)
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--families", default="linalg,elementwise,reduction")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    spec = args.target or best_available()
    target = load_target(spec)
    print(f"target {spec} (device {target.device}); {args.cases} cases per family")
    print(f"{'family':<12} {'mpsfuzz/s':>10} {'bare/s':>10} {'ratio':>7} {'valid':>6}")
    for family in args.families.split(","):
        ran = []
        listener = lambda e: ran.append(e.case) if isinstance(e, CaseFinished) and e.case is not None else None
        with tempfile.TemporaryDirectory() as tmp:
            config = CampaignConfig(ops=catalogue.select(family), target_spec=spec, corpus_dir=Path(tmp),
                                    seed=args.seed, max_cases=args.cases, slice_examples=10)
            started = time.perf_counter()
            result = Campaign(config, [listener]).run()
            fuzz_s = time.perf_counter() - started
        bare_s = bare_loop(ran, target)
        fuzz_rate, bare_rate = len(ran) / fuzz_s, len(ran) / max(bare_s, 1e-9)
        print(f"{family:<12} {fuzz_rate:>10.1f} {bare_rate:>10.1f} {fuzz_rate / bare_rate:>7.2f} "
              f"{100 * result.stats.valid_ratio:>5.0f}%")


if __name__ == "__main__":
    main()
