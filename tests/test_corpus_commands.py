"""`mpsfuzz corpus list|show|merge|prune` on corpora built from finding records, and the
pytest plugin (`pytest --mpsfuzz-corpus DIR`) on a corpus a real campaign wrote."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mpsfuzz.cli import main
from mpsfuzz.corpus.finding import Finding
from mpsfuzz.corpus.store import Corpus
from mpsfuzz.fuzzer.recipes import Case, Layout, TensorRecipe
from mpsfuzz.oracles import Failure

from test_fault_campaigns import FAULT_TARGET, findings_in, mpsfuzz


def make(op="triu", conditions=("rank>=4",), flaky=False, layout=Layout()) -> Finding:
    case = Case(op, (TensorRecipe((2, 2, 2, 2), "float32", layout),))
    failure = Failure(oracle="values", kind="wrong-values", title=f"`{op}` returns wrong values on x",
                      message="Mismatched elements: 1 / 16", severity="high", dedup_key=("wrong-values",))
    explanation = {"conditions": list(conditions), "text": f"wrong values only when {'/'.join(conditions)}",
                   "probes": [{"feature": c, "question": f"without {c}", "verdict": "passes", "necessary": True}
                              for c in conditions], "failing_dtypes": ["float32"], "tested_dtypes": ["float32"],
                   "seconds": 0.1}
    return Finding.create(case, failure, target_name="faulty-cpu", target_spec=FAULT_TARGET, device="cpu",
                          conditions=None if flaky else conditions, explanation=None if flaky else explanation,
                          flaky=flaky, reproducibility={"runs": 4, "failed": 2 if flaky else 4,
                                                        "cold_failed": not flaky})


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def corpus(tmp_path) -> Path:
    root = tmp_path / "a"
    store = Corpus(root)
    store.record(make())
    store.record(make("neg", ("layout:0",)))
    store.record(make("erfinv", flaky=True))
    return root


def test_list_shows_each_finding_and_flaky_ones_apart(capsys, corpus):
    code, out, _ = cli(capsys, "corpus", "list", corpus)
    assert code == 0
    reliable, _, flaky = out.partition("flaky (did not reproduce every time)")
    assert "triu" in reliable and "neg" in reliable and "erfinv" not in reliable
    assert "erfinv" in flaky and "failed 2 of 4" in flaky


def test_list_filters_and_json(capsys, corpus):
    code, out, _ = cli(capsys, "corpus", "list", corpus, "--op", "neg", "--format", "json")
    rows = json.loads(out)
    assert code == 0 and [r["op"] for r in rows] == ["neg"] and rows[0]["path"].endswith(".json")
    _, out, _ = cli(capsys, "corpus", "list", corpus, "--status", "flaky", "--format", "json")
    assert [r["op"] for r in json.loads(out)] == ["erfinv"]
    _, out, _ = cli(capsys, "corpus", "list", corpus, "--oracle", "crash", "--format", "json")
    assert json.loads(out) == []


def test_show_by_file_and_by_signature_prefix(capsys, corpus):
    path = next(corpus.glob("neg-*.json"))
    code, out, _ = cli(capsys, "corpus", "show", path)
    assert code == 0 and "layout:0" in out and "ablation" in out
    signature = json.loads(path.read_text())["signature"]
    code, out, _ = cli(capsys, "corpus", "show", signature[:6], "--corpus", corpus, "--format", "json")
    assert code == 0 and json.loads(out)["signature"] == signature


@pytest.mark.parametrize("args, words", [
    (["corpus", "show", "ffff", "--corpus", "{c}"], "matches 0 findings"),
    (["corpus", "show", "not-a-signature", "--corpus", "{c}"], "neither a finding file nor a signature"),
    (["corpus", "list", "{c}", "--status", "bogus"], "--status='bogus'"),
    (["corpus", "list", "{c}/missing"], "no such corpus"),
    (["corpus", "merge", "{c}/missing", "--into", "{c}/out"], "no such corpus"),
    (["corpus", "prune", "{c}", "--fixed-for", "0"], "must be >= 1"),
    (["corpus", "prune", "{c}"], "--fixed-for"),
    (["corpus"], "list, show, merge or prune"),
])
def test_bad_corpus_commands_are_one_line_errors(capsys, corpus, args, words):
    code, out, err = cli(capsys, *[a.replace("{c}", str(corpus)) for a in args])
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err


def test_merge_sums_sightings_once_and_keeps_one_file_per_signature(capsys, tmp_path, corpus):
    other = Corpus(tmp_path / "b")
    other.record(make())                    # the same bug, seen on another machine
    other.record(make(), extra_sightings=2)
    other.record(make("sqrt", ("dtypes:complex32",)))
    (tmp_path / "b" / "broken.json").write_text('{"format": 3, "signature": ')
    dest = tmp_path / "merged"
    code, out, _ = cli(capsys, "corpus", "merge", corpus, tmp_path / "b", "--into", dest)
    assert code == 0 and "skipping" in out and "broken.json" in out
    merged = {f.op: f for _, f in Corpus(dest).load()[0]}
    assert sorted(merged) == ["erfinv", "neg", "sqrt", "triu"]
    assert merged["triu"].times_seen == 1 + 4
    # merging a shard again counts nothing twice
    cli(capsys, "corpus", "merge", tmp_path / "b", "--into", dest)
    assert {f.op: f.times_seen for _, f in Corpus(dest).load()[0]}["triu"] == 5
    assert len(list(dest.glob("*.json"))) == 4


def test_prune_moves_findings_fixed_for_n_versions(capsys, tmp_path):
    root = tmp_path / "c"
    store = Corpus(root)
    paths = {}
    for op in ("triu", "neg", "sqrt"):
        paths[op], _ = store.record(make(op, (f"kwarg:{op}",)))
    store.update(paths["triu"], lambda f: (f.record_replay("fixed", target="t", device="cpu", torch_version="2.12.0"),
                                           f.record_replay("fixed", target="t", device="cpu", torch_version="2.13.0")))
    store.update(paths["neg"], lambda f: f.record_replay("fixed", target="t", device="cpu", torch_version="2.13.0"))
    store.update(paths["sqrt"], lambda f: (f.record_replay("fixed", target="t", device="cpu", torch_version="2.12.0"),
                                           f.record_replay("still-fails", target="t", device="cpu",
                                                           torch_version="2.13.0")))
    code, out, _ = cli(capsys, "corpus", "prune", root, "--fixed-for", "2", "--dry-run")
    assert code == 0 and "would prune" in out and paths["triu"].exists()
    code, out, _ = cli(capsys, "corpus", "prune", root, "--fixed-for", "2")
    assert code == 0 and not paths["triu"].exists() and (root / "pruned" / paths["triu"].name).exists()
    assert paths["neg"].exists() and paths["sqrt"].exists()
    assert {f.op for _, f in store.load()[0]} == {"neg", "sqrt"}


# -- the pytest plugin ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def fault_corpus(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("plugin")
    corpus = work / "corpus"
    run = mpsfuzz("run", "--ops", "neg,triu", "--target", FAULT_TARGET, "--max-cases", "200", "--seed", "1",
                  "--corpus", str(corpus), "--no-progress", faults="unary_offset,triu_tril_gt3d", cwd=work)
    assert run.returncode == 1, run.stdout + run.stderr
    assert sorted(f["op"] for f in findings_in(corpus)) == ["neg", "triu"]
    return corpus


def pytest_run(cwd: Path, *args: str, faults: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, MPSFUZZ_FAULTS=faults)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_plugin_fails_while_the_bug_is_there_and_passes_once_fixed(tmp_path, fault_corpus):
    still = pytest_run(tmp_path, "--mpsfuzz-corpus", str(fault_corpus), faults="unary_offset,triu_tril_gt3d")
    assert still.returncode == 1 and "2 failed" in still.stdout, still.stdout + still.stderr
    assert "still fails: `neg` returns wrong values" in still.stdout
    assert "only when `input` has a storage offset" in still.stdout
    fixed = pytest_run(tmp_path, "--mpsfuzz-corpus", str(fault_corpus), faults="none")
    assert fixed.returncode == 0 and "2 passed" in fixed.stdout, fixed.stdout + fixed.stderr
    watched = pytest_run(tmp_path, "--mpsfuzz-corpus", str(fault_corpus), "--mpsfuzz-xfail",
                         faults="unary_offset,triu_tril_gt3d")
    assert watched.returncode == 0 and "2 xfailed" in watched.stdout, watched.stdout


def test_plugin_selects_by_op_records_history_and_reports_corrupt_files(tmp_path, fault_corpus):
    corpus = tmp_path / "copy"
    corpus.mkdir()
    for p in fault_corpus.glob("*.json"):
        (corpus / p.name).write_text(p.read_text())
    (corpus / "truncated.json").write_text('{"format": 3, "sig')
    run = pytest_run(tmp_path, "--mpsfuzz-corpus", str(corpus), "-k", "neg or truncated", "--mpsfuzz-record",
                     faults="none")
    assert "1 passed" in run.stdout and "1 failed" in run.stdout, run.stdout + run.stderr
    assert "unreadable finding" in run.stdout and "truncated.json" in run.stdout
    (neg,) = [json.loads(p.read_text()) for p in corpus.glob("neg-*.json")]
    (triu,) = [json.loads(p.read_text()) for p in corpus.glob("triu-*.json")]
    assert [h["result"] for h in neg["history"]] == ["fixed"] and triu["history"] == []


def test_plugin_errors_and_stays_out_of_the_way(tmp_path):
    missing = pytest_run(tmp_path, "--mpsfuzz-corpus", str(tmp_path / "nope"), faults="none")
    assert missing.returncode != 0 and "no such file or folder" in missing.stdout + missing.stderr
    (tmp_path / "test_x.py").write_text("def test_x():\n    assert True\n")
    plain = pytest_run(tmp_path, faults="none")
    assert plain.returncode == 0 and "1 passed" in plain.stdout
