"""One bug, one report, end to end: short campaigns against the fault target, then
`mpsfuzz corpus list --by bug --format json`. One faulty kernel reached by two public ops
is one bug listing both ops; one kernel that returns wrong values and overwrites its
input (CUDA linalg_eig on a transposed input) is one bug although the values and the
variants oracles each record a finding."""
from __future__ import annotations

import json

import pytest

from test_fault_campaigns import FAULT_TARGET, findings_in, mpsfuzz


def campaign(tmp_path, ops: str, faults: str, budget: str = "40s"):
    corpus = tmp_path / "corpus"
    run = mpsfuzz("run", "--ops", ops, "--target", FAULT_TARGET, "--budget", budget, "--seed", "1",
                  "--corpus", str(corpus), "--timeout", "3", "--no-progress", "--no-verify-repros",
                  faults=faults, cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    listed = mpsfuzz("corpus", "list", str(corpus), "--by", "bug", "--format", "json", faults=faults, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    return run, corpus, json.loads(listed.stdout)


@pytest.mark.slow
def test_two_public_ops_over_one_faulty_kernel_are_one_bug(tmp_path):
    run, corpus, bugs = campaign(tmp_path, "mm,matmul", "mm_empty_inner")
    found = findings_in(corpus)
    assert {f["op"] for f in found} == {"mm", "matmul"}, run.stdout
    assert len(found) >= 2
    assert len(bugs) == 1, json.dumps(bugs, indent=1)
    bug = bugs[0]
    # (--no-verify-repros: not new, unverified, and still failing the run)
    assert bug["kernel"] == "aten::mm.default" and bug["localised"] and bug["status"] == "unverified"
    assert {o["op"] for o in bug["ops"]} == {"mm", "matmul"}
    assert sorted(f["path"] for f in bug["findings"]) == sorted(str(p) for p in corpus.glob("*.json"))
    assert bug["kernel_repro"] and "torch.ops.aten.mm.default(" in bug["kernel_repro"]["script"]
    unverified = sum(1 for f in found if f["status"] == "unverified")
    assert f"1 unverified bug(s) ({unverified} finding(s))" in run.stdout, (
        [f["status"] for f in found], [line for line in run.stdout.splitlines() if "bug(s)" in line])

    table = mpsfuzz("corpus", "list", str(corpus), "--by", "bug", faults="none", cwd=tmp_path)
    assert table.returncode == 0 and "aten::mm.default" in table.stdout and "1 bug (" in table.stdout
    shown = mpsfuzz("corpus", "show", str(next(corpus.glob("matmul-*.json"))), faults="none", cwd=tmp_path)
    assert "localisation" in shown.stdout and "aten::mm.default" in shown.stdout
    assert "kernel-level repro" in shown.stdout

    drafts = mpsfuzz("report", "--format", "issue", "--no-verify", str(corpus), faults="none", cwd=tmp_path)
    assert drafts.returncode == 0, drafts.stderr
    assert drafts.stdout.count("### 🐛 Describe the bug") == 1  # one draft per bug, not per finding
    assert "`torch.mm`" in drafts.stdout and "`torch.matmul`" in drafts.stdout
    assert "#### Kernel-level repro" in drafts.stdout and "torch.ops.aten.mm.default(" in drafts.stdout


@pytest.mark.slow
def test_wrong_values_and_an_overwritten_input_are_one_bug(tmp_path):
    run, corpus, bugs = campaign(tmp_path, "linalg.eig,linalg.eigvals", "eig_transposed_clobber")
    oracles = {f["oracle"] for f in findings_in(corpus)}
    assert oracles == {"values", "variants"}, run.stdout
    assert len(bugs) == 1, json.dumps(bugs, indent=1)
    assert bugs[0]["kernel"] == "aten::linalg_eig.default"
    assert set(bugs[0]["oracles"]) == {"values", "variants"}
    assert len(bugs[0]["findings"]) == len(findings_in(corpus)) >= 2


@pytest.mark.slow   # 48 s on 2 cores; one kernel's bug over ops: the two campaigns below
def test_a_layout_check_inside_a_random_kernel_is_one_bug_of_that_kernel(tmp_path):
    """Issue 30 (H200): cuDNN's RNN raised "rnn: hx is not contiguous" (and cx, and the
    weights) for gru, lstm and their stacked forms, and was filed as eight bugs: the
    call that raised runs on the device alone (a random call, no CPU kernel), so the
    findings were not localised. The call that raised is the kernel all the same."""
    run, corpus, bugs = campaign(tmp_path, "dropout,alpha_dropout", "bernoulli_layout_check", budget="45s")
    found = findings_in(corpus)
    assert {f["op"] for f in found} == {"dropout", "alpha_dropout"}, run.stdout
    assert all("bernoulli_: self is not contiguous" in f["message"] for f in found)
    assert len(bugs) == 1, json.dumps(bugs, indent=1)
    bug = bugs[0]
    assert bug["kernel"] == "aten::bernoulli_.float" and bug["localised"], json.dumps(bug, indent=1)
    assert {o["op"] for o in bug["ops"]} == {"dropout", "alpha_dropout"}
    record = json.loads(next(corpus.glob("dropout-*.json")).read_text())["localisation"]
    assert record["status"] == "kernel" and record["confirmed"] is False and "on the device" in record["note"]
