"""Where one lane's time goes (issue 13): a `--jobs 1` campaign, instrumented per batch.

    PYTHONPATH=. python bench/lane_profile.py [--families elementwise] [--draw-jobs 2]
        [--seconds 30] [--seed 0] [--target mpsfuzz.testing.faults:target]

For the batches after the first ten (start-up left out) it prints the campaign's rate
and, per case: how much of the time judge_case took in the worker (timed there,
bench/timed_judge.py), how much went between two cases of a batch (the reply sent, the
next case parsed) and between batches (the driver sending the next one, or the worker
waiting for it), and what the driver spent taking slices from its drafters (or drawing
them), collecting, judging and sending. A worker judging most of the time is bound by
judging; a large gap between batches is a worker waiting for drawing.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
SKIP_BATCHES = 10
SLOW_CASE_S = 0.010


def instrument():
    """Patch the pool and the campaign to record each batch's times and the driver's."""
    from mpsfuzz.campaign import engine
    from mpsfuzz.execution import worker

    batches, driver, per_case = [], {}, []
    submit, collect = worker.WorkerPool.submit, worker.WorkerPool.collect

    def timed_submit(self, case_jsons, *args, **kwargs):
        sent = time.monotonic()
        batch = submit(self, case_jsons, *args, **kwargs)
        batch.sent_at = sent
        return batch

    def timed_collect(self, batch, *args, **kwargs):
        outcomes = collect(self, batch, *args, **kwargs)
        if hasattr(batch, "sent_at"):
            times = [(o.get("judge_s", 0.0), o.get("judged", "?")) for o in outcomes if isinstance(o, dict)]
            judged = sum(t for t, _ in times)
            per_case.extend(times)
            # When each case's judge_case started and how long it took (the worker's clock):
            # the worker's time outside judge_case is between them.
            starts = [(o["judge_at"], o["judge_s"]) for o in outcomes if isinstance(o, dict) and "judge_at" in o]
            batches.append((batch.sent_at, batch.started, len(batch.case_jsons), judged, starts))
        return outcomes
    worker.WorkerPool.submit, worker.WorkerPool.collect = timed_submit, timed_collect

    for name in ("_next_draft", "_collect", "_submit", "_finish"):
        method = getattr(engine.Campaign, name)

        def timed(*args, _method=method, _name=name, **kwargs):
            started = time.monotonic()
            try:
                return _method(*args, **kwargs)
            finally:
                driver[_name] = driver.get(_name, 0.0) + time.monotonic() - started
        setattr(engine.Campaign, name, timed)
    from timed_judge import timed_judge
    engine.judge_case = timed_judge   # what the campaign hands its fuzzing pool
    return batches, driver, per_case


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default="elementwise")
    parser.add_argument("--draw-jobs", type=int, default=None, dest="draw_jobs",
                        help="drafter processes (default: as `run --jobs 1` picks)")
    parser.add_argument("--siblings", type=int, default=None,
                        help="siblings per drawn case (default: as `run --jobs 1` picks)")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--target", default="mpsfuzz.testing.faults:target")
    parser.add_argument("--seed", type=int, default=0, help="campaign seed (as bench/throughput.py --seed)")
    parser.add_argument("--slowest", type=int, default=0, help="list the N slowest cases judged")
    parser.add_argument("--warm-up", type=float, default=0.0, dest="warm_up",
                        help="first run the campaign unmeasured for this many seconds, same seed "
                             "(fills the device's on-disk kernel caches: bench/throughput.py)")
    args = parser.parse_args()
    os.environ.setdefault("MPSFUZZ_FAULTS", "none")

    from mpsfuzz.campaign.engine import Campaign, CampaignConfig
    from mpsfuzz.campaign.lanes import default_draw_jobs, default_siblings
    from mpsfuzz.generation import catalogue

    draw_jobs = default_draw_jobs(1) if args.draw_jobs is None else args.draw_jobs
    siblings = (default_siblings(1, draw_jobs, budget_s=args.seconds, max_cases=None)
                if args.siblings is None else args.siblings)
    batches, driver, per_case = instrument()
    scratch = tempfile.TemporaryDirectory(prefix="mpsfuzz-lane-")   # the campaigns' corpora
    for family in args.families.split(","):
        batches.clear()
        driver.clear()
        per_case.clear()
        config = CampaignConfig(ops=catalogue.select(family), target_spec=args.target,
                                corpus_dir=Path(tempfile.mkdtemp(dir=scratch.name)), seed=args.seed,
                                budget_s=args.seconds, draw_jobs=draw_jobs, siblings=siblings)
        if args.warm_up > 0:
            warm = dataclasses.replace(config, budget_s=args.warm_up,
                                       corpus_dir=Path(tempfile.mkdtemp(dir=scratch.name)))
            Campaign(warm, []).run()
            batches.clear()
            driver.clear()
            per_case.clear()
        result = Campaign(config, []).run()
        kept = batches[SKIP_BATCHES:]
        if len(kept) < 2:
            print(f"{family}: too few batches ({len(batches)}) in {args.seconds:g} s")
            continue
        cases = sum(b[2] for b in kept)
        window = kept[-1][1] - kept[0][0]
        judged = sum(b[3] for b in kept)
        # Between two cases of a batch: the reply sent, the next case parsed. Between
        # batches: from the last case of one to the first of the next (the driver's
        # sending and, when the next batch was not queued yet, the wait for it).
        between = sum(b[0] - (a[0] + a[1]) for k in kept for a, b in zip(k[4], k[4][1:]))
        across = sum(k[4][0][0] - (j[4][-1][0] + j[4][-1][1]) for j, k in zip(kept, kept[1:]) if j[4] and k[4])
        per = lambda s: f"{1000 * s / cases:.3f}"   # noqa: E731
        total = result.stats.cases or 1
        print(f"{family} (draw-jobs {draw_jobs}, siblings {siblings}): {cases} cases in {window:.1f} s = {cases / window:.0f}/s, "
              f"{per(window)} ms/case: judge_case {per(judged)} ({100 * judged / window:.0f}% of the time), "
              f"between cases {per(between)}, between batches {per(across)}; driver (whole run, ms/case): "
              + ", ".join(f"{name.strip('_')} {1000 * s / total:.3f}" for name, s in driver.items()))
        # A case far slower than the median is mostly a first use (a kernel loaded or
        # compiled, a library initialised): its share says what a longer run would save.
        ordered = sorted(t for t, _ in per_case)
        if ordered:
            slow = [t for t in ordered if t > SLOW_CASE_S]
            print(f"  judge_case per case (all batches): median {1000 * ordered[len(ordered) // 2]:.3f} ms, "
                  f"p90 {1000 * ordered[int(0.9 * (len(ordered) - 1))]:.3f} ms, max {1000 * ordered[-1]:.1f} ms; "
                  f"{len(slow)} cases over {1000 * SLOW_CASE_S:.0f} ms take "
                  f"{100 * sum(slow) / max(sum(ordered), 1e-9):.0f}% of judging")
            if args.slowest:
                print("  slowest: " + "; ".join(f"{1000 * t:.0f} ms {what}"
                                               for t, what in sorted(per_case, reverse=True)[:args.slowest]))


if __name__ == "__main__":
    main()
