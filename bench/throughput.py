"""Throughput of mpsfuzz per op family: the bare loop, one lane, N lanes (issue 13, point 3).

    PYTHONPATH=. python bench/throughput.py [--families linalg,elementwise,reduction]
        [--seconds 30] [--jobs 2,4] [--target mpsfuzz.testing.faults:target] [--faults NAMES]
        [--slice 30] [--seed 0] [--warm-up S] [--machine-seconds S] [--no-profile] [--json FILE]

For each family it runs, one after the other, each fuzzing for about ``--seconds``:

- ``jobs1``: one campaign (``mpsfuzz run --jobs 1``: engine.Campaign, its worker, its
  triage desk), recording every case it ran;
- ``jobsN``, for each N of ``--jobs`` (default: 2, and ``lanes.default_jobs()`` if
  larger): ``mpsfuzz run --jobs N`` (lanes.ParallelCampaign: N lane processes, repro
  scripts not verified);
- ``bare``: the cases the jobs1 campaign ran, again, right after it (before any lanes
  start, so that none still stopping slows it), in one process with no Hypothesis and
  no oracles: materialise the inputs, run the op on the target and on CPU, compare the
  outputs (:func:`bare_case`). Same work, none of the machinery. The process is a child
  (:func:`isolated_loop`): a case that kills it (eager CPU's SIGFPE on an integer
  division of the lowest value by -1 killed the whole bench on the GPU host) is left
  out of the bare loop and of what follows, and counted.

A campaign draws ``siblings`` more cases per Hypothesis example where drawing cannot keep
its worker busy (``lanes.default_siblings``: none for one lane on a machine of 8 cores or
more); the jobs1 line counts the *skeletons* among its cases (op, shapes, dtypes,
arguments, variant), the fresh draws a second.

A campaign's budget (``budget_s``, counted from before its worker pool is created) is
``--seconds`` plus an allowance for its pools to start: the warm start-up for jobs1 (this
process's forkserver is already up), the cold one times ``max(1, 2N / cores)`` for N lanes
(each lane is a fresh process that starts its own forkserver, all at once); so each
campaign's steady part lasts about ``--seconds``. The per-family line prints how long it
actually lasted; a window much shorter than ``--seconds`` is flagged.

Figures (the table prints one row per family):

``bare/s``, ``jobs1/s``, ``jobsN/s``
    cases per second (the main figures). A campaign's rate is taken over its steady
    part: from the first cases that came back to the last, ``(cases - first burst) / (t_last - t_first_burst)``
    (cases come back in bursts: a slice's batch in a campaign, bundles of up to 32 from
    a lane), so it leaves out start-up: creating the worker pool (the forkserver zygote
    imports torch, 1-3 s) and, for lanes, spawning a Python per lane. A daemon pays that
    once; ``Campaign.run``'s own ``stats.elapsed_s`` includes it (its clock starts before
    the pool is created), so ``cases / elapsed_s`` is in the JSON only (``rate_total``).
    The start-up is measured separately and printed: a worker pool created cold (first
    in this process: the forkserver starts) and warm, and per campaign the time from
    ``run()`` to its first case. For N lanes the steady window still spans the lanes
    starting and stopping at slightly different times; the JSON's ``rate_mid`` (cases
    between the 10% and the 90% case, over the time between them) leaves that out too.
``jobs1/bare``
    what isolation, Hypothesis, the in-flight files and the oracles cost. Goal: >= 0.25
    for elementwise and reduction (cheap ops, where the overhead shows most).
``effN``
    scaling efficiency of N lanes: ``jobsN / (N * jobs1)``. Goal: >= 0.7. Meaningless on
    a machine with fewer than 2N free cores: a lane keeps two busy (its Hypothesis
    process draws the next slice while its worker runs the last one); lanes with fewer
    cores get siblings instead, trading fresh draws for cases.
``machine`` (a line per family, from the jobs1 cases; ``--machine-seconds``)
    cases/s of judge_case, a worker's work alone (no driver, no drawing, no pipes), in
    1 and in N processes at once (:func:`judging_at_once`), and the scaling
    ``machineN / (N * machine1)``: what the machine itself gives N copies of the work
    (shared caches and memory bandwidth, an all-core clock below the one-core turbo).
    Lanes cannot scale better; ``effN`` over it is what the lanes' own machinery (their
    drivers, drawing, pipes, in-flight files) keeps of it.
``profile`` (a line per family, from the jobs1 cases)
    milliseconds per case spent *generating* in the driver (the same number of cases per
    op drawn again in generate-only Hypothesis slices, as the engine's ``_prepare``
    does) and *judging* in the worker (``oracles.judge.judge_case`` with the default
    oracles, timed in a child process), beside the bare loop's and the campaign's own
    ms/case. Drawing overlaps the worker's run of the previous slice, so a campaign near
    ``max(generate, judge)`` per case overlaps well, one near their sum does not.

``--warm-up S`` first runs every campaign of the family (jobs1 and each jobsN, the same
seeds) for S seconds, unmeasured. A device compiles some kernels the first time a
machine runs them and keeps them on disk (CUDA's jiterator: an NVRTC compile of 1-2 s per
op, dtype and vectorisation, cached under ``~/.cache/torch/kernels``): on a fresh machine
a campaign pays each compile and the bare loop, which runs the same cases after it, pays
none. A daemon pays them once per machine; the warm-up makes the measured campaigns and
the bare loop alike (both still pay what every new process pays, such as loading a
kernel's module on first use).

The default target is the fault-injecting CPU target with no faults (``MPSFUZZ_FAULTS``
is set to ``none`` unless ``--faults`` is given): a clean target, so no findings, no
shrinking and no triage take time. ``--target mps`` / ``cuda`` / ``module:attr`` measure
a real device (its findings' shrinking and triage then count, as in a real run). The bare
loop, the machine line and the profile run cases outside any worker: a fault that hangs
hangs them.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

GOAL_BARE = 0.25                          # jobs1/bare, for GOAL_BARE_FAMILIES
GOAL_BARE_FAMILIES = ("elementwise", "reduction")
GOAL_EFFICIENCY = 0.7                     # jobsN / (N * jobs1)
# Events this close together came back together (a batch's or a bundle's cases are
# emitted in one loop, well under a millisecond apart; batches are further apart).
BURST_GAP_S = 0.005


def bare_case(case, target) -> None:
    """One case of the bare loop: materialise, run on the target and on CPU, compare."""
    from mpsfuzz.generation import catalogue
    from mpsfuzz.generation.dtypes import name_of
    from mpsfuzz.oracles.tolerances import tolerance
    from mpsfuzz.oracles.values import compare_tensors, flatten_outputs

    spec = catalogue.get(case.op)
    kwargs = case.kwargs_dict()
    try:
        out = target.run(spec.fn, *case.materialize(target.device), **kwargs)
        target.synchronize()
        ref = spec.fn(*case.materialize("cpu"), **kwargs)
    except Exception:
        return
    for a, e in zip(flatten_outputs(out), flatten_outputs(ref)):
        if hasattr(a, "cpu") and hasattr(e, "dtype"):
            compare_tensors(a.cpu(), e, *tolerance(name_of(e.dtype)))


def bare_loop(cases, target) -> float:
    """Seconds for the same cases run in-process with no isolation and no Hypothesis."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in cases:
            bare_case(case, target)
    return time.perf_counter() - start


def judge_one(case, target) -> None:
    """What a worker runs for a case: judge_case with the default oracles."""
    from mpsfuzz.oracles import DEFAULT, worker_oracles
    from mpsfuzz.oracles.judge import judge_case

    try:
        judge_case(case, target, worker_oracles(DEFAULT))
    except Exception:
        pass


LOOPS = {"bare": bare_case, "judge": judge_one}


def _child_target(target_spec: str):
    """In a bench child process: the target loaded, torch limited to one thread as a
    lane's worker is, warnings off."""
    from mpsfuzz.execution.targets import load_target
    from mpsfuzz.execution.worker import limit_threads

    warnings.simplefilter("ignore")
    limit_threads()
    return load_target(target_spec)


def _loop_process(loop: str, case_jsons: list, target_spec: str, progress, seconds) -> None:
    """A child of :func:`isolated_loop`: ``LOOPS[loop]`` over the cases from
    ``progress.value`` on, adding each case's time to ``seconds``."""
    from mpsfuzz.generation.recipes import Case

    target, run = _child_target(target_spec), LOOPS[loop]
    for index in range(progress.value, len(case_jsons)):
        case = Case.from_json(case_jsons[index])
        start = time.perf_counter()
        run(case, target)
        seconds.value += time.perf_counter() - start
        progress.value = index + 1


def isolated_loop(loop: str, cases, target_spec: str) -> tuple[float, list[int]]:
    """Seconds ``LOOPS[loop]`` (the bare loop, or judging as a worker does) spends on
    ``cases`` in a child process, and the cases that killed it: a case that crashes
    eager CPU (SIGFPE in an integer division by the lowest value) or the device kills
    only the child, which starts again after it. Start-up is not timed."""
    context = _children()
    jsons = [case.to_json() for case in cases]
    progress, seconds = context.RawValue("q", 0), context.RawValue("d", 0.0)
    crashed: list[int] = []
    while progress.value < len(jsons):
        child = context.Process(target=_loop_process, args=(loop, jsons, target_spec, progress, seconds))
        child.start()
        child.join()
        if child.exitcode != 0 and progress.value < len(jsons):
            crashed.append(progress.value)
            progress.value += 1
            if len(crashed) > max(MAX_CRASHES, len(jsons) // 10):
                raise RuntimeError(f"the {loop} loop's process died {len(crashed)} times "
                                   f"(last exit status {child.exitcode})")
    return seconds.value, crashed


MAX_CRASHES = 20


def _children():
    """Where the bench's child processes come from: the forkserver the campaigns' worker
    pools started (its zygote has torch imported: a child starts in tens of
    milliseconds, where a spawned one imports torch for seconds), else spawn; never a
    fork of this process (a device target must not be forked)."""
    import multiprocessing

    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    return multiprocessing.get_context(method)


class Clock:
    """A campaign listener: when each case came back (and which case), and when the
    campaign's worker pool was ready (its CampaignStarted; jobs1 only)."""

    def __init__(self, pool_events: bool):
        self.called = time.monotonic()
        self.pool_events = pool_events   # its CampaignStarted says its pool is ready (not ParallelCampaign's)
        self.ready: float | None = None
        self.times: list[float] = []
        self.cases: list = []

    def __call__(self, event) -> None:
        from mpsfuzz.events import CampaignStarted, CaseFinished
        if isinstance(event, CaseFinished):
            self.times.append(time.monotonic())
            if event.case is not None:
                self.cases.append(event.case)
        elif isinstance(event, CampaignStarted) and self.ready is None and self.pool_events:
            self.ready = time.monotonic()


def steady(times: list[float]) -> dict:
    """The rate after the first burst of cases, and between the 10% and 90% cases."""
    out = {"first_burst": None, "steady_cases": 0, "steady_s": None, "rate": None, "rate_mid": None}
    if not times:
        return out
    k = 1
    while k < len(times) and times[k] - times[k - 1] < BURST_GAP_S:
        k += 1
    out["first_burst"] = k
    if k < len(times):
        window = times[-1] - times[k - 1]
        out.update(steady_cases=len(times) - k, steady_s=window,
                   rate=(len(times) - k) / window if window > 0 else None)
    lo, hi = int(0.1 * (len(times) - 1)), int(0.9 * (len(times) - 1))
    if hi > lo and times[hi] > times[lo]:
        out["rate_mid"] = (hi - lo) / (times[hi] - times[lo])
    return out


def campaign_figures(result, clock: Clock, wall_s: float) -> dict:
    stats = result.stats
    figures = {
        "cases": stats.cases, "elapsed_s": stats.elapsed_s, "wall_s": wall_s,
        "rate_total": stats.cases / stats.elapsed_s if stats.elapsed_s > 0 else None,
        "first_case_s": clock.times[0] - clock.called if clock.times else None,
        "pool_ready_s": clock.ready - clock.called if clock.ready is not None else None,
        "valid_ratio": stats.valid_ratio, "harness_errors": stats.harness_errors,
        "new_findings": stats.new_findings, "sightings": stats.sightings,
        "stopped_because": result.stopped_because,
    }
    figures.update(steady(clock.times))
    return figures


def run_campaign(config, jobs: int, target) -> tuple[dict, list]:
    """One campaign of ``jobs`` lanes (1: engine.Campaign itself): its figures and the
    cases it ran."""
    from mpsfuzz.campaign.engine import Campaign
    from mpsfuzz.campaign.lanes import ParallelCampaign

    clock = Clock(pool_events=jobs == 1)
    if jobs == 1:
        campaign = Campaign(config, [clock])
    else:
        campaign = ParallelCampaign(config, [clock], jobs=jobs, verify=False,
                                    target_name=target.name, device=str(target.device))
    clock.called = time.monotonic()
    result = campaign.run()
    wall_s = time.monotonic() - clock.called
    return campaign_figures(result, clock, wall_s), clock.cases


def pool_startup(spec: str) -> float:
    """Seconds to create a worker pool (its worker ready, its target loaded)."""
    from mpsfuzz.execution.worker import WorkerPool
    from mpsfuzz.oracles.judge import judge_case

    start = time.monotonic()
    pool = WorkerPool(spec, execute=judge_case)
    elapsed = time.monotonic() - start
    pool.close()
    return elapsed


def generation_time(counts: Counter, config) -> tuple[float, int]:
    """Seconds the driver spends drawing ``counts[op]`` cases of each op, in slices as
    the engine draws them (its own draw_slice); and the cases drawn."""
    from mpsfuzz.campaign.drafts import Limits, draw_slice

    limits = Limits(config.max_rank, config.max_side, config.max_numel, config.allow_variants,
                    config.slice_examples, config.siblings)
    total_s, total = 0.0, 0
    for op, wanted in sorted(counts.items()):
        got, slice_no = 0, 0
        max_slices = 3 * math.ceil(wanted / config.slice_examples) + 3
        while got < wanted and slice_no < max_slices:
            slice_no += 1
            start = time.perf_counter()
            draft = draw_slice(op, slice_no, config.seed, limits)
            total_s += time.perf_counter() - start
            got += len(draft.cases)
        total += got
    return total_s, total


def _judging_process(case_jsons: list, target_spec: str, start: int, seconds: float, barrier, results) -> None:
    """One process of :func:`judging_at_once`: judge_case over the cases, decoded from
    JSON afresh each time as a worker gets them, from ``start`` on (cycling), for
    ``seconds`` after every process is ready; puts (cases, seconds) on ``results``."""
    from mpsfuzz.generation.recipes import Case

    target = _child_target(target_spec)
    order = case_jsons[start:] + case_jsons[:start]
    for case_json in order[:WARM_CASES]:   # the first calls load kernels and libraries
        judge_one(Case.from_json(case_json), target)
    barrier.wait()
    done, began = 0, time.perf_counter()
    while True:
        for case_json in order:
            judge_one(Case.from_json(case_json), target)
            done += 1
            if done % 16 == 0 and time.perf_counter() - began >= seconds:
                results.put((done, time.perf_counter() - began))
                return


WARM_CASES = 300


def judging_at_once(cases, target_spec: str, processes: int, seconds: float) -> float | None:
    """Cases/s of ``processes`` processes each running judge_case (a worker's work, no
    lane around it: no driver, no drawing, no pipes) over ``cases`` at the same time:
    how the machine itself scales this work. Lanes cannot scale better than this; where
    it is well under ``processes`` times one process, the machine (shared caches and
    memory bandwidth, all-core clocks) bounds ``effN``, not mpsfuzz. None where a
    process died (the bare loop left out the cases that kill a process)."""
    if not cases:
        return None
    context = _children()
    jsons = [case.to_json() for case in cases]
    barrier, results = context.Barrier(processes), context.Queue()
    children = [context.Process(target=_judging_process, daemon=True,
                                args=(jsons, target_spec, i * len(jsons) // processes, seconds, barrier, results))
                for i in range(processes)]
    for child in children:
        child.start()
    rates = []
    try:
        for _ in children:
            done, elapsed = results.get(timeout=seconds + 180)
            rates.append(done / elapsed)
    except Exception:   # queue.Empty: a process died or hung
        return None
    finally:
        for child in children:
            child.join(5)
            if child.is_alive():
                child.kill()
    return sum(rates)


def machine_scaling(machine: dict, n: int) -> float | None:
    """``machine[n] / (n * machine[1])``: how N processes of judging scale here."""
    one = machine.get(1)
    return ratio(machine.get(n), n * one) if one else None


def per_case_ms(seconds: float | None, cases: int) -> float | None:
    return 1000.0 * seconds / cases if seconds is not None and cases else None


def ratio(a, b) -> float | None:
    return a / b if a is not None and b else None


def fmt(value, width: int, digits: int = 1) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.{digits}f}"


def parse_jobs(text: str) -> list[int]:
    try:
        jobs = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"--jobs {text!r}: a comma list of integers >= 2") from None
    if not jobs or jobs[0] < 2:
        raise argparse.ArgumentTypeError(f"--jobs {text!r}: a comma list of integers >= 2 (jobs 1 always runs)")
    return jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="mpsfuzz.testing.faults:target", metavar="T",
                        help="target spec as for `mpsfuzz run --target` (default: the fault target, no faults)")
    parser.add_argument("--faults", default=None, metavar="NAMES",
                        help="MPSFUZZ_FAULTS for the fault target (default: none)")
    parser.add_argument("--families", default="linalg,elementwise,reduction", metavar="F,F",
                        help="op families (catalogue selections), comma list (default: linalg,elementwise,reduction)")
    parser.add_argument("--seconds", type=float, default=30.0, metavar="S",
                        help="steady fuzzing time of each campaign (default 30)")
    parser.add_argument("--jobs", type=parse_jobs, default=None, metavar="N,N",
                        help="lane counts to compare with jobs 1, comma list (default: 2, and "
                             "lanes.default_jobs() if larger)")
    parser.add_argument("--slice", type=int, default=30, dest="slice_examples", metavar="K",
                        help="cases per Hypothesis slice, as `mpsfuzz run --slice` (default 30)")
    parser.add_argument("--draw-jobs", type=int, default=None, dest="draw_jobs", metavar="D",
                        help="drafter processes per lane (default: as `run` picks for each --jobs)")
    parser.add_argument("--siblings", type=int, default=None, metavar="K",
                        help="siblings per drawn case (default: as `run` picks for each --jobs)")
    parser.add_argument("--seed", type=int, default=0, help="campaign seed (lanes: seed + lane index)")
    parser.add_argument("--warm-up", type=float, default=0.0, dest="warm_up", metavar="S",
                        help="first run each campaign unmeasured for S seconds, same seeds (default 0: "
                             "none); see the module docstring")
    parser.add_argument("--no-profile", action="store_false", dest="profile",
                        help="skip the profile line (drawing the jobs1 cases again takes about as long "
                             "as the campaigns)")
    parser.add_argument("--machine-seconds", type=float, default=10.0, dest="machine_seconds", metavar="S",
                        help="time judge_case in 1 and N processes at once for S seconds each, no lanes: how "
                             "the machine scales the work (default 10; 0 skips)")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="write every figure to FILE")
    args = parser.parse_args()

    # Before anything starts (forkserver, lanes): they inherit it.
    os.environ["MPSFUZZ_FAULTS"] = args.faults if args.faults is not None else "none"

    from mpsfuzz.campaign.engine import CampaignConfig
    from mpsfuzz.campaign.lanes import default_draw_jobs, default_jobs, default_siblings
    from mpsfuzz.execution.targets import load_target
    from mpsfuzz.generation import catalogue

    jobs_list = args.jobs or sorted({2, default_jobs()})
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    target = load_target(args.target)
    print(f"target {args.target} ({target.name}, device {target.device}), MPSFUZZ_FAULTS="
          f"{os.environ['MPSFUZZ_FAULTS']}; {args.seconds:g} s per campaign, slice {args.slice_examples}, "
          f"seed {args.seed}; {os.cpu_count()} cores")
    cold, warm = pool_startup(args.target), pool_startup(args.target)
    print(f"start-up (paid once, excluded from the rates): worker pool cold {cold:.2f} s "
          f"(the forkserver imports torch), warm {warm:.2f} s")
    cores = os.cpu_count() or 1
    allowance = {1: warm, **{n: cold * max(1.0, 2 * n / cores) for n in jobs_list}}
    print("rates: cases/s from the first cases back to the last (see the module docstring); budgets: "
          + ", ".join(f"jobs{n} {args.seconds + a:.1f} s" for n, a in allowance.items()))

    def drawing(jobs: int) -> tuple[int, int]:
        """(drafters per lane, siblings per drawn case) of a campaign of ``jobs`` lanes."""
        draw_jobs = args.draw_jobs if args.draw_jobs is not None else default_draw_jobs(jobs)
        siblings = args.siblings if args.siblings is not None else default_siblings(
            jobs, draw_jobs, budget_s=args.seconds + allowance[jobs], max_cases=None)
        return draw_jobs, siblings
    print("drawing (drafters per lane, siblings per drawn case): "
          + ", ".join(f"jobs{n} {drawing(n)[0]}, {drawing(n)[1]}" for n in allowance))
    print()
    header = (f"{'family':<12} {'bare/s':>8} {'jobs1/s':>8} "
              + " ".join(f"{f'jobs{n}/s':>8}" for n in jobs_list)
              + f" {'jobs1/bare':>10} " + " ".join(f"{f'eff{n}':>6}" for n in jobs_list))
    print(header)
    print("-" * len(header))

    report = {"target": args.target, "target_name": target.name, "device": str(target.device),
              "faults": os.environ["MPSFUZZ_FAULTS"], "seconds": args.seconds, "slice": args.slice_examples,
              "seed": args.seed, "cpu_count": os.cpu_count(), "jobs": jobs_list,
              "startup": {"pool_cold_s": cold, "pool_warm_s": warm},
              "budget_s": {str(n): args.seconds + a for n, a in allowance.items()}, "families": {}}
    missed: list[str] = []
    for family in families:
        warm_line = None
        with tempfile.TemporaryDirectory(prefix="mpsfuzz-bench-") as tmp:
            def config(jobs: int, name: str = "jobs") -> CampaignConfig:
                corpus = Path(tmp) / f"{name}{jobs}"
                corpus.mkdir()
                draw_jobs, siblings = drawing(jobs)
                return CampaignConfig(ops=catalogue.select(family), target_spec=args.target, corpus_dir=corpus,
                                      seed=args.seed, budget_s=args.seconds + allowance[jobs],
                                      slice_examples=args.slice_examples, draw_jobs=draw_jobs, siblings=siblings)
            if args.warm_up > 0:
                warm_rates = {}
                for n in [1, *jobs_list]:
                    cfg = dataclasses.replace(config(n, "warm"), budget_s=args.warm_up + allowance[n])
                    warm_rates[n] = run_campaign(cfg, n, target)[0]["rate"]
                warm_line = (f"  warm-up ({args.warm_up:g} s each, unmeasured, same seeds): "
                             + ", ".join(f"jobs{n} {fmt(r, 0)}/s" for n, r in warm_rates.items()))
            base = config(1)
            runs = {}
            runs[1], ran = run_campaign(base, 1, target)
            # The bare loop next, while nothing else runs: lanes stopping (and their
            # drafters finishing a slice) would slow it and flatter jobs1/bare.
            bare_s, crashed = isolated_loop("bare", ran, args.target)
            crashed_set = set(crashed)
            ran = [case for i, case in enumerate(ran) if i not in crashed_set]
            bare_rate = len(ran) / bare_s if bare_s > 0 and ran else None
            machine = {n: judging_at_once(ran, args.target, n, args.machine_seconds)
                       for n in [1, *jobs_list]} if args.machine_seconds > 0 else {}
            for n in jobs_list:
                runs[n], _ = run_campaign(config(n), n, target)
        if args.profile:
            gen_s, gen_cases = generation_time(Counter(case.op for case in ran), base)
            judge_s, _ = isolated_loop("judge", ran, args.target)
        else:
            gen_s, gen_cases, judge_s = None, 0, None

        rate1 = runs[1]["rate"]
        over_bare = ratio(rate1, bare_rate)
        eff = {n: ratio(runs[n]["rate"], n * rate1) if rate1 else None for n in jobs_list}
        profile = {"cases": len(ran), "generate_ms": per_case_ms(gen_s, gen_cases), "generated": gen_cases,
                   "judge_ms": per_case_ms(judge_s, len(ran)), "bare_ms": per_case_ms(bare_s, len(ran)),
                   "campaign_ms": 1000.0 / rate1 if rate1 else None}
        report["families"][family] = {
            "bare": {"cases": len(ran), "seconds": bare_s, "rate": bare_rate, "crashed": len(crashed)},
            "campaigns": {str(n): figures for n, figures in runs.items()},
            "jobs1_over_bare": over_bare, "efficiency": {str(n): e for n, e in eff.items()},
            "profile": profile,
            "machine": {"seconds": args.machine_seconds, "rates": {str(n): r for n, r in machine.items()},
                        "scaling": {str(n): machine_scaling(machine, n) for n in jobs_list if machine}},
        }
        print(f"{family:<12} {fmt(bare_rate, 8)} {fmt(rate1, 8)} "
              + " ".join(fmt(runs[n]["rate"], 8) for n in jobs_list)
              + f" {fmt(over_bare, 10, 2)} " + " ".join(fmt(eff[n], 6, 2) for n in jobs_list))
        if warm_line:
            print(warm_line)
        first = ", ".join(f"jobs{n} {fmt(runs[n]['first_case_s'], 0)}" for n in [1, *jobs_list])
        window = ", ".join(f"jobs{n} {fmt(runs[n]['steady_s'], 0)}" for n in [1, *jobs_list])
        short = [n for n in [1, *jobs_list] if (runs[n]["steady_s"] or 0) < 0.5 * args.seconds]
        print(f"  start-up: pool ready after {fmt(runs[1]['pool_ready_s'], 0, 2)} s; first case back after "
              f"{first} s; steady windows {window} s"
              + (f" (SHORT: {', '.join(f'jobs{n}' for n in short)}; their rates mean little)" if short else ""))
        from mpsfuzz.generation.strategies import skeleton
        skeletons = len({skeleton(case) for case in ran})   # distinct draws (siblings share one)
        skeleton_rate = rate1 * skeletons / len(ran) if rate1 and ran else None
        print(f"  jobs1: {runs[1]['cases']} cases, {skeletons} skeletons ({fmt(skeleton_rate, 0)}/s: fresh draws), "
              f"{100 * runs[1]['valid_ratio']:.0f}% valid, "
              f"{runs[1]['harness_errors']} harness errors, {runs[1]['new_findings']} new findings"
              + (f"; {len(crashed)} of its cases killed the bare loop's process (left out)" if crashed else ""))
        if machine:
            print(f"  machine (judge_case in N processes at once, no lanes; {args.machine_seconds:g} s): "
                  f"1 {fmt(machine[1], 0)}/s; "
                  + "; ".join(f"{n} {fmt(machine[n], 0)}/s (scaling {fmt(machine_scaling(machine, n), 0, 2)}, "
                              f"eff{n} over it {fmt(ratio(eff[n], machine_scaling(machine, n)), 0, 2)})"
                              for n in jobs_list))
        if args.profile:
            print(f"  profile (jobs1's {len(ran)} cases): generate {fmt(profile['generate_ms'], 0)} ms/case (driver), "
                  f"judge {fmt(profile['judge_ms'], 0)} ms/case (worker's judge_case, no lane); "
                  f"bare {fmt(profile['bare_ms'], 0)}, campaign {fmt(profile['campaign_ms'], 0)} ms/case")
        if family in GOAL_BARE_FAMILIES and (over_bare is None or over_bare < GOAL_BARE):
            missed.append(f"{family} jobs1/bare {fmt(over_bare, 0, 3)}")
        missed += [f"{family} eff{n} {fmt(e, 0, 3)}" for n, e in eff.items() if e is None or e < GOAL_EFFICIENCY]

    report["goals"] = {"jobs1_over_bare": GOAL_BARE, "jobs1_over_bare_families": list(GOAL_BARE_FAMILIES),
                       "efficiency": GOAL_EFFICIENCY, "missed": missed}
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2))
    print()
    print(f"goal: jobs1/bare >= {GOAL_BARE} ({', '.join(GOAL_BARE_FAMILIES)}); "
          f"jobsN/(N*jobs1) >= {GOAL_EFFICIENCY} -- " + (f"missed: {'; '.join(missed)}" if missed else "met"))


if __name__ == "__main__":
    main()
