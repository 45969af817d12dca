"""A campaign with a budget ends within its stop grace, whatever its cases and triage
cost: cases still running at the budget's end are given up, triage not done by the end of
the grace is left in triage-pending/ (with the failures it held), never lost, and taken
up by the next run; `run --jobs N` and the daemon leave no process behind."""
from __future__ import annotations

import json
import re
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from mpsfuzz.campaign.desk_jobs import is_slow
from mpsfuzz.campaign.engine import STOP_GRACE_MAX_S, Campaign, CampaignConfig, overrun_s, stop_grace_s
from mpsfuzz.campaign.finding_errors import error_type
from mpsfuzz.corpus.finding import Finding
from mpsfuzz.corpus.store import Corpus
from mpsfuzz.campaign.triage_desk import TriageDesk, TriageDesks
from mpsfuzz.execution.worker import WorkerPool
from mpsfuzz.generation.recipes import Case
from mpsfuzz.oracles import Failure
from mpsfuzz.oracles.judge import judge_case

FAULT_TARGET = "mpsfuzz.testing.faults:target"
# Starting the interpreter, torch, the lanes and their workers: seconds on a laptop,
# tens of seconds on a loaded CI machine (it counts against the budget, but the CLI
# starts before the campaign does), plus the exit.
STARTUP_SLACK_S = 30.0


def _recipe(dtype="float32", shape=(3,)):
    return {"shape": list(shape), "dtype": dtype,
            "layout": {"offset": 0, "gaps": [], "permutation": [], "expanded": []},
            "values": {"distribution": "small_int", "seed": 0, "low": None, "high": None, "specials": []},
            "alias": None}


def _case(op: str, shape=(3,), dtype="float32") -> dict:
    return {"format": 3, "op": op, "variant": "functional", "inputs": [_recipe(dtype, shape)], "kwargs": {}}


def test_a_run_may_overrun_its_budget_by_a_tenth_or_15_seconds_and_triage_within_that():
    assert overrun_s(None) is None and stop_grace_s(None) is None   # no budget (--max-cases): triage finishes
    assert overrun_s(20) == 15 and overrun_s(240) == 24 and overrun_s(600) == 60
    assert stop_grace_s(20) == 7 and stop_grace_s(240) == 16
    assert stop_grace_s(8 * 3600) == STOP_GRACE_MAX_S == 30
    for budget in (1, 20, 90, 240, 600, 8 * 3600):
        assert 0 < stop_grace_s(budget) < overrun_s(budget)     # the teardown fits in the rest


@pytest.mark.slow
def test_a_run_on_a_corpus_of_hundreds_of_pending_failures_ends_within_its_budget(tmp_path):
    """Issue 37, point 2: a run on a corpus holding 300 failures an earlier run left
    pending ends within its budget (measured from the command's start), whatever their
    triage would cost (every kernel hangs: each probe waits out the timeout); those that
    a finding covers are sightings at once, never jobs; the rest stay pending for the next
    run, and the summary says so."""
    corpus = tmp_path / "corpus"
    failure = Failure("values", "wrong-values", "wrong", "detail", "high", ("wrong-values",))
    writer = Campaign(CampaignConfig(ops=["neg"], target_spec=FAULT_TARGET, corpus_dir=corpus))
    for i in range(300):
        shape = (i + 1,) if i % 2 else (i // 50 + 1, i % 50 + 1)   # half of rank 1, half of rank 2
        case = Case.from_json(_case("neg", shape))
        writer._intake.keep_pending(error_type("neg", "values", "wrong-values")(case, failure, f"sig{i}"), False)
    filed = Finding.create(Case.from_json(_case("neg", (2, 2))), failure, target_name="faulty-cpu",
                           target_spec=FAULT_TARGET, device="cpu", conditions=("rank>=2",))
    path, _ = Corpus(corpus).record(filed)
    budget = 15
    done, took = _mpsfuzz("run", "--ops", "neg", "--budget", f"{budget}s", "--timeout", "2", "--seed", "1",
                          "--corpus", str(corpus), faults="every_kernel_hang", timeout=300)
    out = done.stdout + done.stderr
    assert took <= budget + overrun_s(budget), f"took {took:.0f}s: {out[-3000:]}"
    assert "150 sighting(s) of findings, 150 to triage" in out, out[-3000:]
    assert json.loads(path.read_text())["sightings"] and "not triaged in time" in out, out[-3000:]
    # Nothing is lost: each of the 300 is a sighting of a finding, a finding of this run,
    # or still pending (how many the desk got through depends on what triage met: a
    # re-run that hangs, or the first rank-1 one filed and the rest its sightings).
    left = list((corpus / "triage-pending").glob("*.json"))
    sightings = int(re.search(r"sightings of known findings (\d+)", out).group(1))
    filed_now = [p for p in corpus.glob("*.json") if p != path]
    assert left and sightings + len(left) + len(filed_now) >= 300, (sightings, len(left), len(filed_now), out[-3000:])
    assert done.returncode in (0, 1), out[-3000:]


def test_a_batch_past_its_give_up_time_is_given_up_not_waited_out(monkeypatch, tmp_path):
    """Two hangs of 20 s each in a batch: the pool answers within seconds of give_up
    turning true, with the outcomes it had; the next case runs in a fresh worker."""
    monkeypatch.setenv("MPSFUZZ_FAULTS", "prod_hang_5d")
    batch = [_case("prod", (1,)), _case("prod", (1,) * 5), _case("prod", (1,) * 5), _case("prod", (1,))]
    with WorkerPool(FAULT_TARGET, timeout_s=20, inflight_dir=tmp_path, execute=judge_case) as pool:
        sent = time.monotonic()
        submitted = pool.submit(batch, ["values"], ["prod"] * len(batch))
        outcomes = pool.collect(submitted, give_up=lambda: time.monotonic() - sent > 3)
        took = time.monotonic() - sent
        assert took < 12, f"waited {took:.1f}s for hangs it was told to give up"
        assert submitted.given_up and len(outcomes) == 1 and outcomes[0].valid
        assert pool.run(_case("prod", (2,)), ["values"], "prod").valid   # a fresh worker


def _desk_triaging_until_killed(campaign, fallback):
    """``campaign``'s desks, whose triage runs on until its worker is killed (the
    campaign abandons it): (the desks, the event set by the kill, the pool class)."""
    killed = threading.Event()

    class Pool:
        device = "cpu"

        def abandon(self):
            killed.set()

        def close(self):
            pass

    def slow_triage(err, pool, *, flaky, triage_it=True):
        killed.wait(30)                 # triage runs on until its worker is killed
        campaign._check_abandoned()     # what Recorder.record does before storing anything
        raise AssertionError("stored after it was given up")

    campaign._intake.record = slow_triage
    campaign._intake.desk = TriageDesks(campaign._handler.triaged, lambda role: Pool(), fallback=fallback, slow=is_slow)
    return campaign._intake.desk, killed, Pool


def test_triage_past_the_stop_grace_is_left_pending_with_what_it_held(tmp_path):
    """The desk's job in hand is given up (its worker killed), the job not started and
    the failure the holder held are written to triage-pending/ (the holder's own case
    once), nothing is recorded or counted afterwards, and no fallback records it."""
    failure = Failure("values", "wrong-values", "wrong", "detail", "high", ("wrong-values",))
    campaign = Campaign(CampaignConfig(ops=["sigmoid"], target_spec=FAULT_TARGET, corpus_dir=tmp_path, budget_s=10))
    fallback = []
    desk, killed, Pool = _desk_triaging_until_killed(campaign, fallback.append)
    first, second, other = (Case.from_json(_case("sigmoid", shape)) for shape in ((3,), (4,), (2, 2)))
    for case in (first, second):
        err = error_type("sigmoid", "values", "wrong-values")(case, failure, f"sig-{case.inputs[0].shape}")
        campaign._intake.hand_to_desk(err, False, campaign._intake.keep_pending(err, False))
    # failures of the symptom met meanwhile: held (one of them the holder's own case)
    assert [campaign._verdicts.of(c, [failure], Pool())[0][0] for c in (other, first)] == ["held", "held"]
    deadline = time.monotonic() + 10
    while not desk.in_hand and time.monotonic() < deadline:
        time.sleep(0.01)
    assert desk.in_hand

    campaign._defer_triage()
    desk.close(timeout=5)
    assert killed.is_set() and not fallback
    pending = [json.loads(p.read_text()) for p in (tmp_path / "triage-pending").glob("*.json")]
    shapes = sorted(tuple(p["case"]["inputs"][0]["shape"]) for p in pending)
    assert shapes == [(2, 2), (3,), (4,)]
    assert campaign.stats.left_pending == 3 and campaign.stats.new_findings == 0
    assert not [p for p in tmp_path.glob("*.json") if not p.name.startswith("inflight")]


def test_a_job_given_up_that_a_finding_filed_meanwhile_covers_is_a_sighting_not_left_pending(tmp_path):
    """Issue 37 (H200): a cuda-compiled run left 57 failures pending, among them repeats of
    bugs it had filed while they waited. A job given up at the budget that a recorded
    finding now covers is a sighting: counted, its pending file removed; one that no
    finding covers is left pending."""
    from mpsfuzz.campaign.engine import FoundBug
    from mpsfuzz.oracles import symptom_key
    failure = Failure("values", "wrong-values", "wrong", "detail", "high", ("wrong-values",))
    other = Failure("errors", "dut-raises", "raises", "RuntimeError: x", "high", ("dut-raises", "RuntimeError", "x"))
    campaign = Campaign(CampaignConfig(ops=["sigmoid"], target_spec=FAULT_TARGET, corpus_dir=tmp_path, budget_s=10))
    desk, _, _ = _desk_triaging_until_killed(campaign, lambda job: None)
    first, covered, uncovered = (Case.from_json(_case("sigmoid", shape)) for shape in ((3,), (4,), (5,)))
    for case, fail in ((first, failure), (covered, failure), (uncovered, other)):
        err = error_type("sigmoid", fail.oracle, fail.kind)(case, fail, f"sig-{case.inputs[0].shape}")
        campaign._intake.hand_to_desk(err, False, campaign._intake.keep_pending(err, False))
    deadline = time.monotonic() + 10
    while not desk.in_hand and time.monotonic() < deadline:
        time.sleep(0.01)
    # filed meanwhile (by another job of the run): the symptom of `covered`, any case
    campaign.found.append(FoundBug(symptom_key(covered, failure), None, "filed", flaky=True, case=covered))
    campaign._defer_triage()
    desk.close(timeout=5)
    pending = sorted(tuple(json.loads(p.read_text())["case"]["inputs"][0]["shape"])
                     for p in (tmp_path / "triage-pending").glob("*.json"))
    assert (5,) in pending and (4,) not in pending, pending
    assert campaign._sightings.get("filed") == 1


def test_the_last_tenth_of_a_budget_goes_to_a_first_failure_waiting_on_the_desk(tmp_path):
    """Issue 30 (H200): nearest-exact's gradient bug, met at 369 s of 420, waited behind
    the desk's other jobs and was left pending. In the budget's last tenth the fuzzing
    stops while the desk holds a target failure of an op with no finding; not before,
    and not for failures of ops that have one or of eager CPU."""
    failure = Failure("values", "wrong-values", "wrong", "detail", "high", ("wrong-values",))
    campaign = Campaign(CampaignConfig(ops=["sigmoid"], target_spec=FAULT_TARGET, corpus_dir=tmp_path,
                                       budget_s=100))
    release = threading.Event()

    class Pool:
        device = "cpu"

        def abandon(self):
            release.set()

        def close(self):
            pass

    desk = campaign._intake.desk = TriageDesks(lambda job, pool: release.wait(30), lambda role: Pool(), slow=is_slow)
    err = error_type("sigmoid", "values", "wrong-values")(Case.from_json(_case("sigmoid", (3,))), failure, "sig")
    try:
        campaign._start = time.monotonic() - 50
        assert campaign._out_of_budget() is None          # an empty desk: fuzzing goes on
        desk.submit((err, False, None, None))
        assert campaign._out_of_budget() is None          # half the budget left
        campaign._start = time.monotonic() - 95
        assert campaign._out_of_budget() == "budget"      # the last tenth: the desk's
        campaign._intake.priority = lambda job: (False, True)   # its op has a finding now
        assert campaign._out_of_budget() is None
    finally:
        release.set()
        desk.close(timeout=5)


def _mpsfuzz(*args: str, faults: str, timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    env = dict(os.environ, MPSFUZZ_FAULTS=faults, PYTHONUNBUFFERED="1")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mpsfuzz", *args, "--target", FAULT_TARGET, "--no-progress"],
                          env=env, capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - started


@pytest.mark.slow
def test_a_run_whose_triage_is_slow_ends_within_the_grace_and_the_next_run_triages_it(tmp_path):
    """Every kernel hangs: the batch at the budget's end is given up, the hang's triage
    (re-runs, reduction and a repro script, each waiting out the timeout) is cut at the
    grace and left pending; the run fails (exit 1: an untriaged failure is not a pass).
    The next run on the corpus triages it first: a finding, nothing pending."""
    corpus = tmp_path / "corpus"
    budget = 30
    first, took = _mpsfuzz("run", "--ops", "neg", "--budget", f"{budget}s", "--timeout", "2", "--seed", "1",
                           "--corpus", str(corpus), faults="every_kernel_hang", timeout=300)
    out = first.stdout + first.stderr
    assert took <= budget + stop_grace_s(budget) + STARTUP_SLACK_S, f"took {took:.0f}s: {out[-3000:]}"
    assert first.returncode == 1, out[-3000:]
    assert "not triaged in time" in out, out[-3000:]
    left = list((corpus / "triage-pending").glob("*.json"))
    assert left and not list(corpus.glob("neg-*.json")), out[-3000:]

    second, _ = _mpsfuzz("run", "--ops", "neg", "--max-cases", "1", "--timeout", "2", "--reruns", "1",
                         "--minimise-budget", "4", "--no-verify-repros", "--corpus", str(corpus),
                         faults="every_kernel_hang", timeout=600)
    out = second.stdout + second.stderr
    assert f"an earlier run left {len(left)} failure(s)" in out and f", {len(left)} to triage" in out, out[-3000:]
    assert not list((corpus / "triage-pending").glob("*.json")), out[-3000:]
    assert [json.loads(p.read_text())["oracle"] for p in corpus.glob("neg-*.json")] == ["hang"], out[-3000:]


@pytest.mark.slow
def test_the_daemon_with_lanes_ends_within_the_grace_and_leaves_no_process(tmp_path):
    """--jobs 2, every kernel hanging: the daemon's summary comes within its budget and
    grace, the process exits right after it, and nothing it started is left running."""
    corpus = tmp_path / "corpus"
    budget = 40
    env = dict(os.environ, MPSFUZZ_FAULTS="every_kernel_hang", PYTHONUNBUFFERED="1")
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "mpsfuzz", "daemon", "--ops", "neg,abs", "--jobs", "2",
                             "--budget", f"{budget}s", "--timeout", "2", "--seed", "3", "--corpus", str(corpus),
                             "--target", FAULT_TARGET, "--no-progress"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    family: set = set()
    try:
        while proc.poll() is None and time.monotonic() - started < 300:
            try:
                family.update(psutil.Process(proc.pid).children(recursive=True))
            except psutil.Error:
                pass
            time.sleep(0.5)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    out = proc.stdout.read()
    assert took <= budget + stop_grace_s(budget) + STARTUP_SLACK_S, f"took {took:.0f}s: {out[-3000:]}"
    assert "done (budget)" in out and "without a result" not in out, out[-3000:]
    assert proc.returncode == 1, out[-3000:]          # the hangs are left pending, not lost
    assert list((corpus / "triage-pending").glob("*.json")), out[-3000:]
    assert len(family) >= 4, family                   # lanes, forkservers, workers were seen
    alive = [p for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE
             and not any("resource_tracker" in part for part in p.cmdline())]
    assert not alive, [(p.pid, p.cmdline()[-3:]) for p in alive]


def _sigterm_while_a_hang_waits_for_triage(command: list[str], corpus: Path) -> tuple[int, float, str]:
    """Run ``mpsfuzz COMMAND`` on every kernel hanging, send SIGTERM once a hang waits for
    triage in ``corpus``: (exit status, seconds it took to stop, its output)."""
    env = dict(os.environ, MPSFUZZ_FAULTS="every_kernel_hang", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "mpsfuzz", *command, "--ops", "neg", "--timeout", "5",
                             "--slice", "4", "--seed", "1", "--corpus", str(corpus), "--target", FAULT_TARGET,
                             "--no-progress"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not list((corpus / "triage-pending").glob("*.json")) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stdout.read()[-3000:]
            time.sleep(0.25)
        assert list((corpus / "triage-pending").glob("*.json")), "no failure handed to triage within 240 s"
        asked = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        took = time.monotonic() - asked
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, took, proc.stdout.read()


@pytest.mark.slow
def test_sigterm_during_the_triage_of_a_hang_stops_the_daemon_within_10_seconds(tmp_path):
    """Told to stop while its cases hang and a hang is being triaged (each probe waiting
    out the timeout), the daemon neither waits out the batch nor drains triage: it is
    gone within 10 s, the failures left pending."""
    corpus = tmp_path / "corpus"
    code, took, out = _sigterm_while_a_hang_waits_for_triage(["daemon", "--jobs", "1"], corpus)
    assert took <= 10.0, f"took {took:.1f}s to stop: {out[-3000:]}"
    assert code == 1 and "done (stopped)" in out, out[-3000:]
    assert list((corpus / "triage-pending").glob("*.json")), out[-3000:]


@pytest.mark.parametrize("jobs", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_sigterm_stops_a_run_with_its_summary_and_run_record_and_exit_143(tmp_path, jobs):
    """Issue 37, point 3: `kill -TERM` (and coreutils' `timeout`, which CI uses) ends
    `mpsfuzz run` as a budget does, within 10 s, while a case hangs and a hang waits for
    triage: the summary and the run record are written, no in-flight file is left, the
    failures not triaged stay pending, and the exit status is 143 (128 + SIGTERM)."""
    corpus = tmp_path / "corpus"
    code, took, out = _sigterm_while_a_hang_waits_for_triage(["run", "--jobs", str(jobs), "--budget", "10m"], corpus)
    assert took <= 10.0, f"took {took:.1f}s to stop: {out[-3000:]}"
    assert code == 143 and "done (stopped)" in out, out[-3000:]
    records = [json.loads(p.read_text()) for p in (corpus / "runs").glob("*.json")]
    assert [r["stopped_because"] for r in records] == ["stopped"], out[-3000:]
    assert not list(corpus.glob("inflight-*.json")), out[-3000:]
    assert list((corpus / "triage-pending").glob("*.json")), out[-3000:]


def test_pending_failures_of_lanes_running_now_are_not_taken_up_as_an_earlier_runs(tmp_path):
    """`run --jobs N`: the lane that takes up what an earlier run left pending starts after
    the others have begun handing failures to their desks (each writes its failure to
    triage-pending/ first). It takes up only files written before the run started: a
    file written since is another lane's, in triage there, and is left where it is."""
    failure = Failure("values", "wrong-values", "wrong", "detail", "high", ("wrong-values",))
    writer = Campaign(CampaignConfig(ops=["sigmoid"], target_spec=FAULT_TARGET, corpus_dir=tmp_path))
    errs = [error_type("sigmoid", "values", "wrong-values")(Case.from_json(_case("sigmoid", shape)), failure,
                                                            f"sig-{len(shape)}") for shape in ((3,), (2, 2))]
    earlier = writer._intake.keep_pending(errs[0], False)
    time.sleep(0.05)
    started = time.time()
    time.sleep(0.05)
    now = writer._intake.keep_pending(errs[1], False)
    lane = Campaign(CampaignConfig(ops=["sigmoid"], target_spec=FAULT_TARGET, corpus_dir=tmp_path,
                                   pending_before=started))
    handed, notices = [], []
    lane._intake.hand_to_desk = lambda err, flaky, path: handed.append(path)
    lane.listeners.append(lambda event: notices.append(getattr(event, "message", "")))
    lane._intake.resume_pending(started)
    assert handed == [earlier] and now.exists()
    assert [n for n in notices if "earlier run left" in n] == [
        f"an earlier run left 1 failure(s) in {tmp_path / 'triage-pending'}: 0 sighting(s) of findings, 1 to triage"]
    assert lane.stats.harness_errors == 0


def test_a_crash_or_device_fault_never_waits_behind_value_failures_nor_they_behind_it(tmp_path):
    """Issue 37: with every fault on, a 2-core campaign met its abort and hang faults and
    left them queued behind hundreds of value failures (a crash, hang or device fault
    needs a fresh process for each re-run, so it went after the quick ones of its rank).
    Two desks: a device fault is taken by the slow desk while the quick desk is busy,
    and a value failure met after it is not held up by it either; the budget's last
    tenth waits for both."""
    campaign = Campaign(CampaignConfig(ops=["sigmoid", "tanh"], target_spec=FAULT_TARGET, corpus_dir=tmp_path,
                                       budget_s=100))
    fault = Failure("errors", "device-fault", "raises", "CUDA error: invalid argument", "critical", ("device-fault",))
    wrong = Failure("values", "wrong-values", "wrong", "detail", "high", ("wrong-values",))
    slow = (error_type("sigmoid", "errors", "device-fault")(Case.from_json(_case("sigmoid")), fault, "f"),
            False, None, None)
    quick = (error_type("tanh", "values", "wrong-values")(Case.from_json(_case("tanh")), wrong, "w"),
             False, None, None)
    taken = []
    release = {"first": threading.Event(), "sigmoid": threading.Event(), "tanh": threading.Event()}

    def handle(job, pool):
        name = job[0].case.op if job[0] is not None else "first"
        taken.append(name)
        release[name].wait(30)

    desk = campaign._intake.desk = TriageDesks(handle, lambda role: None, priority=campaign._intake.priority,
                                               slow=is_slow)
    try:
        desk.submit((None,))           # a value failure that holds the quick desk until released
        deadline = time.monotonic() + 10
        # (taken before the others are queued: under load the desk's thread could start
        # after all three were, and take the queue's highest priority first)
        while taken != ["first"] and time.monotonic() < deadline:
            time.sleep(0.01)
        desk.submit(slow)
        desk.submit(quick)
        while len(taken) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sorted(taken) == ["first", "sigmoid"]       # the device fault did not wait
        campaign._start = time.monotonic() - 95
        assert campaign._out_of_budget() == "budget"      # the last tenth: both are the desks'
        release["first"].set()
        while len(taken) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert taken[2] == "tanh"                          # nor the value failure behind the fault
        release["tanh"].set()
        release["sigmoid"].set()
        assert desk.drain(timeout=10)
    finally:
        for event in release.values():
            event.set()
        desk.close(timeout=5)