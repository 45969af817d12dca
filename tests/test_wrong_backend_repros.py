"""Every bug mpsfuzz reports can be filed (issue 37, point 6): a finding of eager CPU's
(``cpu-bug``) or of both backends' (``both``) gets a repro script, verified in a fresh
interpreter like a target finding's, and an issue draft addressed to the backend that
is wrong.

Eager CPU's bugs are emulated by :mod:`mpsfuzz.testing.cpu_faults` (a clean target while
eager CPU runs a faulty kernel; ``MPSFUZZ_CPU_FAULTS`` and ``MPSFUZZ_CPU_TARGET_FAULTS``
give a fresh interpreter the same faults). A crash both backends share is a real one of
eager CPU's (torch 2.13: ``lcm(-2**63, -7)`` is SIGFPE), which a target running eager
CPU's kernel meets too."""
from __future__ import annotations

import dataclasses
import json

import pytest

from mpsfuzz.corpus.finding import Finding
from mpsfuzz.corpus.store import Corpus
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import DEFAULT, Failure, worker_oracles
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.reports import issue, wrong_backend
from mpsfuzz.reports.repro import generate, repro_for
from mpsfuzz.reports.repro_writer import ReproWriter, reverified
from mpsfuzz.reports.verify import judge, run_and_judge
from mpsfuzz.testing.cpu_faults import CPU_FAULTS, TARGET_FAULTS, CpuFaultTarget

CPU_TARGET = "mpsfuzz.testing.cpu_faults:target"
FAULT_TARGET = "mpsfuzz.testing.faults:target"
CUMSUM = Case("cumsum", (TensorRecipe((6,), "float64", Layout(), ValueRecipe("normal", seed=3)),), (("dim", 0),))
# lcm(-2**63, -7): eager CPU's kernel dies with SIGFPE (torch 2.13)
LCM = Case("lcm", (TensorRecipe((1,), "int64", values=ValueRecipe("int_range", low=-7, high=-7,
                                                                   specials=((0, "lowest"),))),
                   TensorRecipe((1,), "int64", values=ValueRecipe("int_range", low=-7, high=-7))))


def judged(case: Case, cpu_faults: tuple[str, ...], target_faults: tuple[str, ...] = ()) -> Finding:
    """The one finding of ``case`` judged against a clean target (or one with
    ``target_faults``) while eager CPU runs ``cpu_faults``, as the engine records it."""
    target = CpuFaultTarget(tuple(CPU_FAULTS[n] for n in cpu_faults), tuple(TARGET_FAULTS[n] for n in target_faults))
    try:
        (failure,) = [Failure.from_json(f) for f in judge_case(case, target, worker_oracles(DEFAULT)).failures]
    finally:
        target.close()
    return Finding.create(case, failure, target_name=target.name, target_spec=CPU_TARGET, device="cpu")


def found_on(finding: Finding, device: str) -> Finding:
    """The same finding as testing ``device`` would have recorded it."""
    return dataclasses.replace(finding, target_name=device.split(":")[0], target_spec=device.split(":")[0],
                               device=device)


def the_three_values(finding: Finding, juror: str) -> list[str]:
    """What the script prints at the first disputed position: eager CPU's value, the
    reference's and the target's."""
    jury = finding.failure.details["jury"]
    position = jury["positions"][0]
    value = next(v for v in jury["votes"] if v["juror"] == juror)["values"][0]
    return [f"eager CPU {position['cpu']!r}", f"{juror} {value!r}", f"cpu {position['target']!r}"]


@pytest.fixture(scope="module")
def cpu_bug() -> Finding:
    finding = judged(CUMSUM, ("cpu_cumsum",))
    assert finding.status == "cpu-bug" and finding.failure.details["jury"]["decided_by"] == ["numpy"]
    return finding


def test_eager_cpus_wrong_values_get_a_verified_script_that_shows_cpu_off_the_reference(cpu_bug, tmp_path,
                                                                                        monkeypatch):
    """A cpu-bug finding as runs before issue 37 left it (no script) is verified by the
    next run's desk (reverified, as a Reverification job): its script prints eager CPU's value beside numpy's and
    the target's and fails on eager CPU's. With eager CPU's kernel right it passes."""
    monkeypatch.setenv("MPSFUZZ_CPU_FAULTS", "cpu_cumsum")
    monkeypatch.delenv("MPSFUZZ_CPU_TARGET_FAULTS", raising=False)
    cpu_bug = dataclasses.replace(cpu_bug, repro={
        "script": None, "verified": None,
        "detail": "no standalone script: a CPU-reference bug (the float64 arbiter blamed CPU): no device repro"})
    path = tmp_path / "cumsum-arbiter.json"
    path.write_text(json.dumps(cpu_bug.to_json()))
    writer = ReproWriter(tmp_path, timeout_s=120)
    assert reverified(Corpus(tmp_path), path, cpu_bug, writer.confirm) == "verified"
    repro = json.loads(path.read_text())["repro"]
    assert repro["verified"] is True and wrong_backend.CPU_OFF in repro["detail"], repro.get("output")
    for words in the_three_values(cpu_bug, "numpy"):
        assert words in repro["output"], repro["output"]
    assert "references = {(0, (0,)): (" in repro["script"] and "'numpy': " in repro["script"]
    # eager CPU's cumsum right again: the script runs to the end
    monkeypatch.setenv("MPSFUZZ_CPU_FAULTS", "")
    clean = run_and_judge(generate(cpu_bug), target_spec=CPU_TARGET, timeout_s=120)
    assert clean.reproduced is False and "ran to the end" in clean.detail, clean.output


def test_mpsfuzz_repro_prints_a_cpu_bugs_script(cpu_bug, tmp_path, capsys):
    from mpsfuzz.cli import main
    path = tmp_path / "cumsum-arbiter.json"
    path.write_text(json.dumps(cpu_bug.to_json()))
    assert main(["repro", str(path), "--no-verify"]) == 0
    out = capsys.readouterr().out
    compile(out, "repro.py", "exec")
    assert "_off_reference(expected, references)" in out and "torch.cumsum(" in out


def test_a_cpu_bug_draft_is_addressed_to_cpu_whatever_device_found_it(cpu_bug):
    for device, target_label in (("cuda:0", "module: cuda"), ("mps", "module: mps")):
        finding = found_on(cpu_bug, device)
        title = issue.title(finding)
        assert title.startswith("[CPU] `") and title.endswith("returns wrong values"), title
        assert "CPU `" not in title and "[CUDA]" not in title and "[MPS]" not in title
        draft = issue.draft(finding)
        assert f"{finding.target_name}, the device under test, agrees with the reference; eager CPU does not" \
            in draft
        assert "Expected: eager CPU's result equal to the reference's" in draft
        assert "module: cpu" in issue.labels(finding) and target_label not in issue.labels(finding)


def test_a_wrong_value_both_backends_share_gets_a_script_showing_both_off_the_reference(monkeypatch):
    """The target's cumsum 25% too large, eager CPU's wrong at its first element: numpy
    has both wrong. The script fails only where both are off (with the target right,
    it shows eager CPU alone off, which is not this finding)."""
    both = judged(CUMSUM, ("cpu_cumsum",), ("target_cumsum_inflated",))
    assert both.status == "both" and both.failure.details["jury"]["verdict"] == "both-wrong"
    monkeypatch.setenv("MPSFUZZ_CPU_FAULTS", "cpu_cumsum")
    monkeypatch.setenv("MPSFUZZ_CPU_TARGET_FAULTS", "target_cumsum_inflated")
    repro = repro_for(both, timeout_s=120)
    assert repro["verified"] is True and wrong_backend.BOTH_OFF in repro["detail"], repro.get("output")
    for words in the_three_values(both, "numpy"):
        assert words in repro["output"], repro["output"]
    monkeypatch.setenv("MPSFUZZ_CPU_TARGET_FAULTS", "")
    target_right = run_and_judge(generate(both), target_spec=CPU_TARGET, timeout_s=120)
    assert target_right.reproduced is False and "another assertion failed" in target_right.detail
    on_cuda = found_on(both, "cuda:0")
    assert issue.title(on_cuda) == "[CPU, CUDA] `cumsum` returns wrong values"
    assert {"module: cpu", "module: cuda"} <= set(issue.labels(on_cuda))
    assert "Neither cuda nor eager CPU agrees with the reference" in issue.draft(on_cuda)


@pytest.mark.slow
def test_a_crash_both_backends_share_is_shown_on_eager_cpu_alone_too(monkeypatch):
    """A target that runs eager CPU's kernel dies first (int64 lcm of the lowest int64 and
    -7: SIGFPE, on every x86 vector width); triage runs the minimal case on eager CPU alone,
    which dies the same way, and files the crash as both's. Its script
    runs the case on eager CPU alone in a child interpreter first, then on the device."""
    from mpsfuzz.execution.worker import WorkerPool
    from mpsfuzz.triage.pipeline import triage
    from mpsfuzz.triage.probe import Prober
    monkeypatch.setenv("MPSFUZZ_FAULTS", "none")        # the fault target: eager CPU's kernels
    pool = WorkerPool(FAULT_TARGET, timeout_s=20.0, execute=judge_case)
    try:
        failures, _, died = Prober(pool, DEFAULT, fresh=True).failures(LCM)
        if not died:
            pytest.fail("eager CPU's lcm(-2**63, -7) no longer dies here: pick another shared crash")
        crash = next(f for f in failures if f.oracle == "crash")
        assert crash.blame == "target"                        # the target ran (and died) first
        done = triage(LCM, crash, pool, DEFAULT, reruns=1, budget_s=5.0, timeout_s=20.0, localise_it=False)
    finally:
        pool.close()
    assert done.failure.blame == "both", done.failure.message
    assert "eager CPU dies the same way" in done.failure.message
    finding = Finding.create(done.case, done.failure, target_name=pool.target_name, target_spec=FAULT_TARGET,
                             device="cpu")
    repro = repro_for(finding, timeout_s=120)
    assert repro["verified"] is True, (repro["detail"], repro.get("output"))
    assert f"{wrong_backend.CPU_ALONE} died with SIGFPE" in repro["output"]
    assert issue.title(found_on(finding, "cuda:0")) == "[CPU, CUDA] `torch.lcm` crashes the process (SIGFPE)"


def test_a_crash_of_eager_cpus_alone_is_its_own_and_shown_after_the_devices_calls(monkeypatch):
    """The target refuses the lcm cleanly; the executor's CPU reference dies: a cpu-bug
    crash, whose script runs the device's calls, then eager CPU's, which kill it."""
    from mpsfuzz.execution.worker import WorkerPool
    from mpsfuzz.triage.probe import Prober
    monkeypatch.setenv("MPSFUZZ_CPU_FAULTS", "")
    monkeypatch.setenv("MPSFUZZ_CPU_TARGET_FAULTS", "target_lcm_refuses_overflow")
    pool = WorkerPool(CPU_TARGET, timeout_s=20.0, execute=judge_case)
    try:
        failures, _, died = Prober(pool, DEFAULT, fresh=True).failures(LCM)
    finally:
        pool.close()
    assert died, failures
    crash = next(f for f in failures if f.oracle == "crash")
    assert crash.blame == "cpu", crash.message
    finding = Finding.create(LCM, crash, target_name=pool.target_name, target_spec=CPU_TARGET, device="cpu")
    assert finding.status == "cpu-bug"
    repro = repro_for(finding, timeout_s=120)
    assert repro["verified"] is True, (repro["detail"], repro.get("output"))
    assert "cpu raises RuntimeError lcm: the result does not fit in int64" in repro["output"]
    assert issue.title(found_on(finding, "mps")) == "[CPU] `torch.lcm` crashes the process (SIGFPE)"


def test_the_verifier_reads_which_backend_showed_it():
    """A script of eager CPU's values must fail on CPU's assertion, a crash of eager CPU's
    after the device's calls, and a both finding's must show eager CPU alone too."""
    cpu_off = {"outcome": "assertion", "message": wrong_backend.CPU_OFF}
    assert judge(cpu_off, 1, "", f"AssertionError: {wrong_backend.CPU_OFF} at [(0, (0,))]").reproduced
    assert not judge(cpu_off, 1, "", "AssertionError: cpu is off the reference at [(0, (0,))]").reproduced
    cpu_crash = {"outcome": "signal", "signal": "SIGFPE", "stdout": wrong_backend.DEVICE_RETURNED}
    assert judge(cpu_crash, -8, f"mps: {wrong_backend.DEVICE_RETURNED}\n", "").reproduced
    assert not judge(cpu_crash, -8, "", "").reproduced                   # the device's call died
    both_crash = {"outcome": "signal", "signal": "SIGFPE",
                  "cpu_alone": f"{wrong_backend.CPU_ALONE} died with SIGFPE"}
    assert judge(both_crash, -8, f"{wrong_backend.CPU_ALONE} died with SIGFPE\n", "").reproduced
    verdict = judge(both_crash, -8, f"{wrong_backend.CPU_ALONE} ran to the end\n", "")
    assert not verdict.reproduced and "eager CPU alone does not show it" in verdict.detail
