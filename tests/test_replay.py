"""The desk's replay on its own (campaign/replay.py, issue 39): a slice replayed with its
batch's verdicts runs none of the batch's cases again, shrinks the one failure its job
names (its own placeholder does not hold it), hands the other new failures it meets
over as jobs of their own, stops where the budget says and keeps what it shrank; a
shrink stops before one more case would pass --shrink-budget (a hang's a whole timeout,
a pressed desk's a share). Cases are judged by a function, not a worker."""
from __future__ import annotations

import time

from mpsfuzz.campaign.batches import Slice
from mpsfuzz.campaign.drafts import Limits, draw_slice
from mpsfuzz.campaign.finding_errors import error_type
from mpsfuzz.campaign.known_findings import NEW, KnownFindings
from mpsfuzz.campaign.layout_notes import LayoutNotes
from mpsfuzz.campaign.replay import SliceReplay
from mpsfuzz.campaign.slice_state import SliceState
from mpsfuzz.campaign.verdicts import CaseVerdicts
from mpsfuzz.corpus.store import Corpus
from mpsfuzz.events import Stats
from mpsfuzz.oracles import Failure

WRONG = Failure("values", "wrong-values", "wrong", "detail", "high", ("wrong-values",))
RAISES = Failure("errors", "dut-raises", "raises", "RuntimeError: x", "high", ("dut-raises", "RuntimeError"))
LIMITS = Limits(max_rank=2, max_side=6, max_numel=36, allow_variants=False, examples=20)


class Pool:
    device = "cpu"


def failures(case) -> list[Failure]:
    """neg is wrong on 2+ elements, and raises too on 5+ (listed first: met before the
    wrong values raise)."""
    numel = case.inputs[0].numel
    return ([RAISES] if numel >= 5 else []) + ([WRONG] if numel >= 2 else [])


class Desk:
    """The campaign's side of a replay: what it is told and asked."""

    def __init__(self, tmp_path, stop_reason=lambda: None, shrink_budget_s=30.0, timeout_s=3.0):
        self.stats, self.state, self.known = Stats(), SliceState(), KnownFindings()
        self.ran, self.handed, self.errors = [], [], []
        self.verdicts = CaseVerdicts(self.known, self.state, self.stats, LayoutNotes(Corpus(tmp_path)), [],
                                     torch_version="2.6.0", emit=lambda event: None,
                                     harness_error=lambda *a, **k: self.errors.append(a),
                                     case_outcome=lambda op, ok: None, on_desk=lambda: True)
        self.replay = SliceReplay(self.verdicts, self.state, self.stats, shrink_budget_s=shrink_budget_s,
                                  timeout_s=timeout_s, failures_of=self.failures_of, stop_reason=stop_reason,
                                  generation_failed=lambda op, failed: None,
                                  harness_error=lambda *a, **k: self.errors.append(a),
                                  case_outcome=lambda *a: None, hand_over=self.handed.append)

    def failures_of(self, case, pool):
        self.ran.append(case)
        return failures(case)

    def job(self):
        """The batch judged as the campaign judges it, and the job of its first wrong
        values: (its error, with what the replay needs, its placeholder, the batch)."""
        draft = draw_slice("neg", 0, 7, LIMITS)
        prepared = Slice("neg", draft.seed, list(draft.cases), draft.seconds, LIMITS)
        memo = {case: [(NEW, failure, f"sig-{failure.kind}") for failure in failures(case)] for case in prepared.cases}
        first = next(case for case in prepared.cases if WRONG in failures(case))
        err = error_type("neg", "values", "wrong-values")(first, WRONG, "sig")
        err.to_shrink = (prepared, memo)
        return err, self.known.open_holder(first, WRONG), prepared


def test_a_replay_shrinks_its_failure_without_running_the_batch_again_and_hands_the_others_over(tmp_path):
    desk = Desk(tmp_path)
    err, holder, prepared = desk.job()
    assert any(case.inputs[0].numel > 2 for case in prepared.cases if WRONG in failures(case))
    smallest, flaky = desk.replay.shrunk(err, holder, Pool())
    assert smallest is not err and smallest.case.inputs[0].numel == 2 and not flaky
    assert (smallest.failure, smallest.__traceback__) == (WRONG, None)
    assert desk.ran and not set(desk.ran) & set(prepared.cases)      # the batch's verdicts recalled
    assert [list(met) for met in desk.handed] == [[("neg", "errors", "dut-raises")]]
    assert err.to_shrink is None and desk.state.only is None and not desk.state.replaying and not desk.errors


def test_past_the_budget_a_replay_runs_nothing_and_what_it_found_stands(tmp_path):
    desk = Desk(tmp_path, stop_reason=lambda: "budget")
    err, holder, prepared = desk.job()
    smallest, _ = desk.replay.shrunk(err, holder, Pool())
    assert desk.ran == [] and smallest.case in prepared.cases and WRONG in failures(smallest.case)


def test_a_shrink_stops_before_one_more_case_would_pass_its_budget(tmp_path):
    replay, state = (desk := Desk(tmp_path, shrink_budget_s=10, timeout_s=3)).replay, desk.state
    state.shrink_started = {("prod", "hang", "timeout"): time.monotonic() - 8}
    assert replay.shrink_budget_spent()                  # a hang costs a whole timeout more
    state.shrink_started = {("prod", "values", "wrong-values"): time.monotonic() - 8}
    assert not replay.shrink_budget_spent()
    state.shrink_started = {("prod", "values", "wrong-values"): time.monotonic() - 3}
    state.pressed = True                                 # first-rank failures wait: a quarter of it
    assert replay.shrink_budget_spent()
