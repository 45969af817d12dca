"""A Ctrl-C is never lost: Python drops a KeyboardInterrupt raised inside a __del__ or a
gc callback (Hypothesis registers one), and `mpsfuzz run --budget 200s` interrupted there
fuzzed on for its whole budget. The latch remembers the signal; the campaign stops."""
from __future__ import annotations

import signal

import pytest

from mpsfuzz.campaign.engine import Campaign, CampaignConfig
from mpsfuzz.campaign.interrupts import InterruptLatch
from mpsfuzz.events import CaseFinished

FAULT_TARGET = "mpsfuzz.testing.faults:target"
# Python reports each dropped KeyboardInterrupt as "unraisable": that is the point here.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


class _SwallowsOnCollection:
    """Raises SIGINT while it is being collected: its KeyboardInterrupt is "ignored"."""

    def __del__(self):
        signal.raise_signal(signal.SIGINT)


def _swallowed_ctrl_c() -> None:
    _SwallowsOnCollection()   # collected at once, inside __del__


def test_the_latch_keeps_a_dropped_ctrl_c_until_checked():
    with InterruptLatch() as latch:
        _swallowed_ctrl_c()
        assert latch.pending
        with pytest.raises(KeyboardInterrupt):
            latch.check()
        assert not latch.pending
        latch.check()   # raised once: nothing pending
        with pytest.raises(KeyboardInterrupt):   # a Ctrl-C raised as usual still raises
            signal.raise_signal(signal.SIGINT)
        latch.acknowledge()
        assert not latch.pending
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_latch_leaves_a_handler_of_its_own_alone():
    # the daemon turns SIGINT into a graceful stop: the latch must not take it over
    seen = []
    previous = signal.signal(signal.SIGINT, lambda *_: seen.append(1))
    try:
        with InterruptLatch() as latch:
            signal.raise_signal(signal.SIGINT)
            assert seen == [1] and not latch.pending
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_campaign_stops_on_a_ctrl_c_python_dropped(tmp_path):
    class DropCtrlCOnce:
        def __init__(self):
            self.cases = 0

        def __call__(self, event):
            if isinstance(event, CaseFinished):
                self.cases += 1
                if self.cases == 5:
                    _swallowed_ctrl_c()

    config = CampaignConfig(ops=["sigmoid", "neg"], target_spec=FAULT_TARGET, corpus_dir=tmp_path,
                            max_cases=3000, seed=1)
    listener = DropCtrlCOnce()
    result = Campaign(config, [listener]).run()
    assert result.stopped_because == "interrupted"
    assert listener.cases < 500, f"ran {listener.cases} cases after the Ctrl-C"
