"""Cases in batches, triage off the fuzzing path, and `run --jobs N` lanes.

A batch keeps crash and hang attribution exact: the worker answers case by case, so the
case without an answer is the one that killed or stalled it, and the cases after it run
in a fresh worker. Triage runs on its own thread and worker: cases keep being counted
while a finding is minimised. Lanes share one corpus and find what one lane finds."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mpsfuzz.campaign.drafts import Drafter, Limits, draw_slice
from mpsfuzz.campaign.engine import Campaign, CampaignConfig
from mpsfuzz.campaign.lanes import _lane_config, default_draw_jobs, merge_stats
from mpsfuzz.campaign.triage_desk import TriageDesk
from mpsfuzz.events import CaseFinished, FindingRecorded, Notice, Stats
from mpsfuzz.execution.observation import ProcessEvent
from mpsfuzz.execution.outcome import CaseOutcome
from mpsfuzz.execution.worker import WorkerPool
from mpsfuzz.generation.settings import GenerationSettings, installed
from mpsfuzz.oracles.judge import judge_case

FAULT_TARGET = "mpsfuzz.testing.faults:target"


def _scalar(dtype="float32"):
    return {"shape": [], "dtype": dtype, "layout": {"offset": 0, "gaps": [], "permutation": [], "expanded": []},
            "values": {"distribution": "small_int", "seed": 0, "low": None, "high": None, "specials": []},
            "alias": None}


def _add(alpha) -> dict:
    return {"format": 3, "op": "add", "variant": "functional", "inputs": [_scalar(), _scalar()],
            "kwargs": {"alpha": alpha}}


def _prod(rank: int) -> dict:
    shape = [1] * rank
    recipe = dict(_scalar(), shape=shape, layout={"offset": 0, "gaps": [], "permutation": [], "expanded": []})
    return {"format": 3, "op": "prod", "variant": "functional", "inputs": [recipe], "kwargs": {}}


@pytest.fixture
def faults(monkeypatch):
    def set_faults(names: str):
        monkeypatch.setenv("MPSFUZZ_FAULTS", names)
    return set_faults


def test_a_crash_inside_a_batch_is_the_case_that_crashed(faults, tmp_path):
    faults("add_alpha_abort")
    batch = [_add(1), _add(1), _add(0), _add(1), _add(2)]
    with WorkerPool(FAULT_TARGET, timeout_s=20, inflight_dir=tmp_path, execute=judge_case) as pool:
        outcomes = pool.collect(pool.submit(batch, ["values"], ["add"] * len(batch)))
        assert len(outcomes) == 5
        assert [isinstance(o, ProcessEvent) for o in outcomes] == [False, False, True, False, True]
        assert outcomes[2].kind == "died" and outcomes[4].kind == "died"
        assert all(o.valid and not o.failures for o in (outcomes[0], outcomes[1], outcomes[3]))
        assert pool.restarts == 2
        # The in-flight file named the cases still to run when the worker last died.
        inflight = json.loads(next(tmp_path.glob("inflight-*.json")).read_text())
        assert inflight["case"]["kwargs"] == {"alpha": 1}
        assert [c["kwargs"] for c in inflight["then"]] == [{"alpha": 2}]


def test_a_batch_queued_behind_a_crash_runs_whole_and_the_crash_is_the_right_case(faults, tmp_path):
    """A second batch sent while the first runs queues behind it in the worker. The
    worker's death in the first is its case's, the rest of the first runs in a fresh
    worker, and the queued batch (lost with the dead worker) is sent again: every case
    of both has its own outcome, in order."""
    faults("add_alpha_abort")   # alpha != 1 aborts
    first, second = [_add(1), _add(0), _add(1)], [_add(1), _add(2), _add(1)]
    with WorkerPool(FAULT_TARGET, timeout_s=20, inflight_dir=tmp_path, execute=judge_case) as pool:
        a = pool.submit(first, ["values"], ["add"] * 3)
        b = pool.submit(second, ["values"], ["add"] * 3)
        # Both in flight: the in-flight file lists every case not answered yet, in order.
        inflight = json.loads(next(tmp_path.glob("inflight-*.json")).read_text())
        assert [inflight["case"]["kwargs"]] + [c["kwargs"] for c in inflight["then"]] == \
            [{"alpha": x} for x in (1, 0, 1, 1, 2, 1)]
        outcomes_b = pool.collect(b)   # collects the first on the way, keeping its outcomes
        outcomes_a = pool.collect(a)
    assert [isinstance(o, ProcessEvent) for o in outcomes_a] == [False, True, False]
    assert [isinstance(o, ProcessEvent) for o in outcomes_b] == [False, True, False]
    assert outcomes_a[1].kind == "died" and outcomes_b[1].kind == "died"
    assert pool.restarts == 2


def test_a_batch_sent_after_a_crash_runs_after_the_batch_the_crash_orphaned(faults):
    """Batch b was queued on a worker that died in batch a; batch c, submitted before b is
    collected, goes to the fresh worker: b is sent there again first, so that the worker
    runs b before c and b's replies are b's (run the other way, b would read c's death as
    its own second case's)."""
    faults("add_alpha_abort")   # alpha != 1 aborts
    with WorkerPool(FAULT_TARGET, timeout_s=20, execute=judge_case) as pool:
        a = pool.submit([_add(1), _add(0)], ["values"], ["add"] * 2)
        b = pool.submit([_add(1), _add(1)], ["values"], ["add"] * 2)
        outcomes_a = pool.collect(a)
        c = pool.submit([_add(1), _add(3)], ["values"], ["add"] * 2)
        outcomes_b, outcomes_c = pool.collect(b), pool.collect(c)
    assert [isinstance(o, ProcessEvent) for o in outcomes_a] == [False, True]
    assert [isinstance(o, ProcessEvent) for o in outcomes_b] == [False, False]
    assert [isinstance(o, ProcessEvent) for o in outcomes_c] == [False, True]


def test_a_batch_that_could_not_be_sent_is_not_waited_for(faults, tmp_path):
    """A submit that fails (its in-flight file cannot be written) raises and leaves
    nothing in flight: the next batch's outcomes are its own."""
    from mpsfuzz.corpus.store import CorpusWriteError
    faults("none")
    with WorkerPool(FAULT_TARGET, timeout_s=20, inflight_dir=tmp_path, execute=judge_case) as pool:
        write = pool._write_inflight

        def full_disk(*args, **kwargs):
            pool._write_inflight = write
            raise CorpusWriteError(tmp_path / "inflight.json", "No space left on device")
        pool._write_inflight = full_disk
        with pytest.raises(CorpusWriteError):
            pool.submit([_add(1)], ["values"], ["add"])
        outcomes = pool.collect(pool.submit([_add(1), _add(2)], ["values"], ["add"] * 2))
        assert pool._worker.cases == 2   # the batch that failed to go was never run
    assert len(outcomes) == 2 and all(isinstance(o, CaseOutcome) and o.valid for o in outcomes)


def test_a_queued_batch_is_timed_from_the_end_of_the_one_before(faults):
    """The queued batch's first case is timed from when the batch before it ended (by
    the worker's clock), not from its sending: a slow first batch does not make its
    first case a hang, and a hang in the first does not stop the second from running."""
    faults("prod_hang_5d")
    with WorkerPool(FAULT_TARGET, timeout_s=2, execute=judge_case) as pool:
        a = pool.submit([_prod(5), _prod(2)], ["values"], ["prod"] * 2)
        b = pool.submit([_prod(3), _prod(1)], ["values"], ["prod"] * 2)
        outcomes_a = pool.collect(a, stop_at_hang=True)
        outcomes_b = pool.collect(b, stop_at_hang=True)
    assert len(outcomes_a) == 1 and outcomes_a[0].kind == "timeout" and a.given_up
    assert len(outcomes_b) == 2 and not any(isinstance(o, ProcessEvent) for o in outcomes_b)


def test_a_queued_batch_is_given_up_unsent_once_the_caller_gives_up(faults):
    """Past the budget, a batch queued behind one that was given up is not sent to a
    fresh worker just to be given up."""
    faults("prod_hang_5d")
    with WorkerPool(FAULT_TARGET, timeout_s=30, execute=judge_case) as pool:
        a = pool.submit([_prod(5)], ["values"], ["prod"])
        b = pool.submit([_prod(2)], ["values"], ["prod"])
        stop = time.monotonic() + 1.0
        assert pool.collect(a, give_up=lambda: time.monotonic() > stop) == [] and a.given_up
        started = pool._started
        assert pool.collect(b, give_up=lambda: True) == [] and b.given_up
        assert pool._started == started   # no worker started for it


def test_a_hang_inside_a_batch_is_timed_from_the_case_before_it(faults, tmp_path):
    """The case after a slow-to-read reply is not blamed for the time the driver spent
    elsewhere: the hang is the 5-D prod, and the cases after it still run."""
    faults("prod_hang_5d")
    batch = [_prod(2), _prod(5), _prod(3)]
    with WorkerPool(FAULT_TARGET, timeout_s=2, execute=judge_case) as pool:
        handle = pool.submit(batch, ["values"], ["prod"] * 3)
        time.sleep(1.5)   # the driver is busy drawing the next slice meanwhile
        outcomes = pool.collect(handle)
    assert isinstance(outcomes[1], ProcessEvent) and outcomes[1].kind == "timeout"
    assert not isinstance(outcomes[0], ProcessEvent) and not isinstance(outcomes[2], ProcessEvent)


def test_a_hang_can_end_its_batch_instead_of_running_the_rest(faults):
    """With stop_at_hang the cases after a hang are given up (a campaign's batch is one
    op's cases: they would mostly hang too, a timeout each)."""
    faults("prod_hang_5d")
    batch = [_prod(2), _prod(5), _prod(3), _prod(5)]
    with WorkerPool(FAULT_TARGET, timeout_s=2, execute=judge_case) as pool:
        handle = pool.submit(batch, ["values"], ["prod"] * 4)
        outcomes = pool.collect(handle, stop_at_hang=True)
        assert len(outcomes) == 2 and handle.given_up
        assert not isinstance(outcomes[0], ProcessEvent) and outcomes[1].kind == "timeout"
        # The pool goes on with a fresh worker.
        assert len(pool.collect(pool.submit(batch[2:3], ["values"], ["prod"]))) == 1


def test_a_campaign_waits_one_timeout_for_a_batch_of_hangs(faults, tmp_path):
    """The first hang of a slice's batch ends it: with no shrinking, it is the only hang
    the fuzzing pool waits out (four without stop_at_hang)."""
    faults("prod_hang_5d")
    config = CampaignConfig(ops=["prod"], target_spec=FAULT_TARGET, corpus_dir=tmp_path / "corpus", seed=1,
                            max_cases=400, timeout_s=2, shrink_budget_s=0, minimise_budget_s=0, max_findings=1)
    result = Campaign(config, []).run()
    assert result.stats.failing == 1
    assert result.stats.restarts == 1, "more than one hang waited out by the fuzzing pool"


def test_desk_hands_jobs_to_its_thread_and_drains():
    seen, made = [], []

    class Pool:
        closed = False

        def close(self):
            self.closed = True

    def handle(job, pool):
        time.sleep(0.05)
        seen.append((job, pool))

    desk = TriageDesk(handle, lambda: made.append(Pool()) or made[-1])
    for job in range(3):
        desk.submit(job)
    assert desk.pending >= 1           # submit returns at once
    assert desk.drain(timeout=10)
    assert [job for job, _ in seen] == [0, 1, 2] and len(made) == 1
    assert all(pool is made[0] for _, pool in seen)
    desk.close()
    assert made[0].closed


def test_desk_records_a_job_whose_handler_raised():
    fallback = []

    def handle(job, pool):
        raise RuntimeError("triage broke")

    desk = TriageDesk(handle, lambda: None, fallback=fallback.append)
    desk.submit("job")
    assert desk.drain(timeout=10)
    assert fallback == ["job"]
    desk.close()


@pytest.mark.slow
def test_cases_keep_being_counted_while_a_finding_is_triaged(faults, tmp_path):
    """Between the failure handed to triage and its finding, the campaign ran cases."""
    faults("bitwise_noncontig")
    events = []
    config = CampaignConfig(ops=["bitwise_and", "abs", "neg", "exp", "sin", "cos"], target_spec=FAULT_TARGET,
                            corpus_dir=tmp_path / "corpus", seed=3, max_cases=1500,
                            timeout_s=5)
    result = Campaign(config, [events.append]).run()
    assert result.stats.failing >= 1
    start = next(i for i, e in enumerate(events) if isinstance(e, Notice) and "minimising" in e.message)
    found = next(i for i, e in enumerate(events) if isinstance(e, FindingRecorded))
    during = [e for e in events[start:found] if isinstance(e, CaseFinished) and not e.shrinking]
    assert during, "no case ran while the finding was triaged"


@pytest.mark.slow
def test_cases_keep_being_counted_while_a_failure_is_shrunk(faults, tmp_path):
    """Hypothesis shrinks a new failure on the triage desk's thread (its replay of the
    slice runs on the desk's worker) while the campaign's thread goes on with its slices:
    on the GPU host a clean target's crash (eager CPU's lcm, SIGFPE) took a third of a
    20-second campaign's time, shrunk on the campaign's own thread and worker."""
    faults("bitwise_noncontig")
    seen = []

    def listen(event):
        if isinstance(event, CaseFinished):
            seen.append((threading.current_thread().name, event.shrinking))
    config = CampaignConfig(ops=["bitwise_and", "abs", "neg", "exp", "sin", "cos"], target_spec=FAULT_TARGET,
                            corpus_dir=tmp_path / "corpus", seed=3, max_cases=1500, timeout_s=5)
    result = Campaign(config, [listen]).run()
    assert result.stats.failing >= 1
    shrunk = [i for i, (thread, shrinking) in enumerate(seen) if shrinking]
    assert shrunk and all(seen[i][0] == "mpsfuzz-triage" for i in shrunk), "shrinking ran off the desk"
    during = [thread for thread, _ in seen[shrunk[0]:shrunk[-1]] if thread != "mpsfuzz-triage"]
    assert during, "the campaign stopped while Hypothesis shrank the failure"


def test_a_failure_held_while_triage_runs_is_judged_again_once_triage_settles(tmp_path):
    """A provisional holder (a float16 failure in triage) holds the failures of its
    symptom instead of counting them as its sightings: once triage says the float16
    finding needs float16, the gapped float32 failure it held is a finding of its own,
    and the held float16 ones are sightings of the float16 finding."""
    from mpsfuzz.campaign.engine import FoundBug
    from mpsfuzz.campaign.finding_errors import error_type
    from mpsfuzz.generation.recipes import Case
    from mpsfuzz.oracles import Failure, symptom_key

    def sigmoid(dtype, gaps=(), shape=(3,)):
        recipe = dict(_scalar(dtype), shape=list(shape),
                      layout={"offset": 0, "gaps": list(gaps), "permutation": [], "expanded": []})
        return Case.from_json({"format": 3, "op": "sigmoid", "variant": "functional", "inputs": [recipe],
                               "kwargs": {}})

    failure = Failure("values", "wrong-values", "wrong", "detail", "high", ("wrong-values",))
    half, half_other_shape, gapped = sigmoid("float16"), sigmoid("float16", shape=(4,)), sigmoid("float32", (2,))
    campaign = Campaign(CampaignConfig(ops=["sigmoid"], target_spec=FAULT_TARGET, corpus_dir=tmp_path))
    recorded = []

    class Desk:
        _thread = None
        jobs = []

        def submit(self, job):
            self.jobs.append(job)

        def queued(self, wanted):
            return sum(1 for job in self.jobs if wanted(job))

        def on_desk(self):
            return self._thread is __import__("threading").current_thread()

    def record(err, pool, *, flaky, triage_it=True):   # triage as it would conclude
        conditions = ("dtypes:float16",) if err.case.inputs[0].dtype == "float16" else ("layout:0",)
        campaign.found.append(FoundBug(symptom_key(err.case, failure), conditions, f"sig-{len(recorded)}",
                                       case=err.case))
        recorded.append((err.case, conditions))
        return f"sig-{len(recorded) - 1}"

    campaign._intake.desk, campaign._intake.record = Desk(), record
    campaign._intake.hand_to_desk(error_type("sigmoid", "values", "wrong-values")(half, failure, "s"), False, None)

    class Pool:
        device = "cpu"

    verdicts = [campaign._verdicts.of(case, [failure], Pool())[0][0] for case in (gapped, half_other_shape, half)]
    assert verdicts == ["held", "held", "held"]
    assert not campaign._sightings                 # nothing counted before triage settles
    Desk._thread = __import__("threading").current_thread()   # the desk's thread handles the job
    campaign._handler.triaged(Desk.jobs[0], Pool())
    assert [conditions for _, conditions in recorded] == [("dtypes:float16",)]
    # the gapped failure the float16 finding does not cover is a job of its own on the desk,
    # in its order (not recorded on the way: the desk's first-rank jobs come first)
    assert len(Desk.jobs) == 2 and Desk.jobs[1][0].case is gapped
    campaign._handler.triaged(Desk.jobs[1], Pool())
    assert [conditions for _, conditions in recorded] == [("dtypes:float16",), ("layout:0",)]
    assert recorded[1][0] is gapped
    assert campaign._sightings == {"sig-0": 2}     # the two held float16 cases (one trigger shape)
    assert not any(f.provisional for f in campaign.found) and not campaign._held


def test_lanes_get_their_own_seed_ops_order_and_share_of_max_cases(tmp_path):
    config = CampaignConfig(ops=list("abcdef"), target_spec=FAULT_TARGET, corpus_dir=tmp_path, seed=10,
                            max_cases=101, max_findings=3)
    lanes = [_lane_config(config, i, 3) for i in range(3)]
    assert [lane.seed for lane in lanes] == [10, 11, 12]
    assert [lane.ops[0] for lane in lanes] == ["a", "c", "e"]
    assert all(sorted(lane.ops) == list("abcdef") for lane in lanes)
    assert sum(lane.max_cases for lane in lanes) == 101
    assert all(lane.shared_corpus and lane.max_findings is None for lane in lanes)


def test_merged_stats_sum_the_lanes():
    a, b = Stats(cases=10, valid=8, elapsed_s=5.0), Stats(cases=5, valid=5, elapsed_s=7.0)
    a.per_op = {"add": [10, 8]}
    b.per_op = {"add": [2, 2], "mul": [3, 3]}
    b.harness_by_stage = {"execute": 1}
    total = merge_stats([a, b])
    assert (total.cases, total.valid, total.elapsed_s) == (15, 13, 7.0)
    assert total.per_op == {"add": [12, 10], "mul": [3, 3]}
    assert total.harness_by_stage == {"execute": 1}


def _run(args, faults: str, cwd: Path, timeout=600):
    env = dict(os.environ, MPSFUZZ_FAULTS=faults)
    return subprocess.run([sys.executable, "-m", "mpsfuzz", "run", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=timeout)


def _found(corpus: Path) -> set:
    return {(f["op"], f["oracle"]) for f in (json.loads(p.read_text()) for p in corpus.glob("*.json"))}


@pytest.mark.slow
def test_jobs_2_finds_the_faults_jobs_1_finds(tmp_path):
    """The same three faults, found by one lane and by two lanes sharing a corpus, each
    bug recorded once."""
    faults = "triu_tril_gt3d,bitwise_noncontig,add_alpha_abort"
    expected = {("triu", "values"), ("bitwise_and", "values"), ("add", "crash")}
    common = ["--ops", "triu,bitwise_and,add", "--target", FAULT_TARGET, "--max-cases", "1500", "--seed", "5",
              "--timeout", "3", "--max-findings", "3", "--no-progress", "--no-verify-repros"]
    one = _run([*common, "--corpus", str(tmp_path / "one"), "--jobs", "1"], faults, tmp_path)
    two = _run([*common, "--corpus", str(tmp_path / "two"), "--jobs", "2"], faults, tmp_path)
    assert one.returncode == 1, one.stdout + one.stderr
    assert two.returncode == 1, two.stdout + two.stderr
    assert _found(tmp_path / "one") >= expected, one.stdout[-3000:]
    assert _found(tmp_path / "two") >= expected, two.stdout[-3000:]
    # one bug, one finding: the lanes did not each record it. (A case that timed out on a
    # loaded machine and then passed is kept apart as flaky, never counted as new.)
    records = {p.name: json.loads(p.read_text()) for p in (tmp_path / "two").glob("*.json")}
    flaky = {n for n, f in records.items() if f.get("flaky")}
    assert all("-flaky-" in n for n in flaky), records.keys()
    files = sorted(set(records) - flaky)
    assert len(files) == len({(records[n]["op"], records[n]["oracle"]) for n in files}), (files, two.stdout[-3000:])
    assert "done (" in two.stdout and "new findings" in two.stdout, two.stdout[-3000:]


def test_a_drafter_process_draws_the_slice_the_campaign_would():
    """Same op, round and seed: the same cases, in the same order, whichever process
    draws them (what lets the campaign replay and shrink a slice a drafter drew)."""
    limits = Limits(max_rank=8, max_side=8, max_numel=4096, allow_variants=True, examples=20)
    here = [draw_slice(op, 3, 11, limits) for op in ("bitwise_and", "triu")]
    drafter = Drafter(2, 11, installed())
    try:
        drafter.ahead("bitwise_and", 3, limits)
        drafter.ahead("triu", 3, limits)
        there = [drafter.take(), drafter.take()]
    finally:
        drafter.close()
    assert [d.op for d in there] == ["bitwise_and", "triu"]
    for mine, theirs in zip(here, there):
        assert len(mine.cases) >= 10
        assert [c.to_json() for c in mine.cases] == [c.to_json() for c in theirs.cases]


def test_a_drafter_draws_with_the_settings_it_is_handed(with_settings):
    """The campaign's --max-bytes reaches its drafters as an argument (issue 39): a drafter
    handed 64 GiB per input draws the large family past 2^31 elements, where this
    process, at 1 GiB, does not."""
    with_settings(max_bytes=1 << 30)
    limits = Limits(max_rank=8, max_side=8, max_numel=4096, allow_variants=True, examples=60)
    here = draw_slice("sum_large", 0, 2, limits)
    drafter = Drafter(1, 2, GenerationSettings(max_bytes=64 << 30))
    try:
        drafter.ahead("sum_large", 0, limits)
        there = drafter.take()
    finally:
        drafter.close()
    assert here.cases and all(c.inputs[0].numel * 8 <= 1 << 30 for c in here.cases)
    assert any(c.inputs[0].numel >= 2**31 for c in there.cases), [c.inputs[0].numel for c in there.cases]


def test_a_campaign_with_drafters_finds_and_shrinks_the_fault(faults, tmp_path):
    faults("bitwise_noncontig")
    config = CampaignConfig(ops=["bitwise_and", "neg"], target_spec=FAULT_TARGET, corpus_dir=tmp_path / "corpus",
                            seed=3, max_cases=1500, max_findings=1, timeout_s=5, draw_jobs=2)
    result = Campaign(config).run()
    found = [f for f, _, new in result.findings if new]
    assert [(f.op, f.oracle) for f in found] == [("bitwise_and", "values")]
    case = found[0].case
    assert max(r.numel for r in case.inputs) <= 4   # shrunk, as without drafters


@pytest.mark.parametrize("cores, jobs, drafters", [
    (16, 1, 4), (16, 2, 4), (16, 3, 3),    # lanes with cores to spare on a big machine: up to four
    (16, 4, 2), (16, 8, 2), (8, 2, 2),     # lanes of 2-4 cores on a big machine: two drafters each
    (16, 16, 0), (16, 12, 0),              # a core a lane: the driver draws
    (2, 1, 0), (4, 2, 0), (4, 1, 2),       # small machines: drafters only where 4 cores a lane
    (8, 4, 2), (6, 3, 0),
])
def test_drafters_per_lane_follow_the_cores(monkeypatch, cores, jobs, drafters):
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    assert default_draw_jobs(jobs) == drafters


def test_devices_are_taken_in_turn_by_the_lanes():
    from mpsfuzz.campaign.lanes import lane_environment
    assert [lane_environment(i, ("0", "1")) for i in range(3)] == [
        {"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}, {"CUDA_VISIBLE_DEVICES": "0"}]
    assert lane_environment(5, ()) == {}


@pytest.mark.parametrize("bad", ["x", "0,0", "1,", "-1"])
def test_bad_devices_are_a_one_line_usage_error(bad, tmp_path):
    run = _run(["--devices", bad, "--target", FAULT_TARGET, "--max-cases", "1", "--corpus", str(tmp_path / "c")],
               "none", tmp_path, timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--devices=" in lines[0] and "Traceback" not in run.stderr


# A coordinator that starts a lane stuck where it never looks at ``stop`` (as one still
# importing or starting its worker is), holding the stop event's lock as it is killed.
_STUCK_LANE = r"""
import multiprocessing, sys, time
from mpsfuzz.campaign import lanes

def lane(stop):
    lanes.ORPHAN_GRACE_S = float(sys.argv[1])
    lanes._watch_parent(stop)
    time.sleep(600)

if __name__ == "__main__":
    context = multiprocessing.get_context("fork")
    stop = context.Event()
    child = context.Process(target=lane, args=(stop,))
    child.start()
    stop._cond.acquire()   # the coordinator dies holding it
    print(child.pid, flush=True)
    time.sleep(600)
"""


def test_an_orphaned_lane_exits_by_its_deadline_even_stuck_and_unable_to_set_stop(tmp_path):
    import psutil
    script = tmp_path / "coordinator.py"
    script.write_text(_STUCK_LANE)
    coordinator = subprocess.Popen([sys.executable, str(script), "1.0"], stdout=subprocess.PIPE, text=True,
                                   cwd=Path(__file__).resolve().parents[1])
    try:
        lane = psutil.Process(int(coordinator.stdout.readline()))
        time.sleep(1.5)
        assert lane.is_running()   # a live coordinator: the lane goes on
        coordinator.kill()
        coordinator.wait(timeout=10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and lane.is_running() and lane.status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.1)
        assert not lane.is_running() or lane.status() == psutil.STATUS_ZOMBIE, "the orphaned lane lives on"
    finally:
        coordinator.kill()
        try:
            psutil.Process(lane.pid).kill()
        except Exception:
            pass


@pytest.mark.slow
def test_a_campaign_that_its_finding_ends_gives_up_the_batch_in_flight(faults, tmp_path, monkeypatch):
    """--max-findings 1: the slice already in the worker when the finding shows would only
    run past the campaign's end (a hanging op's batch costs a timeout per case), so it is
    given up, not waited out; a campaign that goes on waits for it as before."""
    faults("unary_offset")
    asked = []
    collect = WorkerPool.collect

    def spying_collect(self, batch, timeout_s=None, give_up=None, **kwargs):
        asked.append((len(batch.case_jsons), give_up is not None and give_up()))
        return collect(self, batch, timeout_s, give_up, **kwargs)
    monkeypatch.setattr(WorkerPool, "collect", spying_collect)

    def run(max_findings):
        asked.clear()
        config = CampaignConfig(ops=["neg"], target_spec=FAULT_TARGET, corpus_dir=tmp_path / f"corpus{max_findings}",
                                seed=1, max_cases=400, timeout_s=5, max_findings=max_findings)
        return Campaign(config, []).run(), [size for size, given_up in asked if given_up and size > 1]

    result, given_up = run(1)
    assert result.stopped_because == "max-findings" and result.stats.failing == 1
    assert given_up, "the batch in flight was waited out"
    result, given_up = run(None)
    assert result.stats.failing >= 1 and not given_up


def test_a_hang_is_shrunk_only_while_one_more_timeout_fits_the_shrink_budget(tmp_path):
    """A smaller variant of a hang that still hangs costs a whole timeout: past
    budget - timeout none is tried (the shrink would end past --shrink-budget); other
    failures' variants cost milliseconds and are tried up to the budget."""
    config = CampaignConfig(ops=["prod"], target_spec=FAULT_TARGET, corpus_dir=tmp_path / "corpus",
                            timeout_s=3, shrink_budget_s=10)
    campaign = Campaign(config, [])
    eight_seconds_ago = time.monotonic() - 8
    campaign._slice.shrink_started = {("prod", "hang", "timeout"): eight_seconds_ago}
    assert campaign._replay.shrink_budget_spent()
    campaign._slice.shrink_started = {("prod", "values", "wrong-values"): eight_seconds_ago}
    assert not campaign._replay.shrink_budget_spent()
    campaign._slice.shrink_started = {("prod", "hang", "timeout"): time.monotonic() - 5}
    assert not campaign._replay.shrink_budget_spent()
