"""A corpus as a regression suite: ``pytest --mpsfuzz-corpus DIR``.

Each finding becomes a test that replays it (in a fresh worker of its target, as
``mpsfuzz replay`` does) and passes once the bug is fixed, so Mac CI can watch known
bugs. ``--mpsfuzz-xfail`` reports a still-failing finding as xfail (a CI job that
watches without going red; a fixed one then fails as XPASS(strict), telling you to
prune it). Without ``--mpsfuzz-corpus`` the plugin does nothing (and imports no torch).
"""
from __future__ import annotations

from pathlib import Path

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("mpsfuzz", "mpsfuzz corpus replay")
    group.addoption("--mpsfuzz-corpus", action="append", default=[], metavar="DIR",
                    help="run each finding in this corpus folder (or finding file) as a test; repeatable")
    group.addoption("--mpsfuzz-target", default=None, metavar="SPEC",
                    help="replay on this target instead of each finding's own")
    group.addoption("--mpsfuzz-timeout", type=float, default=20.0, metavar="S", help="per-run timeout")
    group.addoption("--mpsfuzz-xfail", action="store_true",
                    help="a finding that still fails is xfail, a fixed one XPASS(strict)")
    group.addoption("--mpsfuzz-record", action="store_true",
                    help="append each result to the finding's replay history")


class FindingFailed(Exception):
    """The bug is still there (or fails differently, or is flaky)."""


class _Pools:
    """One worker pool per target spec for the session (each finding still gets a
    fresh worker)."""

    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self.pools: dict = {}

    def get(self, spec: str):
        if spec not in self.pools:
            from .fuzzer.worker import WorkerPool, WorkerStartError
            from .targets import TargetError
            try:
                self.pools[spec] = WorkerPool(spec, timeout_s=self.timeout_s)
            except (TargetError, WorkerStartError) as exc:
                self.pools[spec] = str(exc).splitlines()[0]
        return self.pools[spec]

    def close(self) -> None:
        for pool in self.pools.values():
            if not isinstance(pool, str):
                pool.close()


class FindingItem(pytest.Item):
    def __init__(self, *, finding=None, problem: str = "", **kwargs):
        super().__init__(**kwargs)
        self.finding, self.problem = finding, problem
        if finding is not None:
            self.add_marker(pytest.mark.mpsfuzz)
            self.keywords[finding.op] = True
            self.keywords[finding.oracle] = True

    def runtest(self):
        if self.finding is None:
            raise FindingFailed(f"unreadable finding {self.path}: {self.problem}")
        from .corpus.finding import CANNOT_RUN, FIXED, FLAKY, STILL_FAILS
        from .corpus.replay import replay_one
        config = self.config
        spec = config.getoption("mpsfuzz_target") or self.finding.target_spec
        pool = config._mpsfuzz_pools.get(spec)
        if isinstance(pool, str):
            pytest.skip(f"cannot run here: {pool}")
        result, detail = replay_one(pool, self.finding, timeout_s=config.getoption("mpsfuzz_timeout"))
        if config.getoption("mpsfuzz_record"):
            from .corpus.store import Corpus
            Corpus(self.path.parent).update(self.path, lambda f: f.record_replay(
                result, target=spec, device=pool.device, detail=detail))
        if result == CANNOT_RUN:
            pytest.skip(f"cannot run here: {detail}")
        xfail = config.getoption("mpsfuzz_xfail")
        if result == FIXED:
            if xfail:
                pytest.fail(f"XPASS(strict): {self.finding.title} is fixed now: prune or update {self.path}",
                            pytrace=False)
            return
        f = self.finding
        words = {STILL_FAILS: "still fails", FLAKY: "flaky"}.get(result, "fails differently now")
        message = "\n".join([f"{words}: {f.title}", f"why: {f.explanation_text or '-'}", f"detail: {detail}",
                             *f.failure.message.strip().splitlines()[:6], f"finding: {self.path}"])
        if xfail:
            pytest.xfail(message)
        raise FindingFailed(message)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, FindingFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, f"mpsfuzz finding {self.name}"


class CorpusCollector(pytest.Collector):
    def __init__(self, *, sources, **kwargs):
        super().__init__(**kwargs)
        self.sources = sources

    def collect(self):
        from .corpus.store import load_findings
        found, problems = load_findings(self.sources)
        for path, finding in found:
            yield FindingItem.from_parent(self, name=path.stem, path=path, finding=finding)
        for path, why in problems:
            yield FindingItem.from_parent(self, name=Path(path).name, path=Path(path), problem=why)


def pytest_configure(config):
    config.addinivalue_line("markers", "mpsfuzz: a replayed mpsfuzz finding")
    sources = config.getoption("mpsfuzz_corpus", default=[])
    if not sources:
        return
    missing = [s for s in sources if not Path(s).exists()]
    if missing:
        raise pytest.UsageError(f"--mpsfuzz-corpus: no such file or folder: {', '.join(missing)}")
    config._mpsfuzz_pools = _Pools(config.getoption("mpsfuzz_timeout"))
    config.add_cleanup(config._mpsfuzz_pools.close)


def pytest_collection_modifyitems(session, config, items):
    sources = config.getoption("mpsfuzz_corpus", default=[])
    if not sources:
        return
    collector = CorpusCollector.from_parent(session, name="mpsfuzz-corpus", sources=[Path(s) for s in sources],
                                            path=Path(sources[0]).resolve())
    new = list(collector.collect())
    keyword = config.getoption("keyword")
    if keyword:
        from _pytest.mark import KeywordMatcher
        from _pytest.mark.expression import Expression
        expression = Expression.compile(keyword)
        new = [item for item in new if expression.evaluate(KeywordMatcher.from_item(item))]
    items.extend(new)
