"""A campaign's plan (campaign/plan.py) and the GenerationSettings it hands every process
(generation/settings.py), issue 39 point 2: the request `run` and `daemon` parse becomes
the ops (selection, shard, the large class and family), the target, the settings and the
sizing of large cases, with no worker started; bad input is one PlanError line; the
environment is read only as the user's defaults and never written; and a worker installs
the settings it is handed, whatever its environment says."""
from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from mpsfuzz.campaign.plan import CampaignRequest, PlanError, large_family_for, plan_campaign
from mpsfuzz.generation import catalogue
from mpsfuzz.generation.settings import (DEFAULT_MAX_BYTES, HOST_MAX_BYTES, GenerationSettings,
                                         from_environment)

GIB = 2**30
PACKAGE = Path(__file__).resolve().parents[1] / "mpsfuzz"


def _plan(tmp_path, *, free=None, environ=None, **asked):
    """The plan of ``asked`` on the CPU target (loaded here, no worker), the device's free
    memory ``free`` bytes, the environment ``environ`` (default: none of mpsfuzz's)."""
    request = CampaignRequest(corpus_dir=tmp_path / "corpus", target="cpu", **asked)
    return plan_campaign(request, free_memory=lambda device: free, environ=environ or {})


# -- selection, shard, the large class and family ---------------------------------------------

def test_a_shard_of_a_family_is_that_shard_of_its_ops_and_the_first_line_says_so(tmp_path):
    family = catalogue.select("reduction")
    plan = _plan(tmp_path, ops="reduction", shard=(2, 3), jobs=1, max_cases=10)
    assert plan.ops == catalogue.shard(family, 2, 3) and plan.ops
    assert plan.config.target_spec == "cpu" and plan.target_name == "cpu"
    first = plan.notes[0].text
    assert "testing target 'cpu'" in first and f"shard 2/3: {len(plan.ops)} of {len(family)} ops" in first
    assert plan.settings == GenerationSettings()   # nothing asked, nothing in the environment
    assert plan.large is None


def test_large_adds_each_op_s_large_class_and_for_a_family_the_large_family(tmp_path):
    plan = _plan(tmp_path, ops="reduction", large=True, jobs=1, max_cases=10)
    family = catalogue.select("reduction")
    added = [op for op in plan.ops if op not in family]
    assert set(catalogue.large_class(family)) <= set(added)
    assert set(catalogue.select(catalogue.LARGE_FAMILY)) <= set(added)
    assert plan.settings.large_inputs      # users' kernels draw their large inputs too
    # one op named alone gets its own large class, not the family
    one = _plan(tmp_path, ops="sum", large=True, jobs=1, max_cases=10)
    assert one.ops == ["sum", *catalogue.large_class(["sum"])] and large_family_for("sum") == []


def test_sizing_lowers_max_bytes_to_half_the_free_memory_over_the_lanes(tmp_path):
    plan = _plan(tmp_path, ops="sum", large=True, jobs=2, max_bytes=40 * GIB, free=79 * GIB, max_cases=10)
    assert plan.jobs == 2 and plan.settings.max_bytes == 79 * GIB // 4
    assert plan.large.enabled and any("--max-bytes lowered" in n.text for n in plan.notes), plan.notes
    four = _plan(tmp_path, ops="sum", large=True, jobs=4, max_bytes=40 * GIB, free=79 * GIB, max_cases=10)
    assert four.settings.max_bytes == 79 * GIB // 8
    # what the device cannot tell leaves --max-bytes as given
    unknown = _plan(tmp_path, ops="sum", large=True, jobs=2, max_bytes=40 * GIB, free=None, max_cases=10)
    assert unknown.settings.max_bytes == 40 * GIB


def test_the_daemon_turns_the_large_sizes_on_where_the_device_has_the_memory(tmp_path):
    on = _plan(tmp_path, ops="reduction", auto_large=True, jobs=1, free=16 * GIB)
    assert on.settings.large_inputs and on.settings.max_bytes == 16 * GIB // 2
    assert set(catalogue.select(catalogue.LARGE_FAMILY)) <= set(on.ops)
    for free, refused in ((4 * GIB, False), (16 * GIB, True)):
        off = _plan(tmp_path, ops="reduction", auto_large=True, no_large=refused, jobs=1, free=free)
        assert off.ops == catalogue.select("reduction") and not off.settings.large_inputs
        assert off.settings.max_bytes == DEFAULT_MAX_BYTES
        assert any(n.text.strip().startswith("large sizes off") for n in off.notes), off.notes


def test_devices_take_at_least_one_lane_each_and_drawing_follows_the_request(tmp_path):
    plan = _plan(tmp_path, ops="sum", jobs=1, devices=("0", "1", "2"), draw_jobs=0, siblings=2, max_cases=10)
    assert plan.jobs == 3 and plan.devices == ("0", "1", "2")
    assert (plan.config.draw_jobs, plan.config.siblings) == (0, 2)
    # --max-cases without a budget: siblings would spend the cases on fewer draws
    assert _plan(tmp_path, ops="sum", jobs=1, max_cases=10).config.siblings == 0


# -- one-line errors ------------------------------------------------------------------------

# The one shard of two that holds no `sum`.
EMPTY_SHARD = (1, 2) if not catalogue.shard(["sum"], 1, 2) else (2, 2)


@pytest.mark.parametrize("asked, fragment", [
    (dict(ops="no_such_op"), "--ops: 'no_such_op' is neither a family"),
    (dict(ops="sum", shard=EMPTY_SHARD), f"--shard={EMPTY_SHARD[0]}/2: no ops in this shard of the 1 selected"),
    (dict(ops="sum", oracles="values,no_such_oracle"), "no_such_oracle"),
    (dict(ops="sum", kernels=("/no/such/kernels.py",)), "no such file"),
    (dict(ops="sum", target="no_such_target"), "no_such_target"),
], ids=["op", "shard", "oracle", "kernels", "target"])
def test_bad_input_is_a_one_line_plan_error_before_any_corpus_is_made(tmp_path, asked, fragment):
    request = CampaignRequest(**{"corpus_dir": tmp_path / "corpus", "target": "cpu", "jobs": 1, "max_cases": 1,
                                 **asked})
    with pytest.raises(PlanError) as info:
        plan_campaign(request, free_memory=lambda device: None, environ={})
    assert fragment in str(info.value) and "\n" not in str(info.value), str(info.value)
    assert not (tmp_path / "corpus").exists()


# -- the settings: the environment read once, as defaults, and never written -------------------

def test_the_environment_gives_the_defaults_and_the_request_wins(tmp_path):
    kernel_file = tmp_path / "mine.py"
    kernel_file.write_text("import mpsfuzz\n@mpsfuzz.kernel(reference=lambda x: x, inputs=[mpsfuzz.tensor()])\n"
                           "def planned_identity(x):\n    return x\n")
    environ = {"MPSFUZZ_MAX_BYTES": str(3 * GIB), "MPSFUZZ_HOST_MAX_BYTES": str(2 * GIB), "MPSFUZZ_LARGE": "1",
               "MPSFUZZ_KERNELS": "/elsewhere/theirs.py"}
    assert from_environment(environ) == GenerationSettings(3 * GIB, 2 * GIB, True, ("/elsewhere/theirs.py",))
    assert from_environment({"MPSFUZZ_MAX_BYTES": "lots", "MPSFUZZ_LARGE": "yes"}) == GenerationSettings()
    before = dict(os.environ)
    try:
        plan = plan_campaign(CampaignRequest(corpus_dir=tmp_path / "c", target="cpu", max_bytes=GIB // 2,
                                             kernels=(str(kernel_file),), jobs=1, max_cases=1),
                             free_memory=lambda device: None, environ={**environ, "MPSFUZZ_KERNELS": ""})
        assert plan.ops == ["planned_identity"]          # the file's kernels alone
        assert plan.settings == GenerationSettings(GIB // 2, 2 * GIB, True, (os.path.realpath(kernel_file),))
        assert plan.settings.host_bound == GIB // 2
        assert dict(os.environ) == before                # nothing set for other processes to read
    finally:
        catalogue.REGISTRY.pop("planned_identity", None)


def test_settings_are_checked_and_cross_a_process_boundary_as_json():
    settings = GenerationSettings(5 * GIB, HOST_MAX_BYTES, True, ("/a.py", "/b.py"))
    assert GenerationSettings.from_json(settings.to_json()) == settings
    assert settings.with_kernel_files(["/b.py", "/c.py"]).kernel_files == ("/a.py", "/b.py", "/c.py")
    for bad in (dict(max_bytes=0), dict(host_max_bytes=-1), dict(max_bytes=True), dict(kernel_files=["/a.py"])):
        with pytest.raises(ValueError):
            GenerationSettings(**bad)


def _string_constants(tree: ast.AST) -> set[str]:
    """The module's string constants, docstrings aside."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings}


def test_only_the_settings_module_names_the_generation_variables():
    """MPSFUZZ_MAX_BYTES, _HOST_MAX_BYTES, _LARGE and _KERNELS are a user's way in, read in
    one place: no other module reads or sets them (the CLI once set them for every process)."""
    names = ("MPSFUZZ_MAX_BYTES", "MPSFUZZ_HOST_MAX_BYTES", "MPSFUZZ_LARGE", "MPSFUZZ_KERNELS")
    naming = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                    if any(name in text for text in _string_constants(ast.parse(path.read_text()))
                           for name in names))
    assert naming == ["generation/settings.py"], naming


def test_a_worker_installs_the_settings_it_is_handed(with_settings, monkeypatch):
    """A dense input of 2 MiB is no case where one input may take 1 MiB: in a worker,
    what the pool hands it decides, not the environment it inherits."""
    from mpsfuzz.execution.worker import WorkerPool
    from mpsfuzz.generation.recipes import Case, TensorRecipe
    from mpsfuzz.oracles.judge import judge_case
    # a user's variable, which the workers inherit: not what they go by
    monkeypatch.setenv("MPSFUZZ_MAX_BYTES", str(1 << 20))
    case = Case("sum", (TensorRecipe((1 << 19,), "float32"),)).to_json()
    with_settings(max_bytes=GIB)
    with WorkerPool("cpu", execute=judge_case, settings=GenerationSettings(max_bytes=1 << 20)) as small, \
            WorkerPool("cpu", execute=judge_case) as installed:   # (this process's: 1 GiB)
        assert small.run(case, ("values",), "sum").valid is False
        assert installed.run(case, ("values",), "sum").valid is True
