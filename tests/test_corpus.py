"""The corpus folder: one file per signature, sightings counted, corrupt files reported and
skipped, atomic writes; and what the deduplication signature does and does not key on."""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from mpsfuzz.corpus.finding import FINDING_FORMAT, Finding, signature_key, signature_of
from mpsfuzz.corpus.store import Corpus, atomic_write_json, load_findings
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import Failure


def wrong_values(title="`add` returns wrong values", key=("wrong-values", "max-abs")) -> Failure:
    return Failure(oracle="values", kind="wrong-values", title=title, message="Mismatched elements: 1 / 6",
                   severity="high", dedup_key=key, details={"max_abs": 3.5})


def crash(frames=("at::native::foo", "mps::bar")) -> Failure:
    return Failure(oracle="crash", kind="crash", title="SIGSEGV in `add`", message="worker died",
                   severity="critical", dedup_key=("SIGSEGV", *frames))


def case(op="add", dtype="float32", shape=(2, 3), layout=Layout(), seed=0, n_inputs=2) -> Case:
    recipe = TensorRecipe(shape, dtype, layout, ValueRecipe("normal", seed=seed))
    return Case(op=op, inputs=(recipe,) * n_inputs, kwargs=(("alpha", 2),))


def finding(c: Case | None = None, failure: Failure | None = None) -> Finding:
    found = Finding.create(c or case(), failure or wrong_values(), target_name="faulty-cpu",
                           target_spec="mpsfuzz.testing.faults:target", device="cpu")
    found.repro = {"script": "# repro\n", "verified": True}   # new means verified
    return found


def json_files(root: Path) -> list[Path]:
    return sorted(root.glob("*.json"))


# -- recording ----------------------------------------------------------------------------

def test_record_writes_one_json_per_signature(tmp_path):
    corpus = Corpus(tmp_path / "corpus")
    f = finding()
    path, new = corpus.record(f)
    assert new and path.exists() and path.parent == tmp_path / "corpus"
    assert json_files(tmp_path / "corpus") == [path]
    assert f.signature in path.name and path.name.startswith("add-values-")
    data = json.loads(path.read_text())
    assert data["format"] == FINDING_FORMAT
    assert data["signature"] == f.signature and data["times_seen"] == 1
    assert Case.from_json(data["case"]) == f.case
    found, problems = corpus.load()
    assert problems == []
    assert [(p, g.signature, g.case, g.failure) for p, g in found] == [(path, f.signature, f.case, f.failure)]


def test_same_signature_counts_a_sighting_and_keeps_the_first_case(tmp_path):
    corpus = Corpus(tmp_path)
    first = finding(case(shape=(2, 3), seed=1))
    second = finding(case(shape=(5, 4, 3), seed=2, dtype="float16"))  # same class: same signature
    assert first.signature == second.signature and first.case != second.case
    p1, new1 = corpus.record(first)
    p2, new2 = corpus.record(second)
    assert (new1, new2) == (True, False) and p1 == p2
    assert len(json_files(tmp_path)) == 1
    (path, stored), = corpus.load()[0]
    assert stored.times_seen == 2
    assert stored.case == first.case
    p3, new3 = corpus.record(finding(case(seed=3)), extra_sightings=4)
    assert not new3
    assert corpus.load()[0][0][1].times_seen == 2 + 1 + 4
    assert corpus.load()[0][0][1].case == first.case


def test_different_signatures_get_different_files(tmp_path):
    corpus = Corpus(tmp_path)
    findings = [finding(), finding(case(dtype="int32")), finding(failure=wrong_values(key=("other",))),
                finding(case(op="mul")), finding(failure=crash())]
    assert len({f.signature for f in findings}) == len(findings)
    paths = [corpus.record(f) for f in findings]
    assert all(new for _, new in paths)
    assert len({p for p, _ in paths}) == len(findings)
    assert len(json_files(tmp_path)) == len(findings)
    found, problems = corpus.load()
    assert problems == [] and {f.signature for _, f in found} == {f.signature for f in findings}


def test_add_sightings(tmp_path):
    corpus = Corpus(tmp_path)
    f = finding()
    corpus.record(f)
    corpus.add_sightings({f.signature: 5})
    assert corpus.load()[0][0][1].times_seen == 6


def test_concurrent_records_lose_no_sighting(tmp_path):
    corpus = Corpus(tmp_path)
    threads = [threading.Thread(target=lambda s=s: Corpus(tmp_path).record(finding(case(seed=s))))
               for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    found, problems = corpus.load()
    assert problems == [] and len(found) == 1
    assert found[0][1].times_seen == 8


# -- corrupt files ----------------------------------------------------------------------------

def test_corrupt_files_are_reported_and_skipped(tmp_path):
    corpus = Corpus(tmp_path)
    good_path, _ = corpus.record(finding())
    good_text = good_path.read_text()
    wrong_version = json.loads(good_text)
    wrong_version["format"] = 99
    bad_case = json.loads(good_text)
    bad_case["case"]["format"] = 7
    missing_field = json.loads(good_text)
    del missing_field["target"]
    bad_kwargs = json.loads(good_text)
    bad_kwargs["case"]["kwargs"] = ["alpha", 2]
    bad = {
        "truncated.json": good_text[: len(good_text) // 2],
        "empty.json": "",
        "version.json": json.dumps(wrong_version),
        "list.json": json.dumps([1, 2, 3]),
        "string.json": json.dumps("a finding"),
        "case-version.json": json.dumps(bad_case),
        "missing-target.json": json.dumps(missing_field),
        "bad-kwargs.json": json.dumps(bad_kwargs),
    }
    for name, text in bad.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00garbage")
    found, problems = corpus.load()
    assert [p for p, _ in found] == [good_path]
    reported = {p.name: why for p, why in problems}
    assert set(reported) == set(bad) | {"binary.json"}
    assert all(isinstance(why, str) and why for why in reported.values())
    assert all(p.parent == tmp_path for p, _ in problems)  # the path of each bad file
    assert "99" in reported["version.json"]
    assert "7" in reported["case-version.json"]


def test_load_findings_reports_missing_paths(tmp_path):
    found, problems = load_findings([tmp_path / "nope"])
    assert found == [] and problems == [(tmp_path / "nope", "no such file or folder")]


def test_load_findings_of_single_file(tmp_path):
    path, _ = Corpus(tmp_path).record(finding())
    found, problems = load_findings([path])
    assert problems == [] and len(found) == 1 and found[0][0] == path


def test_record_over_corrupt_file_keeps_it_aside(tmp_path):
    corpus = Corpus(tmp_path)
    f = finding()
    path = corpus.path_for(f)
    path.write_text("{not json")
    new_path, new = corpus.record(f)
    assert new and new_path == path
    assert path.with_suffix(".corrupt").read_text() == "{not json"
    assert corpus.load()[0][0][1].signature == f.signature


def test_hidden_and_inflight_files_are_not_findings(tmp_path):
    corpus = Corpus(tmp_path)
    corpus.record(finding())
    (tmp_path / ".hidden.json").write_text("junk")
    (tmp_path / "inflight-123.json").write_text("junk")
    found, problems = corpus.load()
    assert len(found) == 1 and problems == []


# -- atomic writes -------------------------------------------------------------------------

def test_atomic_write_leaves_no_temp_files(tmp_path):
    corpus = Corpus(tmp_path)
    for seed in range(3):
        corpus.record(finding(case(seed=seed)))
    corpus.record(finding(case(dtype="int64")))
    corpus.add_sightings({finding().signature: 2})
    names = sorted(os.listdir(tmp_path))
    assert not [n for n in names if n.endswith(".tmp") or "tmp" in n]
    assert set(names) - {".lock", ".corpus-id"} == {p.name for p in json_files(tmp_path)}


def test_atomic_write_json_replaces_whole_file(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"old": "' + "x" * 1000 + '"}')
    atomic_write_json(path, {"new": 1})
    assert json.loads(path.read_text()) == {"new": 1}
    assert os.listdir(tmp_path) == ["x.json"]


# -- signatures ------------------------------------------------------------------------------

def test_signature_ignores_shape_and_dtype_within_a_class():
    base = signature_of(case(dtype="float32", shape=(2, 3)), wrong_values())
    assert signature_of(case(dtype="float16", shape=(7, 1, 4)), wrong_values()) == base
    assert signature_of(case(dtype="bfloat16", shape=(), seed=9), wrong_values()) == base
    assert signature_of(case(dtype="int8"), wrong_values()) == signature_of(case(dtype="uint8", shape=(9,)), wrong_values())
    assert signature_of(case(dtype="int64"), wrong_values()) == signature_of(case(dtype="uint32"), wrong_values())


def test_signature_keys_on_dtype_class():
    f32 = signature_of(case(dtype="float32"), wrong_values())
    assert signature_of(case(dtype="int32"), wrong_values()) != f32
    assert signature_of(case(dtype="complex64"), wrong_values()) != f32
    assert signature_of(case(dtype="bool"), wrong_values()) != f32
    # mixed dtypes key on the main input's (the first floating one: an index tensor
    # follows the data it indexes)
    mixed = Case(op="add", inputs=(TensorRecipe((2,), "int32"), TensorRecipe((2,), "float32")))
    assert signature_key(mixed, wrong_values())[-2] == "float"


def test_signature_keys_on_necessary_conditions_not_on_the_case():
    """With an ablation, the signature is the symptom plus the necessary features: the
    dtype, shape, variant and layout of the case itself no longer matter."""
    base = signature_of(case(), wrong_values(), ("layout:0",))
    assert signature_of(case(dtype="int8", shape=(5,)), wrong_values(), ("layout:0",)) == base
    assert signature_of(case(layout=Layout(offset=1)), wrong_values(), ("layout:0",)) == base
    assert signature_of(case(), wrong_values(), ("layout:0", "dtypes:float16")) != base
    assert signature_of(case(), wrong_values(), ("dtypes:float16",)) != base
    assert signature_of(case(), wrong_values(), ("dtypes:float16", "layout:0")) == \
        signature_of(case(), wrong_values(), ("layout:0", "dtypes:float16"))
    assert signature_of(case(), wrong_values(), ()) != base
    assert signature_of(case(), wrong_values(), (), flaky=True) != signature_of(case(), wrong_values(), ())


def test_signature_keys_on_layout_class():
    plain = signature_of(case(), wrong_values())
    transposed = signature_of(case(layout=Layout(permutation=(1, 0))), wrong_values())
    assert transposed != plain
    # any awkward layout is the same class
    gapped = signature_of(case(layout=Layout(gaps=(2, 1))), wrong_values())
    assert gapped == transposed
    # an identity permutation is not awkward
    assert signature_of(case(layout=Layout(permutation=(0, 1))), wrong_values()) == plain


def test_signature_keys_on_op_oracle_and_dedup_key():
    base = signature_of(case(), wrong_values())
    assert signature_of(case(op="sub"), wrong_values()) != base
    assert signature_of(case(), wrong_values(key=("wrong-values", "nan"))) != base
    assert signature_of(case(), wrong_values(title="another title")) == base  # titles are free text
    errors = Failure(oracle="errors", kind="dut-raises", title="t", message="m", severity="high",
                     dedup_key=("wrong-values", "max-abs"))
    assert signature_of(case(), errors) != base


def test_crash_signature_ignores_dtype_and_layout():
    base = signature_of(case(dtype="float32"), crash())
    assert signature_of(case(dtype="int32", layout=Layout(permutation=(1, 0))), crash()) == base
    assert signature_of(case(dtype="complex64", shape=(0, 5), layout=Layout(offset=2)), crash()) == base
    assert signature_of(case(), crash(frames=("other::frame",))) != base
    assert signature_of(case(op="mul"), crash()) != base
    assert signature_key(case(), crash()) == ["add", "crash", "SIGSEGV", "at::native::foo", "mps::bar"]


def test_finding_json_round_trip(tmp_path):
    f = finding(case(layout=Layout(offset=1, gaps=(2, 1))))
    back = Finding.from_json(json.loads(json.dumps(f.to_json())))
    assert back.signature == f.signature and back.case == f.case and back.failure == f.failure
    assert (back.target_name, back.target_spec, back.device) == ("faulty-cpu", "mpsfuzz.testing.faults:target", "cpu")
    assert back.to_json()["trigger"]["layout_class"] == "strided"


@pytest.mark.parametrize("bad", [[], "x", {"format": 2}, {"no": "format"}, {"format": 1}])
def test_finding_from_bad_json_raises_value_error(bad):
    with pytest.raises(ValueError):
        Finding.from_json(bad)


# -- one bug, one finding: special cases fold into the general finding ---------------------

def explained(c: Case, conditions: tuple[str, ...]) -> Finding:
    return Finding.create(c, wrong_values(), target_name="faulty-cpu", target_spec="mpsfuzz.testing.faults:target",
                          device="cpu", conditions=conditions,
                          explanation={"conditions": list(conditions), "text": " and ".join(conditions)})


def test_fold_moves_the_special_case_aside_and_sums_its_sightings(tmp_path):
    corpus = Corpus(tmp_path / "corpus")
    gapped = Layout(gaps=(2,))
    special = explained(case(shape=(2, 2), layout=Layout(gaps=(1, 2))), ("layout:0", "rank>=2"))
    general = explained(case(shape=(4,), layout=gapped), ("layout:0",))
    special_path, _ = corpus.record(special)
    corpus.record(special)                      # seen twice
    general_path, _ = corpus.record(general)
    assert corpus.fold(general_path, special_path)
    assert not special_path.exists()
    moved = tmp_path / "corpus" / "merged" / special_path.name
    assert json.loads(moved.read_text())["signature"] == special.signature   # nothing is lost
    (only_path, folded), = corpus.load()[0]
    assert only_path == general_path and folded.times_seen == 3
    assert folded.special_cases == [{"signature": special.signature, "conditions": ["layout:0", "rank>=2"],
                                     "explanation": "layout:0 and rank>=2", "times_seen": 2,
                                     "file": f"merged/{special_path.name}"}]
    assert Finding.from_json(json.loads(general_path.read_text())).special_cases == folded.special_cases
    # folding again (the special file is gone) changes nothing
    assert not corpus.fold(general_path, special_path)
    assert corpus.load()[0][0][1].times_seen == 3


def test_a_finding_is_a_special_case_when_its_minimal_case_meets_the_other_conditions():
    from mpsfuzz.campaign.engine import FoundBug
    two_d = FoundBug.of(explained(case(shape=(2, 2), layout=Layout(gaps=(1, 2))), ("layout:0", "rank>=2")))
    one_d = explained(case(shape=(4,), layout=Layout(gaps=(2,))), ("layout:0",))
    assert two_d.special_case_of(one_d)
    assert not FoundBug.of(one_d).special_case_of(
        explained(case(shape=(2, 2), layout=Layout(gaps=(1, 2))), ("layout:0", "rank>=2")))
    # two causes on one op stay apart: float16 values vs non-contiguous inputs
    half = FoundBug.of(explained(case(dtype="float16"), ("dtypes:float16",)))
    strided = explained(case(layout=Layout(gaps=(1, 2))), ("layout:0",))
    assert not half.special_case_of(strided)
    assert not FoundBug.of(strided).special_case_of(explained(case(dtype="float16"), ("dtypes:float16",)))


def test_a_dtype_condition_speaks_of_its_own_class_only():
    from mpsfuzz.triage.ablation import holds
    assert holds("dtypes:int32+int64", case(dtype="int64"))
    assert not holds("dtypes:int32+int64", case(dtype="uint8"))
    # a float case is not ruled out by a restriction among integers; classes: decides
    assert holds("dtypes:int32+int64", case(dtype="float32"))
    assert holds("classes:float+integral", case(dtype="float32"))
    assert not holds("classes:integral", case(dtype="float32"))


def _capability(message: str) -> Failure:
    from mpsfuzz.oracles.errors import normalise_message
    return Failure(oracle="errors", kind="capability", title="`isclose` accepts what CPU rejects",
                   message=message, severity="low", dedup_key=("capability", "RuntimeError", normalise_message(message)))


def test_an_error_keys_on_its_message_whatever_the_rank_of_the_shapes_in_it():
    # isclose(0-d, x, equal_nan=True) on an H100 run: one record per rank of x's shape
    ranks = [_capability(f"output with shape [] doesn't match the broadcast shape {list(shape)}")
             for shape in ((1,), (1, 1), (6, 8, 1, 2))]
    assert len({r.dedup_key for r in ranks}) == 1
    assert len({signature_of(case("isclose"), r, ()) for r in ranks}) == 1
    # numbers that are not a shape still do not split a key, and other messages stay apart
    other = _capability("index 5 is out of bounds for dimension 0 with size 3")
    assert other.dedup_key != ranks[0].dedup_key


def test_a_key_written_before_shapes_were_collapsed_reads_as_now():
    written = _capability("output with shape [] doesn't match the broadcast shape [1, 1]").to_json()
    written["dedup_key"] = ["capability", "RuntimeError", "output with shape [] doesn't match the broadcast shape [N, N]"]
    assert Failure.from_json(written).dedup_key == _capability(
        "output with shape [1] doesn't match the broadcast shape [2, 3, 4]").dedup_key
