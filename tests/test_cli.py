"""The `mpsfuzz` command line, run as a user would (`python -m mpsfuzz ...`): listing ops,
one-line usage errors with exit 2, replaying a corpus with a corrupt file in it, seeded
runs that reproduce, and a clean run that exits 0."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

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


def _argv(args) -> list[str]:
    return [sys.executable, "-m", "mpsfuzz", *map(str, args)]


def mpsfuzz(*args, cwd: Path, faults: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(_argv(args), cwd=cwd, env=_env(faults), capture_output=True, text=True,
                          timeout=timeout)


def fault_campaign(corpus: Path, cwd: Path) -> subprocess.CompletedProcess:
    return mpsfuzz("run", "--ops", "triu", "--target", FAULT_TARGET, "--max-cases", 400, "--seed", 1,
                   "--corpus", corpus, "--timeout", 3, "--max-findings", 1, "--no-progress",
                   cwd=cwd, faults="triu_tril_gt3d")


def findings_in(corpus: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(corpus.glob("*.json"))]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cli")


@pytest.fixture(scope="module")
def first_campaign(workdir):
    corpus = workdir / "corpus-a"
    proc = fault_campaign(corpus, workdir)
    return proc, corpus


# -- ops ------------------------------------------------------------------------------------

def test_ops_lists_families_with_counts(quick_results):
    from mpsfuzz.fuzzer import catalogue

    code, out, err, _ = quick_results["ops"]
    assert code == 0, err
    assert err == ""
    lines = out.splitlines()
    for family, names in catalogue.families().items():
        row = [line for line in lines if line.split("│")[1:2] and line.split("│")[1].strip() == family]
        assert row, f"no row for {family} in:\n{out}"
        assert row[0].split("│")[2].strip() == str(len(names))
    assert {"linalg", "elementwise", "reduction"} <= set(catalogue.families())
    assert "linalg.solve" in out and "bitwise_and" in out


# -- usage errors ---------------------------------------------------------------------------

# Each of these starts torch (~2 s of CPU): the list is kept to what matters, and the
# argparse-level ones (which do not import torch) are nearly free.
USAGE_ERRORS = {
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


def _run_all(commands: dict, workdir: Path) -> dict:
    """Run short commands at once (each one starts torch: in parallel they take a few
    seconds instead of half a minute). ``commands``: name -> (args, faults)."""
    procs = {}
    for name, (args, faults) in commands.items():
        cwd = Path(tempfile.mkdtemp(prefix="run-", dir=workdir))
        procs[name] = (cwd, subprocess.Popen(_argv(args), cwd=cwd, env=_env(faults), text=True,
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    results = {}
    for name, (cwd, proc) in procs.items():
        out, err = proc.communicate(timeout=180)
        results[name] = (proc.returncode, out, err, cwd)
    return results


@pytest.fixture(scope="module")
def quick_results(workdir):
    """`mpsfuzz ops` and every usage-error command, run together."""
    (workdir / "empty").mkdir()
    commands = {"ops": (["ops"], None)}
    for name, (args, faults, _) in USAGE_ERRORS.items():
        commands[name] = ([a.format(empty=workdir / "empty") for a in args], faults)
    return _run_all(commands, workdir)


def test_this_machine_has_no_cuda():  # the "unavailable target" case relies on it
    assert not torch.cuda.is_available()


@pytest.mark.parametrize("name", USAGE_ERRORS)
def test_usage_error_is_one_line_and_exit_2(quick_results, name):
    code, out, err, cwd = quick_results[name]
    expected = USAGE_ERRORS[name][2]
    assert code == 2, (out, err)
    assert "Traceback" not in err and "Traceback" not in out
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("mpsfuzz: error:"), err
    assert expected in lines[0], err
    assert not (cwd / "mpsfuzz-internal-error.log").exists()
    assert not (cwd / "mpsfuzz-corpus").exists() or not any((cwd / "mpsfuzz-corpus").iterdir())


# -- campaigns and replay ----------------------------------------------------------------------

def test_fault_campaign_finds_and_records_the_bug(first_campaign):
    proc, corpus = first_campaign
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found = findings_in(corpus)
    assert len(found) == 1
    assert found[0]["op"] == "triu" and found[0]["oracle"] == "values"
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stdout


def test_seeded_run_is_reproducible(first_campaign, workdir):
    _, corpus_a = first_campaign
    corpus_b = workdir / "corpus-b"
    proc = fault_campaign(corpus_b, workdir)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    a, b = findings_in(corpus_a), findings_in(corpus_b)
    assert len(a) == len(b) == 1
    assert a[0]["signature"] == b[0]["signature"]
    assert a[0]["case"] == b[0]["case"]
    assert [p.name for p in corpus_a.glob("*.json")] == [p.name for p in corpus_b.glob("*.json")]


@pytest.fixture(scope="module")
def replays(first_campaign, workdir):
    """Replay (a) a folder with the campaign's finding and a corrupt file, the fault still
    on, and (b) the campaign's corpus with the fault off; both at once."""
    _, corpus_a = first_campaign
    folder = workdir / "replay"
    folder.mkdir()
    (good,) = corpus_a.glob("*.json")
    (folder / good.name).write_text(good.read_text())
    corrupt = folder / "corrupt.json"
    corrupt.write_text(good.read_text()[:200])
    results = _run_all({"corrupt": (["replay", folder], "triu_tril_gt3d"),
                        "fixed": (["replay", corpus_a], "none")}, workdir)
    return results, good, corrupt


def test_replay_reports_corrupt_file_and_replays_good_one(replays):
    results, good, corrupt = replays
    code, stdout, stderr, _ = results["corrupt"]
    out = stdout + stderr
    assert "Traceback" not in out
    assert code == 1, out  # the good finding still fails
    assert str(corrupt) in out.replace("\n", "")
    assert "still fails" in stdout
    assert good.name in stdout.replace("\n", "") or "triu" in stdout


def test_replay_once_fixed_passes(replays):
    code, stdout, stderr, _ = replays[0]["fixed"]
    assert code == 0, stdout + stderr
    assert "passes now" in stdout


def test_clean_target_run_has_no_findings(workdir):
    corpus = workdir / "corpus-clean"
    proc = mpsfuzz("run", "--ops", "triu,add,sum", "--target", FAULT_TARGET, "--max-cases", 150,
                   "--seed", 3, "--corpus", corpus, "--timeout", 3, "--no-progress",
                   cwd=workdir, faults="none")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no findings" in proc.stdout
    assert "150 cases" in proc.stdout
    assert findings_in(corpus) == []
    assert "internal error" not in proc.stdout and "Traceback" not in proc.stderr
