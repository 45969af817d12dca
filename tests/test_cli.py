"""The `mpsfuzz` command line, run as a user would (`python -m mpsfuzz ...`): listing ops,
one-line usage errors with exit 2, replaying a corpus with a corrupt file in it, a clean
run that exits 0, and seeded runs that reproduce.

Every command starts torch (about 2 s of CPU), so the short commands start at once in one
module fixture and the tests only look at the results. The replay reads a finding written
directly (tests/written_findings.py). The clean run is the default run's one campaign here;
the two seeded campaigns (a finding, and the same finding again) run with -m slow: the
fault campaigns find and record the same bug by default (issue 39)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from written_findings import TRIU_4D, TRIU_4D_EXPLAINED, written_finding

FAULT_TARGET = "mpsfuzz.testing.faults:target"
REPO = Path(__file__).resolve().parents[1]


def _env(faults: str | None) -> dict:
    env = dict(os.environ)
    env.pop("MPSFUZZ_FAULTS", None)
    if faults is not None:
        env["MPSFUZZ_FAULTS"] = faults
    # the package is installed editable, but make the checkout importable whatever the cwd
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


class Run:
    """One `python -m mpsfuzz ...` started in its own fresh folder (so an internal-error
    log or a default corpus folder would show up there)."""

    def __init__(self, args, *, faults: str | None, parent: Path):
        self.cwd = Path(tempfile.mkdtemp(prefix="run-", dir=parent))
        self.proc = subprocess.Popen([sys.executable, "-m", "mpsfuzz", *map(str, args)], cwd=self.cwd,
                                     env=_env(faults), text=True, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self._result = None

    def result(self) -> tuple[int, str, str]:
        if self._result is None:
            out, err = self.proc.communicate(timeout=240)
            self._result = (self.proc.returncode, out, err)
        return self._result

    @property
    def code(self) -> int:
        return self.result()[0]

    @property
    def out(self) -> str:
        return self.result()[1]

    @property
    def err(self) -> str:
        return self.result()[2]


def fault_campaign_args(corpus: Path) -> list:
    return ["run", "--ops", "triu", "--target", FAULT_TARGET, "--max-cases", 400, "--seed", 1,
            "--corpus", corpus, "--timeout", 3, "--max-findings", 1, "--no-progress"]


def findings_in(corpus: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(corpus.glob("*.json"))]


USAGE_ERRORS = {  # name -> (args, MPSFUZZ_FAULTS, text the error line must contain)
    "unknown op": (["run", "--ops", "nosuchop", "--max-cases", "1"], None, "nosuchop"),
    "bad budget": (["run", "--ops", "add", "--budget", "10x"], None, "--budget='10x'"),
    "bad max-cases": (["run", "--ops", "add", "--max-cases", "ten"], None, "--max-cases='ten'"),
    "negative seed": (["run", "--ops", "add", "--seed", "-3"], None, "--seed"),
    "unknown oracle": (["run", "--ops", "add", "--oracles", "foo", "--max-cases", "1"], None, "foo"),
    "unknown target": (["run", "--ops", "add", "--target", "nosuch", "--max-cases", "1"], None, "nosuch"),
    "unavailable target": (["run", "--ops", "add", "--target", "cuda", "--max-cases", "1"], None,
                           "not available"),
    "module target does not import": (["run", "--ops", "add", "--target", "no_such_module:thing",
                                       "--max-cases", "1"], None, "no_such_module"),
    "fault target rejects its configuration": (["run", "--ops", "add", "--target", FAULT_TARGET,
                                                "--max-cases", "1"], "bogus", "bogus"),
    "unknown subcommand": (["frobnicate"], None, "frobnicate"),
    "no subcommand": ([], None, "command"),
    "unknown option": (["run", "--frobnicate"], None, "--frobnicate"),
    "replay of a folder with no findings": (["replay", "{empty}"], None, "no readable findings"),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """`ops` and the usage errors (short, each one starting torch), all at once."""
    work = tmp_path_factory.mktemp("cli")
    (work / "empty").mkdir()
    started: dict = {"work": work}
    started["ops"] = Run(["ops"], faults=None, parent=work)
    for name, (args, faults, _) in USAGE_ERRORS.items():
        started[name] = Run([a.format(empty=work / "empty") for a in args], faults=faults, parent=work)
    for run in list(started.values())[1:]:
        run.result()
    return started


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory) -> dict:
    """Two identical seeded campaigns against the triu fault (-m slow)."""
    work = tmp_path_factory.mktemp("cli-campaigns")
    started: dict = {"work": work}
    # --timeout 3 is a hang deadline per case: the two alone, no burst beside them
    started["campaign-a"] = Run(fault_campaign_args(work / "corpus-a"), faults="triu_tril_gt3d", parent=work)
    started["campaign-b"] = Run(fault_campaign_args(work / "corpus-b"), faults="triu_tril_gt3d", parent=work)
    for run in (started["campaign-a"], started["campaign-b"]):
        run.result()
    return started


# -- ops ------------------------------------------------------------------------------------

def test_ops_lists_families_with_counts(runs):
    from mpsfuzz.generation import catalogue

    run = runs["ops"]
    assert run.code == 0, run.err
    assert run.err == ""
    lines = run.out.splitlines()
    for family, names in catalogue.families().items():
        row = [line for line in lines if line.split("│")[1:2] and line.split("│")[1].strip() == family]
        assert row, f"no row for {family} in:\n{run.out}"
        assert row[0].split("│")[2].strip() == str(len(names))
    assert {"linalg", "elementwise", "reduction"} <= set(catalogue.families())
    assert "linalg.solve" in run.out and "bitwise_and" in run.out


# -- usage errors ---------------------------------------------------------------------------

def test_this_machine_has_no_cuda():  # the "unavailable target" case relies on it
    assert not torch.cuda.is_available()


@pytest.mark.parametrize("name", USAGE_ERRORS)
def test_usage_error_is_one_line_and_exit_2(runs, name):
    run = runs[name]
    expected = USAGE_ERRORS[name][2]
    assert run.code == 2, (run.out, run.err)
    assert "Traceback" not in run.err and "Traceback" not in run.out
    lines = run.err.strip().splitlines()
    assert len(lines) == 1, run.err
    assert lines[0].startswith("mpsfuzz: error:"), run.err
    assert expected in lines[0], run.err
    assert not (run.cwd / "mpsfuzz-internal-error.log").exists()
    assert not (run.cwd / "mpsfuzz-corpus").exists() or not any((run.cwd / "mpsfuzz-corpus").iterdir())


# -- campaigns and replay ----------------------------------------------------------------------

@pytest.mark.slow
def test_fault_campaign_finds_and_records_the_bug(campaigns):
    run = campaigns["campaign-a"]
    assert run.code == 1, run.out + run.err
    found = findings_in(campaigns["work"] / "corpus-a")
    assert len(found) == 1
    assert found[0]["op"] == "triu" and found[0]["oracle"] == "values"
    assert "Traceback" not in run.err and "internal error" not in run.out


@pytest.mark.slow
def test_seeded_run_is_reproducible(campaigns):
    run = campaigns["campaign-b"]
    assert run.code == 1, run.out + run.err
    corpus_a, corpus_b = campaigns["work"] / "corpus-a", campaigns["work"] / "corpus-b"
    a, b = findings_in(corpus_a), findings_in(corpus_b)
    assert len(a) == len(b) == 1
    assert a[0]["signature"] == b[0]["signature"]
    assert a[0]["case"] == b[0]["case"]
    assert [p.name for p in corpus_a.glob("*.json")] == [p.name for p in corpus_b.glob("*.json")]


def test_replay_reports_corrupt_file_and_replays_good_one(tmp_path):
    """A replay, the fault still on, of a folder with a finding of the triu fault beside a
    corrupt file."""
    folder = tmp_path / "replay"
    good = written_finding(folder, TRIU_4D, "triu_tril_gt3d", TRIU_4D_EXPLAINED)
    corrupt = folder / "corrupt.json"
    corrupt.write_text(good.read_text()[:200])
    run = Run(["replay", folder], faults="triu_tril_gt3d", parent=tmp_path)
    out = run.out + run.err
    assert "Traceback" not in out
    assert run.code == 1, out  # the good finding still fails
    assert str(corrupt) in out.replace("\n", "")
    assert "still fails" in run.out
    assert "triu" in run.out


def test_clean_target_run_has_no_findings(tmp_path):
    run = Run(["run", "--ops", "triu,add,sum", "--target", FAULT_TARGET, "--max-cases", 150, "--seed", 3,
               "--corpus", tmp_path / "corpus-clean", "--timeout", 3, "--no-progress"], faults="none", parent=tmp_path)
    assert run.code == 0, run.out + run.err
    assert "no findings" in run.out
    assert "150 cases" in run.out
    assert findings_in(tmp_path / "corpus-clean") == []
    assert "internal error" not in run.out and "Traceback" not in run.err
