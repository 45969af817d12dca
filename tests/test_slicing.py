"""A time budget covers its selection (issue 37, point 4): slices sized from the budget
left, the ops still to have their turn and the measured case rate; the ops a run never
tried are named in its summary and run record."""
from __future__ import annotations

import io
import json
import subprocess
import sys
import time

import pytest
from rich.console import Console

from mpsfuzz.campaign.engine import overrun_s
from mpsfuzz.campaign.slicing import MOST, PLAN_SHARE, SliceSizer
from mpsfuzz.events import CampaignFinished, CampaignStarted, Stats, untried_ops
from mpsfuzz.generation import catalogue
from mpsfuzz.reports.console import ConsoleReporter
from mpsfuzz.reports.run_log import run_record


def test_a_fixed_slice_is_that_size_and_no_budget_gets_the_most():
    assert SliceSizer(fixed=7, budget_s=90).cases(ops_left_in_round=68, seconds_left=80, cases_per_s=1.0) == 7
    assert SliceSizer(budget_s=None).cases(ops_left_in_round=68, seconds_left=0, cases_per_s=None) == MOST
    assert not SliceSizer(fixed=7, budget_s=90).adaptive and SliceSizer(budget_s=90).adaptive


def test_a_budgeted_slice_spreads_the_time_left_over_the_ops_still_to_have_their_turn():
    sizer = SliceSizer(budget_s=90)
    assert sizer.cases(ops_left_in_round=68, seconds_left=80, cases_per_s=None) == 1   # no rate yet
    assert sizer.cases(ops_left_in_round=68, seconds_left=80, cases_per_s=1.0) == 1    # a compiled target
    assert sizer.cases(ops_left_in_round=10, seconds_left=80, cases_per_s=1.0) == int(PLAN_SHARE * 80 / 10)
    assert sizer.cases(ops_left_in_round=68, seconds_left=600, cases_per_s=130.0) == MOST   # a fast one
    assert sizer.cases(ops_left_in_round=5, seconds_left=0, cases_per_s=100.0) == 1


@pytest.mark.parametrize("bad", [{"fixed": 0}, {"most": 0}])
def test_a_slice_of_no_case_is_refused_with_the_argument_named(bad):
    with pytest.raises(ValueError, match=f"{next(iter(bad))}=0"):
        SliceSizer(**bad)


def test_the_summary_and_the_run_record_name_the_ops_never_tried():
    ops = ("linalg.inv", "linalg.det", "mm", "addmm")
    stats = Stats(per_op={"linalg.inv": [3, 3], "mm": [0, 0]}, set_aside={"addmm": "8 harness errors in a row"})
    assert untried_ops(ops, stats) == ["linalg.det", "mm"]
    started = CampaignStarted("t", "t", "cpu", ops, ("values",), 1, 90.0, None)
    finished = CampaignFinished(stats, (), "budget")
    assert run_record(started, finished, started_at=0, finished_at=1)["untried_ops"] == ["linalg.det", "mm"]
    out = io.StringIO()
    reporter = ConsoleReporter(Console(file=out, width=200), live=False)
    reporter(started)
    reporter(finished)
    assert "2 of 4 op(s) never tried" in out.getvalue() and "linalg.det, mm" in out.getvalue()


@pytest.mark.slow
def test_a_budgeted_run_on_a_slow_target_tries_nearly_every_op_of_its_family(tmp_path):
    """At a few cases a second (a compiled target's pace), a 40 s run over the 68 linalg
    ops tries at least 90% of them, and ends within its budget; with 30 cases a slice it
    reached the first few only."""
    corpus = tmp_path / "corpus"
    budget = 40
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mpsfuzz", "run", "--ops", "linalg", "--budget", f"{budget}s",
                           "--seed", "1", "--corpus", str(corpus), "--target", "mpsfuzz.testing.slow:target",
                           "--no-progress", "--no-verify-repros"], capture_output=True, text=True, timeout=300)
    took = time.monotonic() - started
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    record = json.loads(next((corpus / "runs").glob("*.json")).read_text())
    linalg = catalogue.select("linalg")
    assert len(record["ops"]) == len(linalg)
    assert len(record["untried_ops"]) <= 0.1 * len(linalg), (record["untried_ops"], out[-3000:])
    assert took <= budget + overrun_s(budget), f"took {took:.0f}s: {out[-3000:]}"
