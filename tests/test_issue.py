"""`mpsfuzz repro` and `mpsfuzz report --format issue` on findings of a real campaign
against the fault target: the script is verified before it is shown as a repro, the
draft has every field of PyTorch's bug template, and the templates are editable (those
tests run the campaign: -m slow). The default run's tests of templates, labels and bad
input read a finding written directly (tests/written_findings.py), and call the command
line in this process."""
from __future__ import annotations

import json
import string
from pathlib import Path

import pytest

from mpsfuzz.cli import main
from mpsfuzz.corpus.finding import Finding
from mpsfuzz.generation.recipes import Case, TensorRecipe
from mpsfuzz.reports import issue
from test_fault_campaigns import FAULT_TARGET, findings_in, mpsfuzz
from written_findings import TRIU_4D, TRIU_4D_EXPLAINED, written_finding

FAULTS = "triu_tril_gt3d,add_alpha_abort"


@pytest.fixture(scope="module")
def campaign_corpus(tmp_path_factory) -> Path:
    """What a campaign found: the triu fault's wrong values and add's crash."""
    work = tmp_path_factory.mktemp("issue")
    run = mpsfuzz("run", "--ops", "triu,add", "--target", FAULT_TARGET, "--max-cases", "1500", "--seed", "5",
                  "--corpus", str(work / "corpus"), "--timeout", "3", "--max-findings", "2", "--no-progress",
                  faults=FAULTS, cwd=work)
    assert run.returncode == 1, run.stdout + run.stderr
    assert {f["oracle"] for f in findings_in(work / "corpus")} == {"values", "crash"}
    return work / "corpus"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """One finding of the triu fault's wrong values, written directly."""
    out = tmp_path_factory.mktemp("written") / "corpus"
    written_finding(out, TRIU_4D, FAULTS, TRIU_4D_EXPLAINED)
    return out


def _file(corpus: Path, oracle: str) -> Path:
    return next(p for p in sorted(corpus.glob("*.json")) if json.loads(p.read_text())["oracle"] == oracle)


def _finding(corpus: Path, oracle: str) -> Finding:
    return Finding.from_json(json.loads(_file(corpus, oracle).read_text()))


@pytest.mark.slow
def test_repro_prints_the_verified_script(campaign_corpus, tmp_path):
    done = mpsfuzz("repro", str(_file(campaign_corpus, "values")), faults=FAULTS, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "verified: the script reproduces the finding" in done.stderr
    compile(done.stdout, "repro.py", "exec")  # a script, nothing else on stdout
    assert "torch.triu(" in done.stdout and "# device under test" in done.stdout
    assert "import mpsfuzz" not in done.stdout


@pytest.mark.slow
def test_a_script_that_does_not_reproduce_is_never_shown_as_a_repro(campaign_corpus, tmp_path):
    copy = tmp_path / "c"
    copy.mkdir()
    target = copy / _file(campaign_corpus, "values").name
    target.write_text(_file(campaign_corpus, "values").read_text())
    done = mpsfuzz("repro", str(target), faults="none", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "NOT A REPRO" in done.stderr
    stored = json.loads(target.read_text())["repro"]
    assert stored["verified"] is False and "without showing the bug" in stored["detail"]
    draft = mpsfuzz("report", "--format", "issue", str(copy), faults="none", cwd=tmp_path)
    assert draft.returncode == 0, draft.stderr
    assert "**Not a verified repro**" in draft.stdout and "Verified: this script" not in draft.stdout


@pytest.mark.parametrize("args,words", [
    (["repro", "{corpus}"], "a folder; repro takes one finding file"),
    (["repro", "{tmp}/missing.json"], "no such corpus file or folder"),
    (["repro", "{tmp}/broken.json"], "not a readable finding"),
    (["report", "--format", "issue", "{tmp}/empty"], "no readable findings"),
    (["report", "--format", "issue", "--templates", "{tmp}/nope", "{corpus}"], "--templates="),
    (["report", "--format", "pdf", "{corpus}"], "invalid choice"),
])
def test_bad_input_is_one_line_and_exit_2(corpus, tmp_path, args, words, capsys, monkeypatch):
    (tmp_path / "broken.json").write_text('{"format": 3, "signature": ')
    (tmp_path / "empty").mkdir()
    argv = [a.format(corpus=corpus, tmp=tmp_path) for a in args]
    monkeypatch.chdir(tmp_path)
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert words in err and "Traceback" not in err
    assert len([ln for ln in err.splitlines() if ln.startswith("mpsfuzz: error")]) == 1
    assert not (tmp_path / "mpsfuzz-internal-error.log").exists()


@pytest.mark.slow
def test_issue_draft_follows_the_pytorch_bug_template(campaign_corpus, tmp_path):
    done = mpsfuzz("report", "--format", "issue", str(_file(campaign_corpus, "values")), faults=FAULTS,
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith("# [faulty-cpu] `torch.triu` returns wrong values when inputs have 4 or more dims")
    for field in ("> [!NOTE]", "needs a person's review and commentary before it is filed",
                  "mpsfuzz never files issues itself", "### 🐛 Describe the bug", "<!-- Your words here",
                  "#### Minimal repro", "> Verified: this script reproduces the finding", "```python",
                  "#### Observed vs expected", "expected (CPU):", "AssertionError: Tensor-likes are not close!",
                  "> Expected: the result of eager CPU", "Which result is right: faulty-cpu is the one that is wrong "
                  "(decided by", "independent reference:", "What the bug needs", "4 or more dims", "### Versions", "PyTorch version:",
                  "Suggested labels:", "`module: correctness (silent)`"):
        assert field in text, field
    # the traceback reads as if the script ran directly (no shim frames)
    assert "shim.py" not in text and 'File "repro.py"' in text


@pytest.mark.slow
def test_crash_draft_uses_the_crash_template(campaign_corpus, tmp_path):
    done = mpsfuzz("report", "--format", "issue", str(_file(campaign_corpus, "crash")), faults=FAULTS,
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith("# [faulty-cpu] `torch.add` crashes the process when `alpha` is given (`alpha=")
    for field in ("The process dies instead of raising a Python error.", "#### What the process printed",
                  "SIGABRT", "`module: crash`", "### Versions"):
        assert field in text, field


def test_every_kind_has_a_template_that_fills(corpus):
    finding = _finding(corpus, "values")
    kinds = ("wrong-values", "error", "crash", "hang", "leak", "compile-divergence", "custom-kernel")
    for kind in kinds:
        template = issue.load_template(kind)
        text = template.substitute(issue._fields(finding, None, "test"))
        assert finding.signature in text and "### Versions" in text, kind
        assert not set(template.get_identifiers() if hasattr(template, "get_identifiers") else []) - set(
            issue._fields(finding, None, "test")), kind


@pytest.mark.slow
def test_own_templates_replace_the_shipped_ones(campaign_corpus, tmp_path):
    own = tmp_path / "templates"
    own.mkdir()
    (own / "wrong-values.md").write_text("TEAM TEMPLATE $title\n$repro\n$versions\n")
    done = mpsfuzz("report", "--format", "issue", "--no-verify", "--templates", str(own),
                   str(_file(campaign_corpus, "values")), faults=FAULTS, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("TEAM TEMPLATE [faulty-cpu] `torch.triu`")
    (own / "wrong-values.md").write_text("$no_such_field\n")
    bad = mpsfuzz("report", "--format", "issue", "--no-verify", "--templates", str(own),
                  str(_file(campaign_corpus, "values")), faults=FAULTS, cwd=tmp_path)
    assert bad.returncode == 2 and "bad field" in bad.stderr


def test_known_upstream_findings_link_to_their_issue(corpus):
    finding = _finding(corpus, "values")
    finding.known = {"id": "triu-4d", "status": "known-bug", "reason": "triu wrong past 3 dims",
                     "link": "https://github.com/pytorch/pytorch/issues/144545"}
    text = issue.draft(finding)
    assert "Known upstream: this matches https://github.com/pytorch/pytorch/issues/144545" in text


def test_labels_follow_device_dtype_and_kind(corpus):
    base = _finding(corpus, "values")
    case = Case("sqrt", (TensorRecipe((2,), "complex32"),))
    finding = Finding.create(case, base.failure, target_name="mps", target_spec="mps", device="mps")
    assert {"module: mps", "module: complex", "module: half", "module: correctness (silent)"} <= set(
        issue.labels(finding))
    assert issue.title(finding).startswith("[MPS] ")
    compiled = Finding.create(case, base.failure, target_name="cuda-compiled", target_spec="cuda-compiled",
                              device="cuda")
    assert issue.template_kind(compiled) == "compile-divergence"
    assert {"oncall: pt2", "module: cuda"} <= set(issue.labels(compiled))
    assert isinstance(issue.load_template("leak"), string.Template)


def test_a_random_op_draft_says_what_is_expected_of_its_draws(tmp_path):
    """Random ops get a statistical repro; the draft says what a right answer looks like."""
    import json

    from mpsfuzz.corpus.finding import Finding
    from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
    from mpsfuzz.oracles import Failure
    from mpsfuzz.reports.issue import draft
    case = Case("multinomial", (TensorRecipe((4,), "float32", Layout(gaps=(2,)), ValueRecipe("positive", seed=3)),),
                (("num_samples", 1),))
    failure = Failure(oracle="distribution", kind="wrong-distribution", severity="high",
                      title="`multinomial` produces values that fail a statistical check on faulty-cpu",
                      message="chi2 test failed", dedup_key=("wrong-distribution",))
    finding = Finding.create(case, failure, target_name="faulty-cpu", target_spec="mpsfuzz.testing.faults:target",
                             device="cpu", conditions=("layout:0",), explanation={"text": "only when gapped"})
    path = tmp_path / "f.json"
    path.write_text(json.dumps(finding.to_json()))
    text = draft(Finding.from_json(json.loads(path.read_text())), path)
    assert "same distribution as eager CPU's" in text and "torch.multinomial" in text
