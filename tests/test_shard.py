"""`--shard K/N`: the selected ops split into N parts, the same on every machine.

`catalogue.shard` is a pure function: the N shards partition the ops exactly, whatever
their order and whatever Python's hash seed. The CLI rejects a bad K/N with a one-line
usage error (and says so when a shard holds none of the selected ops), and two campaigns
of shards 1/2 and 2/2 test disjoint ops that together are the selection (seen in each
corpus's run log, which lists the campaign's ops and the cases run per op; -m slow: two
campaigns, where the pure function's tests above prove the split, issue 39)."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from mpsfuzz.generation import catalogue

REPO = Path(__file__).resolve().parents[1]
FAULT_TARGET = "mpsfuzz.testing.faults:target"
# Cheap ops of three families, chosen so that both halves of a 2-way split are non-empty
# (the test checks that before relying on it).
CAMPAIGN_OPS = ["triu", "add", "sum", "mul", "sub", "div", "abs", "neg"]


def _env(**extra: str) -> dict:
    env = dict(os.environ)
    env.pop("MPSFUZZ_FAULTS", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


# -- the pure function ---------------------------------------------------------------------

@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 50, 1000])
def test_shards_partition_the_catalogue_exactly(count):
    ops = sorted(catalogue.all_ops())
    shards = [catalogue.shard(ops, k, count) for k in range(1, count + 1)]
    assert sum(len(s) for s in shards) == len(ops)              # no op twice ...
    assert set().union(*map(set, shards)) == set(ops)          # ... and none left out
    for i, a in enumerate(shards):
        for b in shards[i + 1:]:
            assert not set(a) & set(b)
    for k, part in enumerate(shards, start=1):                 # the order given is kept
        assert part == [op for op in ops if op in set(part)]
        assert all(catalogue.shard_of(op, count) == k for op in part)


def test_more_shards_than_ops_leaves_some_empty_but_still_partitions():
    ops = ["add", "sum", "triu"]
    shards = [catalogue.shard(ops, k, 10) for k in range(1, 11)]
    assert sorted(op for s in shards for op in s) == sorted(ops)
    assert sum(not s for s in shards) >= 7


def test_shards_of_a_real_catalogue_are_roughly_even():
    ops = sorted(catalogue.all_ops())
    sizes = [len(catalogue.shard(ops, k, 4)) for k in range(1, 5)]
    assert min(sizes) > len(ops) / 4 / 2, sizes


def test_shard_does_not_depend_on_the_order_of_the_ops():
    ops = sorted(catalogue.all_ops())
    shuffled = list(ops)
    random.Random(7).shuffle(shuffled)
    assert shuffled != ops
    for k in range(1, 5):
        assert set(catalogue.shard(shuffled, k, 4)) == set(catalogue.shard(ops, k, 4))


def test_adding_an_op_moves_no_other_op():
    ops = sorted(catalogue.all_ops())
    before = {k: set(catalogue.shard(ops, k, 4)) for k in range(1, 5)}
    after = {k: set(catalogue.shard([*ops, "brand_new_op"], k, 4)) - {"brand_new_op"} for k in range(1, 5)}
    assert before == after


@pytest.mark.parametrize("index, count", [(0, 2), (3, 2), (-1, 4), (1, 0)])
def test_shard_rejects_k_outside_1_to_n(index, count):
    with pytest.raises(ValueError, match=f"--shard={index}/{count}"):
        catalogue.shard(["add"], index, count)


def test_shard_is_the_same_under_another_hash_seed():
    ops = sorted(catalogue.all_ops())
    here = {k: catalogue.shard(ops, k, 5) for k in range(1, 6)}
    script = ("import json, sys\nfrom mpsfuzz.generation import catalogue\n"
              "ops = json.loads(sys.stdin.read())\n"
              "print(json.dumps({k: catalogue.shard(ops, k, 5) for k in range(1, 6)}))\n")
    for seed in ("0", "12345"):
        # str hashes differ between seeds: a split by hash() would differ too
        proc = subprocess.run([sys.executable, "-c", script], input=json.dumps(ops), text=True,
                              capture_output=True, env=_env(PYTHONHASHSEED=seed), timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert {int(k): v for k, v in json.loads(proc.stdout).items()} == here, f"PYTHONHASHSEED={seed}"


# -- the command line -----------------------------------------------------------------------

def _mpsfuzz(args, cwd: Path, **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mpsfuzz", *map(str, args)], cwd=cwd, env=_env(**env),
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


BAD_SHARDS = {  # --shard value -> what the error line must say
    "0/2": "--shard=0/2",
    "3/2": "--shard=3/2",
    "x": "--shard='x'",
    "1/": "--shard='1/'",
    "1/0": "--shard=1/0",
}


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory) -> dict:
    """The usage errors, started together (each a separate `python -m mpsfuzz`): a bad
    K/N stops at argument parsing, before torch; an empty shard once the ops are
    selected, before any campaign."""
    work = tmp_path_factory.mktemp("shard-cli")
    started = {}
    for value in BAD_SHARDS:
        cwd = Path(tempfile.mkdtemp(prefix="bad-", dir=work))
        started[value] = (cwd, _mpsfuzz(["run", "--ops", "add", "--max-cases", 1, "--shard", value], cwd))
    cwd = Path(tempfile.mkdtemp(prefix="empty-", dir=work))
    empty = next(k for k in range(1, 51) if not catalogue.shard(CAMPAIGN_OPS, k, 50))
    started["empty"] = (cwd, _mpsfuzz(["run", "--ops", ",".join(CAMPAIGN_OPS), "--target", FAULT_TARGET,
                                       "--max-cases", 1, "--shard", f"{empty}/50"], cwd, MPSFUZZ_FAULTS="none"))
    results: dict = {"empty-shard": empty}
    for name, (cwd, proc) in started.items():
        out, err = proc.communicate(timeout=300)
        results[name] = (cwd, proc.returncode, out, err)
    return results


@pytest.fixture(scope="module")
def shard_campaigns(tmp_path_factory) -> dict:
    """The campaigns of shards 1/2 and 2/2 of CAMPAIGN_OPS, started together."""
    work = tmp_path_factory.mktemp("shard-campaigns")
    started = {}
    for k in (1, 2):
        cwd = Path(tempfile.mkdtemp(prefix=f"shard{k}-", dir=work))
        started[f"campaign-{k}"] = (cwd, _mpsfuzz(
            ["run", "--ops", ",".join(CAMPAIGN_OPS), "--target", FAULT_TARGET, "--shard", f"{k}/2",
             "--max-cases", 24, "--slice", 2, "--seed", 1, "--timeout", 10, "--corpus", cwd / "corpus",
             "--no-progress"], cwd, MPSFUZZ_FAULTS="none"))
    results = {}
    for name, (cwd, proc) in started.items():
        out, err = proc.communicate(timeout=300)
        results[name] = (cwd, proc.returncode, out, err)
    return results


def _one_line_usage_error(result, expected: str) -> None:
    cwd, code, out, err = result
    assert code == 2, (out, err)
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("mpsfuzz: error:") and expected in lines[0], err
    assert not (cwd / "mpsfuzz-internal-error.log").exists()
    assert not (cwd / "mpsfuzz-corpus").exists()


@pytest.mark.parametrize("value", BAD_SHARDS)
def test_cli_rejects_a_bad_shard_in_one_line(cli_runs, value):
    _one_line_usage_error(cli_runs[value], BAD_SHARDS[value])


def test_cli_says_when_a_shard_has_no_ops(cli_runs):
    k = cli_runs["empty-shard"]
    _one_line_usage_error(cli_runs["empty"], f"--shard={k}/50: no ops in this shard of the {len(CAMPAIGN_OPS)} selected")


def _run_log(corpus: Path) -> dict:
    logs = sorted((corpus / "runs").glob("*.json"))
    assert len(logs) == 1, logs
    return json.loads(logs[0].read_text())


@pytest.mark.slow
def test_two_shards_run_disjoint_ops_that_cover_the_selection(shard_campaigns):
    expected = {k: catalogue.shard(CAMPAIGN_OPS, k, 2) for k in (1, 2)}
    assert expected[1] and expected[2], "CAMPAIGN_OPS must give both halves some ops"
    ran = {}
    for k in (1, 2):
        cwd, code, out, err = shard_campaigns[f"campaign-{k}"]
        assert code == 0, out + err
        assert f"shard {k}/2: {len(expected[k])} of {len(CAMPAIGN_OPS)} ops" in out, out
        log = _run_log(cwd / "corpus")
        assert log["ops"] == expected[k]                      # what the campaign was given ...
        ran[k] = set(log["per_op"])
        assert ran[k] and ran[k] <= set(expected[k]), log["per_op"]   # ... and what it ran
    assert set(_run_log(shard_campaigns["campaign-1"][0] / "corpus")["ops"]).isdisjoint(
        _run_log(shard_campaigns["campaign-2"][0] / "corpus")["ops"])
    assert not ran[1] & ran[2]
    assert sorted(expected[1] + expected[2]) == sorted(CAMPAIGN_OPS)
