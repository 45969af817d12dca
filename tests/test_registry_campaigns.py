"""The corpus as a bug registry, end to end through `mpsfuzz run` and `mpsfuzz replay` on
the fault-injecting target: one finding per cause, flaky faults kept apart, replay
history, and a corpus that survives concurrent writers and SIGKILL."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mpsfuzz.corpus.store import Corpus

from test_fault_campaigns import FAULT_TARGET, findings_in, mpsfuzz


def run_args(ops: str, corpus: Path, *extra: str, cases: int = 400, seed: int = 1) -> list[str]:
    return ["run", "--ops", ops, "--target", FAULT_TARGET, "--max-cases", str(cases), "--seed", str(seed),
            "--corpus", str(corpus), "--timeout", "3", "--no-progress", *extra]


@pytest.mark.slow
def test_two_faults_on_one_op_give_exactly_two_findings(tmp_path):
    corpus = tmp_path / "corpus"
    run = mpsfuzz(*run_args("sigmoid", corpus, cases=600), faults="sigmoid_noncontig,sigmoid_half", cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    found = findings_in(corpus)
    assert len(found) == 2, [(f["signature_key"], f["explanation"]) for f in found]
    by_cause = {("layout:0" in f["conditions"], "dtypes:float16" in f["conditions"]): f for f in found}
    assert set(by_cause) == {(True, False), (False, True)}
    strided, half = by_cause[True, False], by_cause[False, True]
    assert "non-contiguous" in strided["explanation"] and "all float dtypes" in strided["explanation"]
    assert "only float16" in half["explanation"]
    assert half["case"]["inputs"][0]["dtype"] == "float16"
    assert strided["case"]["inputs"][0]["dtype"] == "float32"


@pytest.mark.slow
def test_one_fault_across_dtypes_and_shapes_gives_one_finding(tmp_path):
    corpus = tmp_path / "corpus"
    run = mpsfuzz(*run_args("triu", corpus, cases=500), faults="triu_tril_gt3d", cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    (finding,) = findings_in(corpus)
    assert finding["conditions"] == ["rank>=4"]
    assert finding["case"]["inputs"][0]["shape"] == [1, 1, 1, 1]
    # every later failing case (other dtypes, shapes, layouts, variants) was a sighting
    assert finding["times_seen"] >= 20, finding["times_seen"]
    assert finding["torch_versions"] and finding["reproducibility"]["failed"] == finding["reproducibility"]["runs"]
    assert "every dtype class tried fails" in finding["explanation"]


def test_flaky_fault_is_marked_flaky_and_does_not_fail_the_run(tmp_path):
    corpus = tmp_path / "corpus"
    run = mpsfuzz(*run_args("erfinv", corpus, cases=300), faults="erfinv_stale_graph", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr   # flaky findings are not new target bugs
    (finding,) = findings_in(corpus)
    assert finding["flaky"] and finding["status"] == "flaky"
    assert finding["reproducibility"]["failed"] < finding["reproducibility"]["runs"]
    assert not finding["reproducibility"]["cold_failed"]
    assert "flaky 1" in " ".join(run.stdout.split()) and "depends on earlier calls" in run.stdout


@pytest.mark.slow
def test_a_fault_that_depends_on_earlier_calls_is_one_flaky_finding(tmp_path):
    """Every other call is wrong: the values oracle sees it now and then, the layout
    oracle (two calls per case) every time. Both are the same state-dependent bug."""
    corpus = tmp_path / "corpus"
    run = mpsfuzz(*run_args("digamma", corpus, cases=300), faults="digamma_every_other", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    (finding,) = findings_in(corpus)
    assert finding["status"] == "flaky" and finding["signature_key"] == ["digamma", "flaky"]
    assert finding["times_seen"] >= 2 and "depends on earlier calls" in run.stdout
    assert not finding["repro"]["verified"]   # never shown as a deterministic repro


@pytest.mark.slow
def test_replay_records_fixed_and_then_a_regression(tmp_path):
    corpus = tmp_path / "corpus"
    assert mpsfuzz(*run_args("neg", corpus, cases=200), faults="unary_offset", cwd=tmp_path).returncode == 1
    fixed = mpsfuzz("replay", str(corpus), faults="none", cwd=tmp_path)
    assert fixed.returncode == 0 and "fixed" in fixed.stdout, fixed.stdout + fixed.stderr
    (after_fix,) = findings_in(corpus)
    assert after_fix["status"] == "fixed" and after_fix["fixed_since"] == after_fix["torch_version"]
    assert [h["result"] for h in after_fix["history"]] == ["fixed"]
    back = mpsfuzz("replay", str(corpus), faults="unary_offset", cwd=tmp_path)
    assert back.returncode == 1 and "regression" in back.stdout, back.stdout
    (again,) = findings_in(corpus)
    assert again["regression"] and again["status"] == "new"
    assert [h["result"] for h in again["history"]] == ["fixed", "still-fails"]


@pytest.mark.slow
def test_two_runs_writing_one_corpus_at_once_lose_nothing(tmp_path):
    corpus = tmp_path / "corpus"
    env = dict(os.environ, MPSFUZZ_FAULTS="triu_tril_gt3d,bitwise_noncontig")
    runs = [subprocess.Popen([sys.executable, "-m", "mpsfuzz", *run_args("triu,bitwise_and", corpus, cases=300,
                                                                         seed=seed)],
                             cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for seed in (1, 2)]
    outputs = [r.communicate(timeout=300)[0] for r in runs]
    # whichever run recorded a bug first reports it new (exit 1); for the other it is a
    # sighting of a known finding
    assert 1 in [r.returncode for r in runs] and set(r.returncode for r in runs) <= {0, 1}, outputs
    found, problems = Corpus(corpus).load()
    assert problems == []
    assert sorted(f.op for _, f in found) == ["bitwise_and", "triu"], [f.signature_key for _, f in found]
    # both runs recorded each bug: the second write of a signature is a sighting
    for _, f in found:
        assert f.times_seen >= 2
        assert list(f.sightings) == [Corpus(corpus).writer_id]


@pytest.mark.slow
def test_a_run_killed_with_sigkill_leaves_a_loadable_corpus(tmp_path):
    corpus = tmp_path / "corpus"
    env = dict(os.environ, MPSFUZZ_FAULTS="triu_tril_gt3d,bitwise_noncontig,unary_offset")
    proc = subprocess.Popen([sys.executable, "-m", "mpsfuzz", *run_args("triu,bitwise_and,neg", corpus,
                                                                        cases=100000)],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(corpus.glob("*-values-*.json"))) < 2:
        time.sleep(0.2)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)   # the run and its workers, wherever they are
    proc.wait(10)
    found, problems = Corpus(corpus).load()
    assert problems == [] and len(found) >= 2
    before = {f.signature: f.times_seen for _, f in found}
    # the corpus goes on: a new run adds sightings to what is there, no duplicates
    run = mpsfuzz(*run_args("triu,bitwise_and,neg", corpus, cases=150, seed=3),
                  faults="triu_tril_gt3d,bitwise_noncontig,unary_offset", cwd=tmp_path)
    assert run.returncode in (0, 1), run.stdout + run.stderr
    after = {f.signature: f.times_seen for _, f in Corpus(corpus).load()[0]}
    assert set(before) <= set(after)
    assert all(after[s] >= n for s, n in before.items())


_WRITER = """
import sys
from pathlib import Path
from mpsfuzz.corpus.store import atomic_write_json
path = Path(sys.argv[1])
print("ready", flush=True)
n = 0
while True:
    n += 1
    atomic_write_json(path, {"version": n % 2, "payload": ["x" * 100] * 20000})
"""


@pytest.mark.slow
def test_sigkill_in_the_middle_of_a_write_leaves_the_old_or_the_new_file(tmp_path):
    path = tmp_path / "finding.json"
    for attempt in range(8):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.05 + 0.037 * attempt)    # land at different points of a write
        proc.kill()
        proc.wait(10)
        if path.exists():
            data = json.loads(path.read_text())   # never a half-written file
            assert data["version"] in (0, 1) and len(data["payload"]) == 20000
    assert path.exists()
