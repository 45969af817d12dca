"""`mpsfuzz corpus list|show|merge|prune` on corpora built from finding records (the
pytest plugin has its own tests in test_pytest_plugin.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mpsfuzz.cli import main
from mpsfuzz.corpus.finding import Finding
from mpsfuzz.corpus.store import Corpus
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe
from mpsfuzz.oracles import Failure

from test_fault_campaigns import FAULT_TARGET


def make(op="triu", conditions=("rank>=4",), flaky=False, layout=Layout()) -> Finding:
    case = Case(op, (TensorRecipe((2, 2, 2, 2), "float32", layout),))
    failure = Failure(oracle="values", kind="wrong-values", title=f"`{op}` returns wrong values on x",
                      message="Mismatched elements: 1 / 16", severity="high", dedup_key=("wrong-values",))
    explanation = {"conditions": list(conditions), "text": f"wrong values only when {'/'.join(conditions)}",
                   "probes": [{"feature": c, "question": f"without {c}", "verdict": "passes", "necessary": True}
                              for c in conditions], "failing_dtypes": ["float32"], "tested_dtypes": ["float32"],
                   "seconds": 0.1}
    found = Finding.create(case, failure, target_name="faulty-cpu", target_spec=FAULT_TARGET, device="cpu",
                           conditions=None if flaky else conditions, explanation=None if flaky else explanation,
                           flaky=flaky, reproducibility={"runs": 4, "failed": 2 if flaky else 4,
                                                         "cold_failed": not flaky})
    found.repro = {"script": "# repro\n", "verified": True, "detail": "reproduces"}   # new means verified
    return found


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


def fix(path: Path, *versions: str, then: str | None = None) -> None:
    """Record 'fixed' replays of the finding at ``path`` under ``versions`` (then, optionally, one more result)."""
    def change(f: Finding) -> None:
        for v in versions:
            f.record_replay("fixed", target="t", device="cpu", torch_version=v)
        if then:
            f.record_replay(then, target="t", device="cpu", torch_version="2.14.0", detail="failing again")
    Corpus(path.parent).update(path, change)


def test_list_rows_carry_status_regression_counts_versions_and_file(capsys, corpus):
    triu = next(corpus.glob("triu-*.json"))
    neg = next(corpus.glob("neg-*.json"))
    fix(triu, "2.12.0", then="still-fails")   # fixed once, failing again: a regression
    fix(neg, "2.12.0")
    Corpus(corpus).record(make("neg", ("layout:0",)))   # seen again (a fixed one found again fails again)
    Corpus(corpus).update(triu, lambda f: f.add_sightings("another-machine", 2, "2.11.0"))
    code, out, _ = cli(capsys, "corpus", "list", corpus)
    assert code == 0
    triu_row = next(line for line in out.splitlines() if " triu " in line)
    assert "new (regression)" in triu_row and "2.11.0, " in triu_row and triu.name in triu_row
    assert " 3 " in triu_row
    assert "wrong values only when rank>=4" in triu_row and "functional" in triu_row and "values" in triu_row
    rows = {r["op"]: r for r in json.loads(cli(capsys, "corpus", "list", corpus, "--format", "json")[1])}
    assert rows["neg"]["times_seen"] == 2 and rows["triu"]["regression"] is True
    assert [r["op"] for r in json.loads(cli(capsys, "corpus", "list", corpus, "--status", "regression",
                                            "--format", "json")[1])] == ["neg", "triu"]


def test_list_status_filter_fixed_and_valid_statuses_in_the_error(capsys, corpus):
    fix(next(corpus.glob("neg-*.json")), "2.12.0")
    _, out, _ = cli(capsys, "corpus", "list", corpus, "--status", "fixed", "--format", "json")
    assert [(r["op"], r["status"]) for r in json.loads(out)] == [("neg", "fixed")]
    _, out, _ = cli(capsys, "corpus", "list", corpus, "--status", "fixed")
    assert "neg" in out and "triu" not in out and "fixed" in out
    code, _, err = cli(capsys, "corpus", "list", corpus, "--status", "broken")
    assert code == 2 and len(err.strip().splitlines()) == 1
    for status in ("new", "known-bug", "cpu-bug", "flaky", "fixed"):
        assert status in err


def test_list_reports_unreadable_files_and_json_stays_parseable(capsys, corpus):
    (corpus / "broken.json").write_text('{"format": 3, "signature": ')
    (corpus / "other.json").write_text('{"hello": 1}')
    code, out, _ = cli(capsys, "corpus", "list", corpus)
    assert code == 0 and "skipping" in out and "broken.json" in out and "other.json" in out and "triu" in out
    code, out, err = cli(capsys, "corpus", "list", corpus, "--format", "json")
    assert code == 0 and sorted(r["op"] for r in json.loads(out)) == ["erfinv", "neg", "triu"]
    assert "skipping" in err and "broken.json" in err


def test_text_from_finding_files_is_not_read_as_markup(capsys, tmp_path):
    root = tmp_path / "odd[dir]"
    f = make("neg", ("layout:0",))
    f.explanation["text"] = "wrong values [red]only[/] when [/x] `input` is tensor([nan, 1.])"
    f.failure = Failure(oracle="values", kind="wrong-values", title="`neg` [/] [bold]", message="got [nan] [/]",
                        severity="high", dedup_key=("wrong-values",))
    path, _ = Corpus(root).record(f)
    code, out, err = cli(capsys, "corpus", "list", root)
    assert code == 0, err
    assert "[red]only[/] when [/x]" in out and "odd[dir]" in out
    code, out, err = cli(capsys, "corpus", "show", path)
    assert code == 0, err
    assert "`neg` [/] [bold]" in out and "got [nan] [/]" in out and "[/x]" in out


def test_show_prints_the_whole_finding(capsys, corpus):
    path = next(corpus.glob("triu-*.json"))
    def enrich(f: Finding) -> None:
        f.minimisation = {"elements_before": 96, "elements_after": 16, "attempts": 31, "seconds": 1.5}
        f.record_replay("fixed", target="faulty-cpu", device="cpu", torch_version="2.12.0", date="2026-01-01T00:00:00Z")
        f.record_replay("still-fails", target="faulty-cpu", device="cpu", torch_version="2.13.0",
                        date="2026-02-01T00:00:00Z", detail="it is back")
    Corpus(corpus).update(path, enrich)
    finding = Corpus(corpus).load()[0]
    f = next(f for _, f in finding if f.op == "triu")
    code, out, _ = cli(capsys, "corpus", "show", path)
    assert code == 0
    for words in (f.title, f.signature, json.dumps(f.signature_key), "wrong values only when rank>=4",
                  "rank>=4", "ablation", "feature", "without rank>=4", "passes", "failed 4 of 4 re-runs",
                  "96 -> 16 elements, 31 attempts, 1.5s", f.case.describe(), "Mismatched elements: 1 / 16",
                  "times seen", "first seen", "last seen", "torch versions", "replay history", "2026-01-01T00:00:00Z",
                  "2.12.0", "it is back", "regression", "new (regression)", '"op": "triu"', path.name):
        assert words in out, words
    code, out, _ = cli(capsys, "corpus", "show", path, "--format", "json")
    shown = json.loads(out)
    assert code == 0 and shown["signature"] == f.signature and shown["regression"] is True
    assert [h["result"] for h in shown["history"]] == ["fixed", "still-fails"]


def test_show_signature_prefix_is_case_insensitive_and_ambiguous_prefixes_are_errors(capsys, corpus):
    path = next(corpus.glob("triu-*.json"))
    data = json.loads(path.read_text())
    code, out, _ = cli(capsys, "corpus", "show", data["signature"][:4].upper(), "--corpus", corpus,
                       "--format", "json")
    assert code == 0 and json.loads(out)["signature"] == data["signature"]
    # a second finding whose signature shares the first 6 digits
    twin = dict(data, signature=data["signature"][:6] + "0" * 10)
    (corpus / "twin.json").write_text(json.dumps(twin))
    code, out, err = cli(capsys, "corpus", "show", data["signature"][:6], "--corpus", corpus)
    assert code == 2 and "matches 2 findings" in err and "give more digits" in err
    assert len(err.strip().splitlines()) == 1 and out == ""
    code, out, _ = cli(capsys, "corpus", "show", data["signature"][:7], "--corpus", corpus, "--format", "json")
    assert code == 0 and json.loads(out)["signature"] == data["signature"]
    code, _, err = cli(capsys, "corpus", "show", "abcd", "--corpus", corpus / "nowhere")
    assert code == 2 and "no such corpus folder" in err and len(err.strip().splitlines()) == 1
    (corpus / "bad.json").write_text("{")
    code, _, err = cli(capsys, "corpus", "show", corpus / "bad.json")
    assert code == 2 and "not a readable finding" in err and len(err.strip().splitlines()) == 1


def test_merge_message_creates_the_destination_and_checks_sources_first(capsys, tmp_path, corpus):
    dest = tmp_path / "new" / "dest"
    code, out, _ = cli(capsys, "corpus", "merge", corpus, "--into", dest)
    assert code == 0 and f"merged 3 findings from 1 source(s) into {dest}: 3 new, 0 merged into existing" in out
    assert len(list(dest.glob("*.json"))) == 3
    code, out, _ = cli(capsys, "corpus", "merge", corpus, next(corpus.glob("neg-*.json")), "--into", dest)
    assert code == 0 and "merged 4 findings from 2 source(s)" in out and "0 new, 4 merged into existing" in out
    assert {f.op: f.times_seen for _, f in Corpus(dest).load()[0]} == {"erfinv": 1, "neg": 1, "triu": 1}
    other = tmp_path / "never"
    code, _, err = cli(capsys, "corpus", "merge", corpus, tmp_path / "missing", "--into", other)
    assert code == 2 and "missing" in err and len(err.strip().splitlines()) == 1 and not other.exists()
    (tmp_path / "a-file").write_text("")
    code, _, err = cli(capsys, "corpus", "merge", corpus, "--into", tmp_path / "a-file")
    assert code == 2 and "not a folder" in err


def test_merge_keeps_history_and_versions_of_both_sides(capsys, tmp_path, corpus):
    other = Corpus(tmp_path / "b")
    path, _ = other.record(make())
    fix(path, "2.12.0")
    code, _, _ = cli(capsys, "corpus", "merge", corpus, tmp_path / "b", "--into", tmp_path / "m")
    assert code == 0
    triu = next(f for _, f in Corpus(tmp_path / "m").load()[0] if f.op == "triu")
    assert [h["result"] for h in triu.history] == ["fixed"] and triu.times_seen == 2 and len(triu.sightings) == 2


def test_prune_reports_each_file_and_a_count(capsys, tmp_path):
    root = tmp_path / "c"
    store = Corpus(root)
    paths = {op: store.record(make(op, (f"kwarg:{op}",)))[0] for op in ("triu", "neg", "sqrt", "abs")}
    fix(paths["triu"], "2.12.0", "2.13.0")
    fix(paths["neg"], "2.13.0", "2.13.0")               # fixed twice, but under one torch version
    fix(paths["sqrt"], "2.12.0", "2.13.0", then="still-fails")   # fixed, then failing again
    code, out, _ = cli(capsys, "corpus", "prune", root, "--fixed-for", "2", "--dry-run")
    assert code == 0 and f"would prune {paths['triu']}" in out and "1 finding(s)" in out and "dry run" in out
    assert all(p.exists() for p in paths.values()) and not (root / "pruned").exists()
    code, out, _ = cli(capsys, "corpus", "prune", root, "--fixed-for", "2")
    assert code == 0 and f"pruned {paths['triu']}" in out and "1 finding(s)" in out
    assert sorted(p.name for p in (root / "pruned").iterdir()) == [paths["triu"].name]
    assert all(paths[op].exists() for op in ("neg", "sqrt", "abs"))
    code, out, _ = cli(capsys, "corpus", "prune", root, "--fixed-for", "1")
    assert code == 0 and f"pruned {paths['neg']}" in out and "1 finding(s)" in out
    assert {f.op for _, f in store.load()[0]} == {"sqrt", "abs"}
    code, out, _ = cli(capsys, "corpus", "list", root, "--format", "json")
    assert sorted(r["op"] for r in json.loads(out)) == ["abs", "sqrt"]   # pruned/ is not listed


@pytest.mark.parametrize("args, words", [
    (["corpus", "list", "{c}", "--format", "xml"], "invalid choice"),
    (["corpus", "show", "{c}", "--format", "yaml"], "invalid choice"),
    (["corpus", "prune", "{c}", "--fixed-for", "two"], "expected an integer"),
    (["corpus", "prune", "{c}", "--fixed-for", "-1"], "must be >= 1"),
    (["corpus", "prune", "{c}/missing", "--fixed-for", "1"], "no such corpus folder"),
    (["corpus", "merge", "{c}"], "--into"),
    (["corpus", "merge", "--into", "{c}/out"], "SRC"),
    (["corpus", "frobnicate"], "invalid choice"),
    (["corpus", "show"], "finding"),
    ([], "a command is required"),
])
def test_more_bad_corpus_flags_are_one_line_errors(capsys, corpus, args, words):
    code, out, err = cli(capsys, *[a.replace("{c}", str(corpus)) for a in args])
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err
    assert not (corpus / "out").exists()
