"""A finding whose repro script does not reproduce in a fresh interpreter is
`unconfirmed`: listed apart, never new, and it does not fail the run. A verification
that cannot run at all (the target does not import, torch or the device is missing)
is "not verified here", never "NOT A REPRO"."""
from __future__ import annotations

import json

import pytest

from mpsfuzz.reports.repro import Script
from mpsfuzz.reports.verify import run_and_judge

from test_fault_campaigns import FAULT_TARGET, findings_in, mpsfuzz, unverified_triu_finding


@pytest.mark.slow
def test_a_finding_its_script_cannot_confirm_is_unconfirmed_not_new(tmp_path):
    corpus = tmp_path / "corpus"
    run = mpsfuzz("run", "--ops", "erf", "--target", FAULT_TARGET, "--max-cases", "300", "--seed", "1",
                  "--corpus", str(corpus), "--max-findings", "1", "--no-progress",
                  faults="erf_needs_worker_state", cwd=tmp_path)
    found = findings_in(corpus)
    assert found and {f["status"] for f in found} == {"unconfirmed"}, run.stdout
    assert run.returncode == 0, run.stdout + run.stderr
    assert all(f["repro"]["verified"] is False for f in found)
    said = " ".join(run.stdout.split())   # as one line, however the terminal wrapped it
    assert "new findings 0" in said and f"unconfirmed (repro did not reproduce) {len(found)}" in said
    listed = mpsfuzz("corpus", "list", str(corpus), "--status", "unconfirmed", "--format", "json", faults="none",
                     cwd=tmp_path)
    assert len(json.loads(listed.stdout)) == len(found)


def test_a_script_that_cannot_run_here_is_not_verified_not_a_non_repro(tmp_path):
    script = Script(text="import torch\nprint(torch.ones(1))\n", expect={"outcome": "assertion"}, body_lines=1)
    verdict = run_and_judge(script, target_spec="no_such_module_anywhere:target", timeout_s=60)
    assert verdict.reproduced is None and verdict.detail.startswith("not verified here")
    assert "no_such_module_anywhere" in verdict.detail


@pytest.mark.slow
def test_repro_command_says_not_verified_here_when_the_target_does_not_import(tmp_path):
    corpus = tmp_path / "corpus"
    run = unverified_triu_finding(corpus, tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    (path,) = corpus.glob("triu-*.json")
    data = json.loads(path.read_text())
    data["target"]["spec"] = "gone_from_this_machine:target"   # found elsewhere, with a target not here
    path.write_text(json.dumps(data))
    shown = mpsfuzz("repro", str(path), faults="triu_tril_gt3d", cwd=tmp_path)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "NOT A REPRO" not in shown.stderr and "not verified here" in shown.stderr
    assert json.loads(path.read_text())["repro"]["verified"] is None
