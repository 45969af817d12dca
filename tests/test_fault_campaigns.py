"""`mpsfuzz run` against the fault-injecting target finds each emulated MPS bug with the
right oracle, records a minimal case, and `mpsfuzz replay` reproduces it (and reports it
fixed once the fault is switched off). The fuzzer knows nothing of the faults: each test
only names the op family to fuzz and checks what comes out."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FAULT_TARGET = "mpsfuzz.testing.faults:target"


def mpsfuzz(*args: str, faults: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, MPSFUZZ_FAULTS=faults)
    return subprocess.run([sys.executable, "-m", "mpsfuzz", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=timeout)


def unverified_triu_finding(corpus: Path, cwd: Path) -> subprocess.CompletedProcess:
    """A campaign that finds the triu fault and leaves its repro script unrun
    (``--no-verify-repros``): one ``unverified`` finding in ``corpus``."""
    return mpsfuzz("run", "--ops", "triu", "--target", FAULT_TARGET, "--max-cases", "300", "--seed", "1",
                   "--corpus", str(corpus), "--max-findings", "1", "--no-progress", "--no-verify-repros",
                   faults="triu_tril_gt3d", cwd=cwd)


def findings_in(corpus: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(corpus.glob("*.json"))]


def the_one_new_finding(done: subprocess.CompletedProcess, corpus: Path, oracle: str) -> dict:
    """A campaign that found its fault and nothing else: exit 1, no harness error, one
    finding in the corpus, new, of ``oracle``."""
    assert done.returncode == 1, done.stdout + done.stderr
    assert "harness errors 0" in done.stdout
    (finding,) = findings_in(corpus)
    assert (finding["oracle"], finding["status"]) == (oracle, "new")
    return finding


def one_fault_campaign(tmp_path: Path, ops: str, fault: str, max_cases: int | None = None,
                       oracle: str = "values", budget: str | None = None) -> dict:
    """The one new finding (of ``oracle``) of a campaign of ``ops`` on the fault target
    with ``fault`` alone, seed 1, stopped at its first finding, at ``max_cases`` or at
    ``budget`` (a budgeted campaign draws boundary siblings; one counted in cases alone
    does not)."""
    corpus = tmp_path / "corpus"
    bound = ("--budget", budget) if budget else ("--max-cases", str(max_cases))
    done = mpsfuzz("run", "--ops", ops, "--target", FAULT_TARGET, *bound, "--seed", "1",
                   "--corpus", str(corpus), "--max-findings", "1", "--no-progress", faults=fault, cwd=tmp_path)
    return the_one_new_finding(done, corpus, oracle)


# Modules a repro script may import: torch, and the standard library for a leak's
# memory reading.
REPRO_IMPORTS = {"torch", "resource", "sys"}
REPRO_MAX_BODY_LINES = 15


def assert_repro_proves_the_fault(finding: dict, fault: str, cwd: Path, *, clean_run: bool = True) -> None:
    """The finding's repro script was verified during the run (a fresh interpreter, the
    fault on: it reproduces), imports only torch, has a short body, and (``clean_run``)
    does NOT reproduce once the fault is switched off."""
    import ast

    from mpsfuzz.reports.repro import Script
    from mpsfuzz.reports.verify import run_and_judge
    repro = finding["repro"]
    assert repro["script"], repro
    assert repro["verified"] is True, (repro["detail"], repro["script"])
    imported = {alias.name.split(".")[0] for node in ast.walk(ast.parse(repro["script"]))
                if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])}
    assert imported <= REPRO_IMPORTS, imported
    # The body (imports aside) fits in 15 lines; an op compared through a canonicaliser
    # (decompositions: their reconstruction) also carries that helper's source.
    assert repro["lines"] - repro["helper_lines"] <= REPRO_MAX_BODY_LINES, repro["script"]
    assert finding["environment"] and "PyTorch version" in finding["environment"]
    if not clean_run:
        return
    script = Script(text=repro["script"], expect=repro["expect"], body_lines=repro["lines"])
    clean = run_and_judge(script, target_spec=FAULT_TARGET, timeout_s=60,
                          env=dict(os.environ, MPSFUZZ_FAULTS="none"))
    assert not clean.reproduced, (clean.detail, repro["script"])


def _inputs(finding: dict) -> list[dict]:
    return finding["case"]["inputs"]


def _layout_is_plain(recipe: dict) -> bool:
    lay = recipe["layout"]
    return (not lay["offset"] and all(g == 1 for g in lay["gaps"]) and not lay["expanded"]
            and lay["permutation"] in ([], list(range(len(recipe["shape"])))))


def _numel(recipe: dict) -> int:
    n = 1
    for s in recipe["shape"]:
        n *= s
    return n


def _specials(recipe: dict) -> set[str]:
    return {name for _, name in recipe["values"]["specials"]}


# fault -> (op to fuzz, expected oracle, check of the minimised case)
CASES = {
    "bitwise_noncontig": ("bitwise_and", "values",
                          lambda f: any(not _layout_is_plain(r) for r in _inputs(f))
                          and max(_numel(r) for r in _inputs(f)) <= 4),
    "triu_tril_gt3d": ("triu", "values",
                       lambda f: len(_inputs(f)[0]["shape"]) == 4 and _numel(_inputs(f)[0]) <= 2),
    "sqrt_chalf": ("sqrt", "values",
                   lambda f: _inputs(f)[0]["dtype"] == "complex32" and _numel(_inputs(f)[0]) == 1),
    "add_alpha_abort": ("add", "crash",
                        lambda f: dict(f["case"]["kwargs"]).get("alpha") not in (None, 1)
                        and "SIGABRT" in f["message"]),
    "cholesky_ex_empty": ("linalg.cholesky_ex", "errors",
                          lambda f: _numel(_inputs(f)[0]) == 0 and "placeholder" in f["message"]),
    "fmax_fmin_scalar": ("fmax", "values",
                         lambda f: len(_inputs(f)[1]["shape"]) == 0 and len(_inputs(f)[0]["shape"]) == 1
                         and _numel(_inputs(f)[0]) == 1),
    "mm_mixed_dtype_segv": ("mm", "crash",
                            lambda f: _inputs(f)[0]["dtype"] != _inputs(f)[1]["dtype"]
                            and "SIGSEGV" in f["message"]),
    "shift_scalar_tensor": ("bitwise_left_shift_scalar", "values",
                            lambda f: _numel(_inputs(f)[0]) == 1),
    "lu_factor_noncontig": ("linalg.lu_factor", "values",
                            lambda f: not _layout_is_plain(_inputs(f)[0])),
    "prod_hang_5d": ("prod", "hang", lambda f: len(_inputs(f)[0]["shape"]) >= 5),
    "unary_offset": ("neg", "values",
                     lambda f: _inputs(f)[0]["layout"]["offset"] > 0 and _numel(_inputs(f)[0]) == 1),
    "lgamma_negative": ("lgamma", "values", lambda f: _numel(_inputs(f)[0]) <= 2),
    "where_inf": ("where", "values",
                  lambda f: any(_specials(r) & {"inf", "-inf", "max", "big"} for r in _inputs(f)[1:])),
    "var_5d": ("var", "values", lambda f: len(_inputs(f)[0]["shape"]) == 5),
    # leaks key on the target and op, whatever the inputs
    "cumsum_leak": ("cumsum", "leak", lambda f: f["signature_key"] == ["cumsum", "leak", "leak", "faulty-cpu"]
                    and "1.00 MiB per call" in f["title"]),
}


# One campaign per kind of fault runs by default (wrong values, a crash, a leak, a raise
# with its replay, fault on and off; a hang's campaign is test_parallel's, through the
# Campaign API); the other faults' campaigns prove the same on more ops (-m slow).
DEFAULT_RUN = {"triu_tril_gt3d", "mm_mixed_dtype_segv", "cumsum_leak", "cholesky_ex_empty"}


@pytest.mark.parametrize("fault", [f if f in DEFAULT_RUN else pytest.param(f, marks=pytest.mark.slow)
                                   for f in sorted(CASES)])
def test_fault_is_found_minimised_and_replayed(fault, tmp_path):
    op, oracle, is_minimal = CASES[fault]
    corpus = tmp_path / "corpus"
    run = mpsfuzz("run", "--ops", op, "--target", FAULT_TARGET, "--max-cases", "1500", "--seed", "1",
                  "--corpus", str(corpus), "--timeout", "3", "--shrink-budget", "30",
                  "--max-findings", "1", "--no-progress", *RUN_ARGS.get(fault, ()), faults=fault, cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stdout.splitlines()[0].startswith("mpsfuzz ") and "faulty-cpu" in run.stdout.splitlines()[0]
    found = findings_in(corpus)
    assert [f["oracle"] for f in found] == [oracle], run.stdout
    finding = found[0]
    assert finding["op"] == op
    assert is_minimal(finding), json.dumps(finding["case"], indent=1)
    # nothing is left in flight after a clean stop
    assert not list(corpus.glob("inflight-*"))
    assert_repro_proves_the_fault(finding, fault, tmp_path)

    if fault not in REPLAY_CHECKS:
        return
    replay = mpsfuzz("replay", str(corpus), "--timeout", "3", faults=fault, cwd=tmp_path)
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "still fails" in replay.stdout

    if fault in FIXED_CHECKS:
        fixed = mpsfuzz("replay", str(corpus), "--timeout", "3", faults="none", cwd=tmp_path)
        assert fixed.returncode == 0, fixed.stdout + fixed.stderr
        assert "fixed" in fixed.stdout


# Replay, with the fault on and then off, for one fault of each oracle: a replay costs a
# fresh interpreter, and the replay of a finding depends on its oracle, not on its op.
REPLAY_CHECKS = {"bitwise_noncontig", "add_alpha_abort", "cholesky_ex_empty", "prod_hang_5d", "cumsum_leak"}
FIXED_CHECKS = {"bitwise_noncontig", "add_alpha_abort", "cholesky_ex_empty", "prod_hang_5d"}
# A hang costs a whole timeout each time a case hangs, in fuzzing, shrinking, triage and
# the repro's verification: its campaign gets a shorter timeout and budgets (any case
# that hangs shows its trigger, five dimensions).
RUN_ARGS = {"prod_hang_5d": ("--timeout", "2", "--shrink-budget", "10", "--minimise-budget", "10")}


@pytest.mark.slow
def test_unsupported_is_counted_not_reported(tmp_path):
    corpus = tmp_path / "corpus"
    run = mpsfuzz("run", "--ops", "atan2", "--target", FAULT_TARGET, "--max-cases", "200", "--seed", "2",
                  "--corpus", str(corpus), "--no-progress", faults="atan2_int64_unsupported", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert findings_in(corpus) == []
    assert "not implemented for 'Long'" in run.stdout
    done = next(line for line in run.stdout.splitlines() if line.startswith("done"))
    unsupported = int(done.split("unsupported ")[1].split(",")[0])
    assert unsupported > 0


@pytest.mark.slow
def test_two_bugs_on_different_ops_in_one_campaign(tmp_path):
    """After the first bug is recorded, the campaign goes on and finds the next."""
    corpus = tmp_path / "corpus"
    run = mpsfuzz("run", "--ops", "triu,bitwise_and,add", "--target", FAULT_TARGET, "--max-cases", "1500",
                  "--seed", "5", "--corpus", str(corpus), "--timeout", "3", "--max-findings", "3",
                  "--no-progress", faults="triu_tril_gt3d,bitwise_noncontig,add_alpha_abort", cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert {(f["op"], f["oracle"]) for f in findings_in(corpus)} >= {
        ("triu", "values"), ("bitwise_and", "values"), ("add", "crash")}


@pytest.mark.slow
def test_an_ops_first_cases_reach_an_empty_input_and_mixed_dtypes(tmp_path):
    """Issue 37: a 10-minute campaign of five families gives an op 30-50 cases, and a
    crash that needs an empty input (mse_loss, pytorch#148608) or mixed dtypes (mm,
    pytorch#143948) went undrawn in them. Boundary siblings (strategies.boundary_sibling)
    take every other draw's skeleton there: 30 cases of each op find both crashes (seeds
    1-4 without them: 3 of the 8 crashes; with them: 7)."""
    corpus = tmp_path / "corpus"
    done = mpsfuzz("run", "--ops", "mm,mse_loss", "--target", FAULT_TARGET, "--max-cases", "60", "--siblings", "2",
                   "--seed", "1", "--corpus", str(corpus), "--no-progress", "--no-verify-repros",
                   faults="mm_mixed_dtype_segv,mse_loss_empty_abort", cwd=tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    crashes = {f["op"]: f for f in findings_in(corpus) if f["oracle"] == "crash"}
    assert set(crashes) == {"mm", "mse_loss"}, done.stdout[-2000:]
    assert CASES["mm_mixed_dtype_segv"][2](crashes["mm"])
    assert any(_numel(r) == 0 for r in _inputs(crashes["mse_loss"])) and "SIGABRT" in crashes["mse_loss"]["message"]
