"""The pytest plugin (`pytest --mpsfuzz-corpus DIR`): a corpus of findings of the
fault-injecting target runs as a regression suite. Each finding fails while its fault is
on and passes once it is off ("fixed"); --mpsfuzz-xfail watches without going red; a
corrupt file is one failing item; -k selects by op; --mpsfuzz-record writes the history.
pytest runs in a subprocess (the plugin is loaded by its entry point). The corpus is
written directly (tests/written_findings.py: real failures of minimal cases, no campaign):
the plugin replays what any corpus holds, and replaying a campaign's own corpus is the
fault campaigns' test."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from written_findings import (FAULT_TARGET, NEG_OFFSET, NEG_OFFSET_EXPLAINED, TRIU_4D, TRIU_4D_EXPLAINED,
                              written_finding)

pytest_plugins = ["pytester"]

FAULTS = "triu_tril_gt3d,unary_offset"   # a wrong-values bug of triu and one of neg
TIMEOUT = 300


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A corpus with one finding for triu and one for neg (written once per module)."""
    out = tmp_path_factory.mktemp("written") / "corpus"
    written_finding(out, TRIU_4D, FAULTS, TRIU_4D_EXPLAINED)
    written_finding(out, NEG_OFFSET, FAULTS, NEG_OFFSET_EXPLAINED)
    assert sorted(json.loads(p.read_text())["op"] for p in out.glob("*.json")) == ["neg", "triu"]
    return out


@pytest.fixture
def local(corpus, pytester) -> Path:
    """A copy of the corpus inside the pytester folder (so recording edits the copy)."""
    dest = pytester.path / "mpsfuzz-corpus"
    shutil.copytree(corpus, dest)
    return dest


def finding_file(folder: Path, op: str) -> Path:
    (path,) = folder.glob(f"{op}-*.json")
    return path


def run(pytester, monkeypatch, *args: str, faults: str):
    monkeypatch.setenv("MPSFUZZ_FAULTS", faults)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", *args, timeout=TIMEOUT)


def output(result) -> str:
    return "\n".join(result.outlines + result.errlines)


def test_findings_fail_while_the_bug_is_there(pytester, monkeypatch, local):
    result = run(pytester, monkeypatch, "--mpsfuzz-corpus", str(local), faults=FAULTS)
    result.assert_outcomes(failed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = output(result)
    for op in ("triu", "neg"):
        path = finding_file(local, op)
        recorded = json.loads(path.read_text())
        assert f"still fails: `{op}` returns wrong values" in text
        assert f"why: {recorded['explanation']}" in text and recorded["explanation"]
        assert str(path) in text
        assert f"FAILED mpsfuzz-corpus/{path.name}::{path.stem}" in text
    assert "only when inputs have 4 or more dims" in text
    assert "Tensor-likes are not close!" in text           # the recorded message's first lines
    assert "Traceback" not in text and "pytest_plugin.py" not in text
    assert all(json.loads(p.read_text())["history"] == [] for p in local.glob("*.json"))  # no --mpsfuzz-record


@pytest.mark.slow
def test_findings_pass_once_fixed(pytester, monkeypatch, local):
    result = run(pytester, monkeypatch, "--mpsfuzz-corpus", str(local), faults="none")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK


@pytest.mark.slow
def test_xfail_watches_known_bugs_and_flags_fixed_ones(pytester, monkeypatch, local):
    watched = run(pytester, monkeypatch, "--mpsfuzz-corpus", str(local), "--mpsfuzz-xfail", faults=FAULTS)
    watched.assert_outcomes(xfailed=2)
    assert watched.ret == pytest.ExitCode.OK
    assert "XFAIL mpsfuzz-corpus/triu-" in output(watched) and "still fails: `triu`" in output(watched)
    # neg fixed, triu not: triu stays xfail, neg is XPASS(strict), a failure saying to prune it
    half = run(pytester, monkeypatch, "--mpsfuzz-corpus", str(local), "--mpsfuzz-xfail", faults="triu_tril_gt3d")
    half.assert_outcomes(xfailed=1, failed=1)
    text = output(half)
    assert "XPASS(strict): fixed now: `neg` returns wrong values" in text and "prune" in text
    assert f"FAILED mpsfuzz-corpus/{finding_file(local, 'neg').name}" in text


@pytest.mark.slow
def test_corrupt_file_unknown_op_and_record(pytester, monkeypatch, local):
    """A corrupt file is one failing item naming its path, the others still run; an op
    this mpsfuzz does not know is skipped; --mpsfuzz-record appends to each history."""
    (local / "truncated.json").write_text('{"format": 3, "signature": "ab')
    data = json.loads(finding_file(local, "triu").read_text())
    data["case"]["op"] = data["op"] = "no_such_op"
    (local / "no_such_op-values-0000.json").write_text(json.dumps(data))
    (local / "pruned").mkdir()      # sub-folders (pruned findings) are not collected
    shutil.copy(finding_file(local, "neg"), local / "pruned" / "old.json")

    result = run(pytester, monkeypatch, "--mpsfuzz-corpus", str(local), "--mpsfuzz-record", faults="none")
    result.assert_outcomes(passed=2, failed=1, skipped=1)
    text = output(result)
    (line,) = [ln for ln in result.outlines if ln.startswith("unreadable finding")]
    assert str(local / "truncated.json") in line
    assert "FAILED mpsfuzz-corpus/truncated.json::truncated" in text
    assert "Traceback" not in text and "pytest_plugin.py" not in text
    assert "cannot run here: op 'no_such_op' is not in this mpsfuzz's catalogue" in text
    assert "old.json" not in text
    for op, expected in (("triu", "fixed"), ("neg", "fixed"), ("no_such_op", "cannot-run")):
        history = json.loads(finding_file(local, op).read_text())["history"]
        assert [h["result"] for h in history] == [expected], history
        assert history[0]["target"] == FAULT_TARGET
    assert json.loads(finding_file(local, "triu").read_text())["status"] == "fixed"
    assert json.loads((local / "pruned" / "old.json").read_text())["history"] == []


@pytest.mark.slow
def test_k_selects_by_op_and_oracle(pytester, local):
    triu, neg = finding_file(local, "triu"), finding_file(local, "neg")
    only = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--collect-only", "-q",
                                         "--mpsfuzz-corpus", str(local), "-k", "triu", timeout=TIMEOUT)
    assert f"mpsfuzz-corpus/{triu.name}::{triu.stem}" in only.outlines
    assert not any("neg-" in ln for ln in only.outlines)
    assert "1/2 tests collected (1 deselected)" in output(only)
    both = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--collect-only", "-q", "-m", "mpsfuzz",
                                         "--mpsfuzz-corpus", str(triu), "--mpsfuzz-corpus", str(neg),
                                         "-k", "values and (neg or triu)", timeout=TIMEOUT)
    assert "2 tests collected" in output(both)


@pytest.mark.slow
def test_unavailable_target_skips(pytester, monkeypatch, local):
    result = run(pytester, monkeypatch, "--mpsfuzz-corpus", str(local), "--mpsfuzz-target", "no-such-target",
                 faults="none")
    result.assert_outcomes(skipped=2)
    assert "cannot run here: --target 'no-such-target'" in output(result)


def test_missing_folder_is_a_usage_error(pytester):
    result = pytester.runpytest_subprocess("--mpsfuzz-corpus", str(pytester.path / "nope"), timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: --mpsfuzz-corpus: no such file or folder: {pytester.path / 'nope'}" in output(result)
    assert "Traceback" not in output(result)


def test_without_the_option_the_plugin_is_inert(pytester, local):
    """No extra items (a corpus folder in the rootdir is not collected) and no torch."""
    pytester.makepyfile(test_plain="import sys\n\ndef test_plain():\n    assert 'torch' not in sys.modules\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", timeout=TIMEOUT)
    result.assert_outcomes(passed=1)
    assert "mpsfuzz-corpus" not in output(result)


@pytest.mark.slow
def test_corpus_alone_without_test_paths_and_added_to_them(pytester, local):
    """With testpaths and a tests/ folder, `pytest --mpsfuzz-corpus DIR` collects the
    corpus alone; test paths named on the command line are collected too."""
    pytester.makeini("[pytest]\ntestpaths = tests\n")
    pytester.mkdir("tests")
    (pytester.path / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    alone = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--collect-only", "-q",
                                          "--mpsfuzz-corpus", "mpsfuzz-corpus", timeout=TIMEOUT)
    assert "2 tests collected" in output(alone) and "test_x" not in output(alone)
    added = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--collect-only", "-q", "tests",
                                          "--mpsfuzz-corpus", "mpsfuzz-corpus", timeout=TIMEOUT)
    assert "3 tests collected" in output(added) and "tests/test_x.py::test_x" in added.outlines


def test_verdicts(corpus):
    """Every replay result's outcome and message (changed and flaky cannot be provoked
    with the fault target: checked on the decision alone)."""
    from mpsfuzz.corpus.finding import CANNOT_RUN, CHANGED, FIXED, FLAKY, STILL_FAILS, Finding
    from mpsfuzz.pytest_plugin import verdict
    path = finding_file(corpus, "triu")
    finding = Finding.from_json(json.loads(path.read_text()))
    assert verdict(finding, FIXED, "", path) == ("pass", "")
    outcome, message = verdict(finding, FIXED, "", path, xfail=True)
    assert outcome == "fail" and message.startswith("XPASS(strict): fixed now: `triu`") and str(path) in message
    outcome, message = verdict(finding, STILL_FAILS, finding.failure.title, path)
    assert outcome == "fail" and message.splitlines()[0] == f"still fails: {finding.title}"
    assert message.splitlines()[1] == f"why: {finding.explanation_text}" and message.endswith(f"finding: {path}")
    outcome, reason = verdict(finding, STILL_FAILS, "", path, xfail=True)
    assert outcome == "xfail" and "\n" not in reason and finding.explanation_text in reason
    outcome, message = verdict(finding, CHANGED, "now: `triu` raises RuntimeError", path, xfail=True)
    assert outcome == "fail"
    assert message.splitlines()[0] == f"fails differently now: `triu` raises RuntimeError (recorded: {finding.title})"
    assert verdict(finding, FLAKY, "failed 1 of 2 runs", path)[0] == "fail"
    outcome, reason = verdict(finding, FLAKY, "failed 1 of 2 runs", path, xfail=True)
    assert outcome == "xfail" and reason.startswith("flaky: ") and "failed 1 of 2 runs" in reason
    assert verdict(finding, CANNOT_RUN, "no mps here", path) == ("skip", "cannot run here: no mps here")
    finding.record_replay(FIXED, target=FAULT_TARGET, device="cpu")
    assert "(regression: replayed as fixed before)" in verdict(finding, STILL_FAILS, "", path)[1]
