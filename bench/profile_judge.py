"""Where a worker's time goes: judge_case (the executor and every oracle) profiled
in-process over the same generated cases, against the bare loop of bench/throughput.py.

    python bench/profile_judge.py [--target T] [--families elementwise] [--cases 400] [--top 25]

Prints ms/case for drawing the cases (as a campaign without drafters draws them: seeded
generate-only slices, ``--siblings`` per drawn case), for judge_case (a second pass over the cases: the
first loads kernels, libraries and lazy imports, and is shown apart), for the bare loop,
and the functions with the most cumulative and own time (cProfile) inside judge_case.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", default="mpsfuzz.testing.faults:target")
    parser.add_argument("--families", default="elementwise")
    parser.add_argument("--cases", type=int, default=400)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--siblings", type=int, default=0, help="siblings per drawn case (strategies.siblings)")
    args = parser.parse_args()
    os.environ.setdefault("MPSFUZZ_FAULTS", "none")
    warnings.simplefilter("ignore")
    from mpsfuzz.campaign.drafts import Limits, draw_slice
    from mpsfuzz.execution.targets import load_target
    from mpsfuzz.generation import catalogue
    from mpsfuzz.oracles import DEFAULT, worker_oracles
    from mpsfuzz.oracles.judge import judge_case
    from throughput import bare_loop

    target = load_target(args.target)
    drawn = []
    ops = [op for fam in args.families.split(",") for op in catalogue.select(fam)]
    # As a campaign draws in its own process (no drafters), siblings included.
    per_op = max(2, args.cases // len(ops))
    limits = Limits(8, 8, 4096, True, per_op, args.siblings)
    started = time.perf_counter()
    for op in ops:
        drawn += draw_slice(op, 0, 0, limits).cases
    draw_ms = 1000 * (time.perf_counter() - started) / max(1, len(drawn))
    names = worker_oracles(DEFAULT)
    started = time.perf_counter()
    for case in drawn:   # a first pass: first calls load kernels, libraries, lazy imports
        judge_case(case, target, names)
    cold_ms = 1000 * (time.perf_counter() - started) / len(drawn)
    started = time.perf_counter()
    for case in drawn:   # a warm pass without the profiler: the figure to compare
        judge_case(case, target, names)
    warm_ms = 1000 * (time.perf_counter() - started) / len(drawn)
    profile = cProfile.Profile()
    started = time.perf_counter()
    profile.enable()
    for case in drawn:
        judge_case(case, target, names)
    profile.disable()
    judge_ms = 1000 * (time.perf_counter() - started) / len(drawn)
    bare_ms = 1000 * bare_loop(drawn, target) / len(drawn)
    print(f"target {args.target} ({target.device}); {len(drawn)} cases of {args.families}")
    print(f"draw {draw_ms:.2f} ms/case, judge_case {warm_ms:.2f} ms/case (first pass {cold_ms:.2f}, "
          f"profiled {judge_ms:.2f}), "
          f"bare loop {bare_ms:.2f} ms/case")
    for key in ("cumulative", "tottime"):
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats(key).print_stats(args.top)
        lines = [ln for ln in out.getvalue().splitlines() if ln.strip()]
        start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls"))
        print(f"-- by {key}")
        for ln in lines[start:start + args.top + 1]:
            print(ln[:200])


if __name__ == "__main__":
    main()
