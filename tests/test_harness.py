"""A campaign never dies of one case (issue 12, point 1).

mpsfuzz failing on a case (generating, executing, judging, triaging, recording it, or a
listener) is a *harness error*: counted, logged with the case and traceback under
``<corpus>/runs/``, and the campaign goes on; an op that keeps failing is set aside. Only
usage errors and a corpus that cannot be written end a run early (exit 2, one line), and a
run most of whose cases were lost exits 2.

Engine rules are proved in-process with a scripted worker pool (fast, deterministic);
the whole path with ``mpsfuzz run`` against ``mpsfuzz.testing.chaos`` (a target that
raises and returns junk, a CPU that lacks uint kernels, oracles that raise) and with a
file size limit that makes every corpus write fail (a full disk)."""
from __future__ import annotations

import errno
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import assume
from hypothesis import strategies as st

from mpsfuzz import cli
from mpsfuzz.campaign import engine, recorder
from mpsfuzz.campaign.engine import Campaign, CampaignConfig
from mpsfuzz.campaign.finding_errors import error_type
from mpsfuzz.corpus.store import Corpus, CorpusWriteError, atomic_write_json, load_findings
from mpsfuzz.events import CaseFinished, HarnessError, Notice
from mpsfuzz.execution.observation import ProcessEvent
from mpsfuzz.execution.outcome import CaseOutcome
from mpsfuzz.generation.opspec import OpSpec, any_shape
from mpsfuzz.generation.recipes import Case, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import ORACLES, Failure, all_oracles
from mpsfuzz.reports.error_log import ErrorLog, read_errors

REPO = Path(__file__).resolve().parents[1]
CHAOS_TARGET = "mpsfuzz.testing.chaos:target"
CLEAN_TARGET = "mpsfuzz.testing.faults:target"


# -- a scripted worker pool ---------------------------------------------------------------

def wrong_values(op: str) -> Failure:
    return Failure(oracle="values", kind="wrong-values", title=f"`{op}` returns wrong values",
                   message="Mismatched elements: 1 / 1", severity="high", dedup_key=("wrong-values",))


CLEAN = CaseOutcome(valid=True)


def failing(*failures: Failure) -> CaseOutcome:
    return CaseOutcome(valid=True, failures=tuple(f.to_json() for f in failures))


class ScriptedPool:
    """Stands in for WorkerPool: ``behaviour[op](case_json)`` says what a case of ``op``
    gives (a CaseOutcome, a ProcessEvent, or an exception to raise); clean otherwise."""

    behaviour: dict = {}
    calls: list = []
    recycled = 0

    def __init__(self, target_spec, *, timeout_s=20.0, inflight_dir=None, **options):
        self.target_name, self.device = "scripted", "cpu"

    def run(self, case_json, oracle_names, op, timeout_s=None):
        ScriptedPool.calls.append(op)
        out = self.behaviour.get(op, lambda c: CLEAN)(case_json)
        if isinstance(out, BaseException):
            raise out
        return out

    def submit(self, case_jsons, oracle_names, ops):
        return list(zip(case_jsons, ops))

    def collect(self, batch, timeout_s=None, give_up=None, stop_at_hang=False):
        # A case the pool could not run: the real pool raises for the whole batch; the
        # engine judges what it gets back per case the same way.
        outcomes = []
        for case_json, op in batch:
            try:
                outcomes.append(self.run(case_json, None, op))
            except CorpusWriteError:
                raise  # as the real pool's in-flight write does
            except Exception as exc:
                outcomes.append(exc)
        return outcomes

    def fresh(self):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


@pytest.fixture
def scripted(monkeypatch):
    ScriptedPool.behaviour, ScriptedPool.calls = {}, []
    monkeypatch.setattr(engine, "WorkerPool", ScriptedPool)
    return ScriptedPool


def campaign(tmp_path, ops, *, max_cases=80, oracles=("values", "crash"), listeners=(), **kw) -> tuple[Campaign, list]:
    events: list = []
    config = CampaignConfig(ops=list(ops), target_spec="scripted", corpus_dir=tmp_path / "corpus", oracles=oracles,
                            seed=5, max_cases=max_cases, slice_examples=10, minimise_budget_s=2.0, reruns=1,
                            shrink_budget_s=5.0, **kw)
    return Campaign(config, [events.append, *listeners]), events


def harness_errors(events, stage=None) -> list[HarnessError]:
    return [e for e in events if isinstance(e, HarnessError) and stage in (None, e.stage)]


def notices(events) -> list[str]:
    return [e.message for e in events if isinstance(e, Notice)]


def _spec(name, **kw) -> OpSpec:
    base = dict(name=name, family="test", fn=torch.neg, shapes=any_shape(1, max_rank=2), dtypes=("float32",),
                doc="test op")
    base.update(kw)
    return OpSpec(**base)


def _sometimes_broken_shapes(draw, budget):
    # a shape builder with a bug on a quarter of its draws
    if draw(st.integers(0, 3)) == 3:
        raise ZeroDivisionError("shape builder bug")
    return any_shape(1, max_rank=2)(draw, budget)


def _always_broken_args(draw, shapes, dtypes):
    raise KeyError("argument builder bug")


def _never_satisfiable_shapes(draw, budget):
    assume(False)


# -- the engine, in-process -------------------------------------------------------------------

def test_generation_errors_are_counted_and_the_campaign_goes_on(tmp_path, scripted, registered):
    registered(_spec("test.sometimes_broken", shapes=_sometimes_broken_shapes))
    registered(_spec("test.never_generates", args=_always_broken_args))
    c, events = campaign(tmp_path, ["test.sometimes_broken", "test.never_generates"], max_cases=60)
    result = c.run()
    assert result.stopped_because == "max-cases"
    generate = harness_errors(events, "generate")
    assert any("ZeroDivisionError: shape builder bug" == e.error for e in generate)
    assert any("_sometimes_broken_shapes" in e.traceback for e in generate)
    assert c.stats.harness_by_stage["generate"] == len(generate)
    # the op that never generates is set aside after a few tries, with a notice
    assert "test.never_generates" in c.stats.set_aside
    assert any(n.startswith("test.never_generates: set aside") for n in notices(events))
    never = [e for e in generate if e.op == "test.never_generates"]
    assert len(never) == engine.SET_ASIDE_STREAK
    assert scripted.calls.count("test.sometimes_broken") == 60


def test_hypothesis_errors_without_a_finding_are_harness_errors(tmp_path, scripted, registered):
    registered(_spec("test.unsatisfiable", shapes=_never_satisfiable_shapes))
    registered(_spec("test.fine"))
    c, events = campaign(tmp_path, ["test.unsatisfiable", "test.fine"], max_cases=100)
    assert c.run().stopped_because == "max-cases"
    unsat = [e for e in harness_errors(events, "generate") if e.op == "test.unsatisfiable"]
    assert unsat and all(e.error.startswith("Unsatisfiable") for e in unsat)
    assert not any("hypothesis stopped" in n for n in notices(events))
    assert "test.unsatisfiable" in c.stats.set_aside


def test_execution_errors_are_counted_logged_and_an_op_that_keeps_failing_is_set_aside(tmp_path, scripted, registered):
    registered(_spec("test.pool_raises"))
    registered(_spec("test.worker_internal"))
    registered(_spec("test.fine"))
    scripted.behaviour = {
        "test.pool_raises": lambda c: RuntimeError("the pool broke"),
        # the executor or an oracle raised inside the worker: its traceback comes back
        "test.worker_internal": lambda c: CaseOutcome.harness_error('Traceback (most recent call last):\n'
                                                                    '  File "x.py"\nTypeError: oracle bug\n')}
    errors = ErrorLog(tmp_path / "corpus")
    c, events = campaign(tmp_path, ["test.pool_raises", "test.worker_internal", "test.fine"], max_cases=60,
                         listeners=[errors])
    result = c.run()
    assert result.stopped_because == "max-cases"
    execute = harness_errors(events, "execute")
    assert {e.op for e in execute} == {"test.pool_raises", "test.worker_internal"}
    assert any(e.error == "RuntimeError: the pool broke" for e in execute)
    assert any(e.error == "TypeError: oracle bug" and "x.py" in e.traceback for e in execute)
    assert set(c.stats.set_aside) == {"test.pool_raises", "test.worker_internal"}
    # Set aside at the end of the batch (a slice) in which the streak was reached.
    assert engine.SET_ASIDE_STREAK <= scripted.calls.count("test.pool_raises") <= engine.SET_ASIDE_STREAK + 10
    assert c.stats.harness_errors == c.stats.cases_lost
    assert 2 * engine.SET_ASIDE_STREAK <= c.stats.harness_errors <= 2 * (engine.SET_ASIDE_STREAK + 10)
    # the errors log: one line per harness error, with the case and its traceback
    logged = read_errors(errors.path)
    assert errors.path.parent == tmp_path / "corpus" / "runs" and errors.path.name.endswith(".errors.jsonl")
    assert len(logged) == c.stats.harness_errors
    for record in logged:
        assert Case.from_json(record["case"]).op == record["op"]
        assert record["stage"] == "execute" and record["traceback"]


def test_a_listener_that_raises_is_a_harness_error(tmp_path, scripted, registered):
    registered(_spec("test.fine"))

    def broken(event):
        if isinstance(event, CaseFinished):
            raise ValueError("listener bug")
    c, events = campaign(tmp_path, ["test.fine"], max_cases=20, listeners=[broken])
    assert c.run().stopped_because == "max-cases"
    report = harness_errors(events, "report")
    assert len(report) == 20 and report[0].case_json["op"] == "test.fine"
    assert c.stats.cases_lost == 0  # the cases ran and were judged: not lost


def test_a_process_oracle_that_raises_is_a_harness_error(tmp_path, scripted, chaos_oracles):
    c, events = campaign(tmp_path, ["abs"], oracles=("values", "crash", "chaos-process"))
    died = ProcessEvent(op="abs", target_name="scripted", kind="died", returncode=-11, stderr_tail="")
    scripted.behaviour = {"abs": lambda cj: died}
    case = Case("abs", (TensorRecipe((2,), "float32", values=ValueRecipe("normal", seed=1)),))
    failures = c._failures_of(case, ScriptedPool("scripted"))
    assert [f.oracle for f in failures] == ["crash"]  # the crash oracle still judged it
    judge = harness_errors(events, "judge")
    assert len(judge) == 1 and "the process oracle raised on a died" in judge[0].error


def test_triage_that_raises_keeps_the_finding_unexplained(tmp_path, scripted, registered, monkeypatch):
    registered(_spec("test.wrong"))
    scripted.behaviour = {"test.wrong": lambda c: failing(wrong_values("test.wrong"))}

    def broken_triage(*args, **kwargs):
        raise NotImplementedError('"lt_cpu" not implemented for \'UInt32\'')
    monkeypatch.setattr(recorder, "triage", broken_triage)
    c, events = campaign(tmp_path, ["test.wrong"], max_cases=30)
    result = c.run()
    assert result.stopped_because == "max-cases"
    triaged = harness_errors(events)
    assert triaged and {e.stage for e in triaged} == {"triage"}
    assert "lt_cpu" in triaged[0].error and triaged[0].case_json["op"] == "test.wrong"
    # each failure is stored as Hypothesis shrank it, unexplained: nothing found is lost
    assert len(result.findings) == len(triaged)
    for finding, path, new in result.findings:
        assert new and finding.conditions is None and finding.op == "test.wrong"
        assert [f.signature for _, f in load_findings([path])[0]] == [finding.signature]


def test_a_corpus_write_error_ends_the_campaign_at_once_keeping_what_is_on_disk(tmp_path, scripted, registered,
                                                                                monkeypatch):
    registered(_spec("test.wrong_a"))
    registered(_spec("test.wrong_b"))
    scripted.behaviour = {op: (lambda c, op=op: failing(wrong_values(op)))
                          for op in ("test.wrong_a", "test.wrong_b")}
    real_fsync, written = os.fsync, []

    def fsync(fd):  # the disk fills up after the first finding file
        name = os.readlink(f"/proc/self/fd/{fd}")
        if ".test.wrong" in name:
            if written:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            written.append(name)
        return real_fsync(fd)
    monkeypatch.setattr(os, "fsync", fsync)
    c, events = campaign(tmp_path, ["test.wrong_a", "test.wrong_b"], max_cases=200)
    with pytest.raises(CorpusWriteError, match="No space left on device") as raised:
        c.run()
    assert "test.wrong_b" in raised.value.path.name
    found, problems = load_findings([tmp_path / "corpus"])
    assert problems == [] and [f.op for _, f in found] == ["test.wrong_a"]
    assert not list((tmp_path / "corpus").glob(".*.tmp")) and not list((tmp_path / "corpus").glob("inflight*"))
    assert harness_errors(events) == []


def test_a_corpus_write_error_inside_a_case_is_not_shrunk_as_a_failure(tmp_path, scripted, registered):
    registered(_spec("test.fine"))
    scripted.behaviour = {"test.fine": lambda c: CorpusWriteError(tmp_path / "inflight-1.json", "File too large")}
    c, events = campaign(tmp_path, ["test.fine"], max_cases=50)
    with pytest.raises(CorpusWriteError, match="File too large"):
        c.run()
    assert scripted.calls == ["test.fine"]


def test_guarded_report_splitting():
    finding = error_type("op", "values", "wrong-values")(None, wrong_values("op"), "sig")
    other = RuntimeError("not a finding")
    found, others = engine.split_report(ExceptionGroup("two bugs", [finding, other]))
    assert found == [finding] and others == [other]
    assert engine.error_line(RuntimeError("a\nb")) == "RuntimeError: a"

    class Unprintable(Exception):
        def __str__(self):
            raise ValueError
    assert engine.error_line(Unprintable()).startswith("Unprintable")


# -- the corpus: writes that fail ----------------------------------------------------------------

def test_atomic_write_on_a_full_disk_raises_and_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "f.json"
    atomic_write_json(path, {"a": 1})

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(CorpusWriteError) as raised:
        atomic_write_json(path, {"a": 2})
    assert str(raised.value) == f"cannot write the corpus {path}: No space left on device"
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_other_os_errors_are_not_an_unwritable_corpus(tmp_path):
    with pytest.raises(OSError) as raised:
        atomic_write_json(tmp_path / ("x" * 300 + ".json"), {})
    assert raised.value.errno == errno.ENAMETOOLONG and not isinstance(raised.value, CorpusWriteError)


def test_a_corpus_below_a_regular_file_cannot_be_written(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    with pytest.raises(CorpusWriteError, match="Not a directory"):
        Corpus(tmp_path / "file" / "corpus").check_writable()
    with pytest.raises(CorpusWriteError, match="not a folder"):
        Corpus(tmp_path / "file").check_writable()
    Corpus(tmp_path / "ok").check_writable()
    assert list((tmp_path / "ok").iterdir()) == []
    code = cli.main(["run", "--target", CLEAN_TARGET, "--ops", "abs", "--max-cases", "5",
                     "--corpus", str(tmp_path / "file" / "corpus")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0] == f"mpsfuzz: error: cannot write the corpus {tmp_path / 'file' / 'corpus'}: Not a directory"


# -- usage errors and exit codes ------------------------------------------------------------------

NONSENSE = [
    (["run", "--timeout", "-1"], "--timeout=-1"),
    (["run", "--timeout", "0"], "--timeout=0"),
    (["run", "--timeout", "nan"], "--timeout=nan"),
    (["run", "--max-cases", "0"], "--max-cases=0"),
    (["run", "--budget", "0"], "--budget=0"),
    (["run", "--budget", "0s"], "--budget=0s"),
    (["run", "--budget", "-5"], "--budget='-5'"),
    (["run", "--slice", "0"], "--slice=0"),
    (["run", "--max-side", "0"], "--max-side=0"),
    (["run", "--max-rank", "-1"], "--max-rank=-1"),
    (["run", "--reruns", "0"], "--reruns=0"),
    (["run", "--minimise-budget", "-1"], "--minimise-budget=-1"),
    (["run", "--shrink-budget", "-2"], "--shrink-budget=-2"),
    (["run", "--max-findings", "0"], "--max-findings=0"),
    (["replay", "x.json", "--timeout", "0"], "--timeout=0"),
    (["replay", "x.json", "--runs", "0"], "--runs=0"),
    (["report", "x", "--timeout", "-3"], "--timeout=-3"),
    (["repro", "x.json", "--timeout", "0"], "--timeout=0"),
]


@pytest.mark.parametrize("args,echo", NONSENSE, ids=[" ".join(a) for a, _ in NONSENSE])
def test_nonsensical_flags_are_one_line_usage_errors(args, echo, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = cli.main(args)
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("mpsfuzz: error: ") and echo in lines[0], lines[0]
    assert list(tmp_path.iterdir()) == []  # nothing started, nothing written


def test_exit_code_when_most_cases_were_lost():
    assert cli.exit_code(findings=0, cases_lost=6, attempted=10) == 2
    assert cli.exit_code(findings=3, cases_lost=6, attempted=12) == 1
    assert cli.exit_code(cases_lost=4, attempted=4) == 0  # too few to say
    assert cli.exit_code(cases_lost=5, attempted=10) == 0  # half is not most


# -- the chaos target, end to end -----------------------------------------------------------------

@pytest.fixture
def chaos_oracles(monkeypatch):
    """The chaos module's oracles in the registry for this test only (other tests compare
    the registry with `mpsfuzz oracles`). Its CPU that lacks kernels stays off here."""
    monkeypatch.delenv("MPSFUZZ_CHAOS_OLD_CPU", raising=False)
    all_oracles()
    before = dict(ORACLES)
    from mpsfuzz.testing import chaos
    chaos.register_oracles()
    yield chaos
    ORACLES.clear()
    ORACLES.update(before)


def test_chaos_target_misbehaves_on_a_deterministic_share_of_calls(chaos_oracles):
    target = chaos_oracles.ChaosTarget(rate=0.5)
    outcomes = []
    for n in range(1, 41):
        x = torch.arange(float(n))
        try:
            out = target.run(torch.neg, x)
        except Exception as exc:
            outcomes.append(type(exc).__name__)
            continue
        outcomes.append("real" if isinstance(out, torch.Tensor) and out.shape == x.shape and out.dtype == x.dtype
                        and torch.equal(out, -x) else "junk")
    assert 8 <= outcomes.count("real") <= 32 and "junk" in outcomes
    assert {"ChaosError", "TypeError", "UnprintableError", "ValueError"} & set(outcomes)
    again = chaos_oracles.ChaosTarget(rate=0.5)
    x = torch.arange(3.0)
    first = type(_outcome(target, x))
    assert all(type(_outcome(again, x)) is first for _ in range(3))  # the same call misbehaves alike


def _outcome(target, x):
    try:
        return target.run(torch.neg, x)
    except Exception as exc:
        return exc


def test_old_cpu_lacks_unsigned_kernels_with_torchs_own_words(chaos_oracles):
    u = torch.tensor([1, 2], dtype=torch.uint32)
    with chaos_oracles.OldCpuMode():
        with pytest.raises(NotImplementedError, match="^\"lt_cpu\" not implemented for 'UInt32'$"):
            u < 1
        with pytest.raises(NotImplementedError, match="^\"where_cpu\" not implemented for 'UInt16'$"):
            torch.where(torch.tensor([True, False]), u.to(torch.uint16), u.to(torch.uint16))
        assert torch.equal(torch.tensor([1, 2], dtype=torch.int32) < 2, torch.tensor([True, False]))
        assert u.to(torch.int64).tolist() == [1, 2]  # only the listed kernels are missing


def _env(**chaos) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPSFUZZ_")}
    env.update({k: str(v) for k, v in chaos.items()})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return env


class Run:
    def __init__(self, args, env, parent: Path, preexec_fn=None):
        self.cwd = Path(tempfile.mkdtemp(prefix="run-", dir=parent))
        self.proc = subprocess.Popen([sys.executable, "-m", "mpsfuzz", *map(str, args)], cwd=self.cwd, env=env,
                                     text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=preexec_fn)
        self._result = None

    def result(self) -> tuple[int, str, str]:
        if self._result is None:
            out, err = self.proc.communicate(timeout=240)
            self._result = (self.proc.returncode, out, err)
        return self._result

    code = property(lambda self: self.result()[0])
    out = property(lambda self: self.result()[1])
    err = property(lambda self: self.result()[2])


def _tiny_files():
    # A full disk: no file of this process tree may grow past 200 bytes (Python ignores
    # SIGXFSZ, so such a write fails with EFBIG). A case's in-flight file is larger.
    resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))


CHAOS_ORACLES = "values,metadata,variants,layout,errors,arbiter,crash,hang,chaos,chaos-verdict,chaos-process"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("harness")
    started: dict = {"work": work}
    # 1. chaos everywhere, alone (its budget is wall time: a starved run tests little): a
    # target that raises and returns junk on a quarter of its calls, oracles that raise,
    # a CPU without uint kernels, an op that no oracle can judge (neg, first so that its
    # turn comes); ops with uint dtypes among the others.
    started["chaos"] = Run(["run", "--target", CHAOS_TARGET, "--ops", "neg,abs,lt,where,sort,sum,index_select",
                            "--oracles", CHAOS_ORACLES, "--budget", "40s", "--slice", 8, "--corpus", work / "chaos",
                            "--shrink-budget", 3, "--minimise-budget", 2, "--reruns", 2, "--no-verify-repros",
                            "--no-progress", "--seed", 4],
                           _env(MPSFUZZ_CHAOS_RATE=0.25, MPSFUZZ_CHAOS_ORACLE_RATE=0.05, MPSFUZZ_CHAOS_OLD_CPU=1,
                                MPSFUZZ_CHAOS_BROKEN_OPS="neg"), work)
    started["chaos"].result()
    # 2. an oracle that raises on every case: nothing can be judged
    started["lost"] = Run(["run", "--target", CHAOS_TARGET, "--ops", "abs,neg", "--oracles", "values,chaos",
                           "--budget", "60s", "--corpus", work / "lost", "--no-progress", "--seed", 4],
                          _env(MPSFUZZ_CHAOS_RATE=0, MPSFUZZ_CHAOS_ORACLE_RATE=1), work)
    # 3. a full disk, with a finding in the corpus already
    corpus = work / "full"
    case = Case("abs", (TensorRecipe((2,), "float32", values=ValueRecipe("normal", seed=1)),))
    from mpsfuzz.corpus.finding import Finding
    path, _ = Corpus(corpus).record(Finding.create(case, wrong_values("abs"), target_name="faulty-cpu",
                                                   target_spec=CLEAN_TARGET, device="cpu"))
    started["full-finding"] = (path, path.read_bytes())
    started["full"] = Run(["run", "--target", CLEAN_TARGET, "--ops", "abs,neg", "--budget", "60s",
                           "--corpus", corpus, "--no-progress"], _env(MPSFUZZ_FAULTS="none"), work,
                          preexec_fn=_tiny_files)
    for run in started.values():
        if isinstance(run, Run):
            run.result()
    return started


def _errors_log(corpus: Path) -> list[dict]:
    logs = list((corpus / "runs").glob("*.errors.jsonl"))
    assert len(logs) == 1, logs
    return read_errors(logs[0])


@pytest.mark.slow
def test_chaos_campaign_reaches_its_budget_with_harness_errors_logged(runs):
    run = runs["chaos"]
    assert run.code in (0, 1), run.out[-3000:] + run.err
    assert "Traceback" not in run.out + run.err and "mpsfuzz:" not in run.err  # (torch may warn there)
    assert "done (budget)" in run.out
    logged = _errors_log(runs["work"] / "chaos")
    assert len(logged) >= engine.SET_ASIDE_STREAK
    summary = next(line for line in run.out.splitlines() if line.startswith("harness errors (mpsfuzz failed"))
    assert f": {len(logged)} (" in summary and ".errors.jsonl" in run.out
    for record in logged:
        assert record["stage"] in ("generate", "execute", "judge", "triage", "record", "report", "hypothesis")
        assert "Traceback" in record["traceback"] or record["stage"] == "generate"
    with_case = [r for r in logged if r["case"]]
    assert with_case and all(Case.from_json(r["case"]).op == r["op"] for r in with_case)
    errors = {r["error"] for r in logged}
    # the chaos reached mpsfuzz's own code: oracles raising, junk results, a CPU without kernels
    assert any("chaos" in e for e in errors), errors
    # the op no oracle can judge was set aside, the campaign went on with the others
    assert "neg: set aside for the rest of the run" in run.out
    record = json.loads(next((runs["work"] / "chaos" / "runs").glob("*.json")).read_text())
    assert record["stopped_because"] == "budget"
    assert record["harness_errors"]["total"] == record["internal_errors"] == len(logged)
    assert record["harness_errors"]["log"].endswith(".errors.jsonl") and "neg" in record["set_aside"]


@pytest.mark.slow
def test_a_run_whose_cases_mostly_could_not_execute_exits_2(runs):
    run = runs["lost"]
    assert run.code == 2, run.out[-2000:] + run.err
    assert "Traceback" not in run.out + run.err
    assert "done (every op set aside)" in run.out
    lines = run.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mpsfuzz: error: ")
    assert "could not be generated, run or judged" in lines[0]
    assert ".errors.jsonl" in lines[0]
    # at least a streak per op (a case this torch cannot judge is no harness error: it breaks a streak)
    assert len(_errors_log(runs["work"] / "lost")) >= 2 * engine.SET_ASIDE_STREAK


@pytest.mark.slow
def test_a_full_disk_stops_the_run_with_one_line_and_keeps_the_findings(runs):
    run = runs["full"]
    assert run.code == 2, run.out[-2000:] + run.err
    lines = run.err.strip().splitlines()
    assert len(lines) == 1, run.err
    assert lines[0].startswith(f"mpsfuzz: error: cannot write the corpus {runs['work'] / 'full'}/inflight-")
    assert lines[0].endswith(": File too large")
    path, before = runs["full-finding"]
    assert path.read_bytes() == before
    assert "note:" not in run.out  # not a note per case, as if every case failed to start


def test_a_failure_being_shrunk_when_the_budget_runs_out_is_recorded_not_lost(tmp_path, scripted, registered):
    """Nothing found is lost: the budget ending during Hypothesis' shrinking still
    records what it had found (triage reduces and explains it)."""
    registered(_spec("test.fails_large"))

    def fails_when_large(case_json):
        big = any(r["shape"] and r["shape"][0] >= 2 for r in case_json["inputs"])
        return failing(wrong_values("test.fails_large")) if big else CLEAN
    scripted.behaviour["test.fails_large"] = fails_when_large
    # Few cases: the budget ends while the first failure is being shrunk.
    c, events = campaign(tmp_path, ["test.fails_large"], max_cases=6)
    result = c.run()
    assert result.stopped_because == "max-cases"
    found = [f for f, _, new in result.findings if new]
    assert [f.op for f in found] == ["test.fails_large"], notices(events)
    assert list((tmp_path / "corpus").glob("test.fails_large-*.json"))


def raises_on_device(op: str) -> Failure:
    return Failure(oracle="errors", kind="dut-raises", title=f"`{op}` raises", message="boom", severity="high",
                   dedup_key=("dut-raises", "RuntimeError", "boom"))


def test_a_failure_met_only_while_shrinking_another_is_its_own_finding(tmp_path, scripted, registered):
    """Issue 30 (two H200 runs): SDPA's SIGFPE over zero key heads was met only while the
    desk shrank another SDPA failure, and dropped there (ten worker deaths, no finding).
    Here the second failure needs what only shrinking reaches: a one-element input whose
    values' seed is 0."""
    registered(_spec("test.two_symptoms"))

    def two_symptoms(case_json):
        x = case_json["inputs"][0]
        if x["shape"] == [1] and x["values"]["seed"] == 0:
            return failing(raises_on_device("test.two_symptoms"))
        if x["shape"] and x["shape"][0] >= 1:
            return failing(wrong_values("test.two_symptoms"))
        return CLEAN
    scripted.behaviour["test.two_symptoms"] = two_symptoms
    c, events = campaign(tmp_path, ["test.two_symptoms"], max_cases=10)
    result = c.run()
    oracles = sorted(f.oracle for f, _, new in result.findings if new)
    assert oracles == ["errors", "values"], notices(events)


def test_layout_notes_print_one_line_per_op_and_list_every_layout(tmp_path, scripted, registered):
    """Issue 30 (H200): 95 console lines of layout-propagation notes, one per op and set of
    layouts. The note file keeps every layout; the console says each op once."""
    registered(_spec("test.drops_format"))
    note = Failure(oracle="metadata", kind="wrong-memory-format", title="format", message="format",
                   severity="note", blame="note", dedup_key=("wrong-memory-format",),
                   details={"target_format": "contiguous", "cpu_format": "channels_last"})
    scripted.behaviour["test.drops_format"] = lambda case_json: failing(note)
    c, events = campaign(tmp_path, ["test.drops_format"], max_cases=60)
    c.run()
    lines = [m for m in notices(events) if "layout propagation" in m]
    assert len(lines) == 1, lines
    from mpsfuzz.corpus.notes import layout_notes
    (entries,) = [n["entries"] for n in layout_notes([tmp_path / "corpus"])]
    assert len(entries) >= 2


def test_the_triage_desk_takes_jobs_in_their_priority_order():
    import threading

    from mpsfuzz.campaign.triage_desk import TriageDesk
    started, release, order = threading.Event(), threading.Event(), []

    def handle(job, pool):
        started.set()
        release.wait(5)
        order.append(job)
    desk = TriageDesk(handle, lambda: None, priority=lambda job: (job[0] == "cpu", job[1]))
    desk.submit(("target", 9))          # in hand at once
    assert started.wait(5)
    for job in [("cpu", 0), ("target", 2), ("cpu", 1), ("target", 1), ("target", 1)]:
        desk.submit(job)
    release.set()
    assert desk.drain(5)
    desk.close()
    assert order == [("target", 9), ("target", 1), ("target", 1), ("target", 2), ("cpu", 0), ("cpu", 1)]


def test_a_worker_runs_torch_on_one_thread_unless_told_otherwise(monkeypatch):
    """A worker per lane, each with torch's default pool of every core, oversubscribed a
    16-core host (8 lanes ran 0.12 of 8x one lane); one thread each ran 0.82."""
    from mpsfuzz.execution.worker import WorkerPool
    from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
    case = Case("neg", (TensorRecipe((2,), "float32", Layout(), ValueRecipe()),)).to_json()
    for asked, expected in ((None, 1), ("3", 3)):
        if asked is None:
            monkeypatch.delenv("MPSFUZZ_WORKER_THREADS", raising=False)
        else:
            monkeypatch.setenv("MPSFUZZ_WORKER_THREADS", asked)
        pool = WorkerPool("cpu", timeout_s=60)
        try:
            assert pool.call(threads_in_worker, case, op="neg", timeout_s=60) == {"threads": expected}
        finally:
            pool.close()


def threads_in_worker(case, target):
    import torch
    return {"threads": torch.get_num_threads()}


def test_a_worker_keeps_what_it_loaded_out_of_the_collectors_sight():
    """The leak oracle runs a full garbage collection when memory looks kept; with torch
    loaded that took 90-180 ms, paid about once in a thousand cases (0.84 -> 0.63 ms a
    case judged once frozen). Frozen: torch's objects; left to the collector: few."""
    from mpsfuzz.execution.worker import WorkerPool
    from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
    case = Case("neg", (TensorRecipe((2,), "float32", Layout(), ValueRecipe()),)).to_json()
    pool = WorkerPool("cpu", timeout_s=60)
    try:
        seen = pool.call(collector_view, case, op="neg", timeout_s=60)
    finally:
        pool.close()
    assert seen["frozen"] > 50_000, seen
    assert seen["tracked"] < seen["frozen"] / 5, seen


def collector_view(case, target):
    import gc
    return {"frozen": gc.get_freeze_count(), "tracked": len(gc.get_objects())}


def test_output_dtypes_from_the_meta_device_are_shared_across_sizes_and_values(monkeypatch):
    """The widened reference's output dtypes come from one meta run per input dtypes,
    0-dim inputs and scalar-argument kinds: other sizes and values reuse it, while a
    0-dim input, which promotes as a scalar, gets its own (and its own dtype)."""
    from mpsfuzz.execution import executor
    from mpsfuzz.generation import catalogue
    calls = []
    real = executor._meta_dtypes
    monkeypatch.setattr(executor, "_meta_dtypes", lambda spec, case, kw: calls.append(case) or real(spec, case, kw))
    monkeypatch.setattr(executor, "_EXPECTED", {})
    spec = catalogue.get("add")

    def dtypes(shapes, alpha):
        case = Case("add", (TensorRecipe(shapes[0], "float16"), TensorRecipe(shapes[1], "float32")),
                    (("alpha", alpha),))
        return executor._expected_dtypes(spec, case, {"alpha": alpha})
    assert dtypes([(3,), (3,)], 2) == dtypes([(2, 5), (5,)], 7) == [torch.float32]
    assert len(calls) == 1
    assert dtypes([(3,), ()], 2) == [torch.float16]   # the 0-dim float32 promotes as a scalar
    assert len(calls) == 2


def test_a_pool_given_up_leaves_no_in_flight_file(tmp_path):
    """A triage desk past its campaign's stop grace abandons its pool: the case it gave
    up is no crash, and its in-flight file outlived a clean run (a CUDA device run left
    ``inflight-PID-triage.json`` in the corpus, docs/real-findings.md)."""
    from mpsfuzz.execution.worker import WorkerPool
    from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
    case = Case("neg", (TensorRecipe((2,), "float32", Layout(), ValueRecipe()),)).to_json()
    pool = WorkerPool("cpu", timeout_s=60, inflight_dir=tmp_path, role="triage", execute=threads_in_worker)
    try:
        pool.submit([case, case], ("values",), ["neg", "neg"])
        assert [p.name for p in tmp_path.glob("inflight-*")] == [f"inflight-{os.getpid()}-triage.json"]
        pool.abandon()
        assert not list(tmp_path.glob("inflight-*"))
    finally:
        pool.close()


def test_the_triage_desk_asks_the_priority_when_it_takes_a_job():
    """Issue 30 (H200): a target failure of an op with no finding, queued at 369 s of 420,
    waited behind failures whose ops had found their first finding since they were
    queued. The order is asked of the campaign when a job is taken."""
    import threading

    from mpsfuzz.campaign.triage_desk import TriageDesk
    found, order = set(), []
    started, release = threading.Event(), threading.Event()

    def handle(job, pool):
        started.set()
        release.wait(5)
        order.append(job)
        found.add(job[0])                   # this op has a finding now
    desk = TriageDesk(handle, lambda: None, priority=lambda job: (job[0] in found,))
    desk.submit(("gru", 0))                 # in hand at once
    assert started.wait(5)
    for job in [("gru", 1), ("gru", 2), ("nearest_exact", 3)]:   # queued while gru has none
        desk.submit(job)
    release.set()
    assert desk.drain(5)
    desk.close()
    assert order == [("gru", 0), ("nearest_exact", 3), ("gru", 1), ("gru", 2)]
