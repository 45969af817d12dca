"""A corpus as a regression suite: ``pytest --mpsfuzz-corpus DIR``.

Each finding becomes a test that replays it (in a fresh worker of its target, as
``mpsfuzz replay`` does) and passes once the bug is fixed, so Mac CI can watch known
bugs. ``--mpsfuzz-xfail`` reports a still-failing (or flaky) finding as xfail, so a CI
job can watch without going red; a fixed one then fails as XPASS(strict), telling you
to prune or update it.

Collection: the corpus folders and files become ordinary collection arguments (in
``pytest_configure``). With no test paths on the command line they replace the default
(``testpaths`` or the current folder), so ``pytest --mpsfuzz-corpus DIR`` runs the
corpus alone; with test paths they are added to them. ``pytest_collect_file`` turns
each finding file of a corpus folder (``*.json``, not hidden, not ``inflight-*``; not in
sub-folders such as ``pruned/``) or each finding file named directly into a
:class:`FindingFile` with one :class:`FindingItem` named after the file's stem, with
the op and the oracle as keywords (``-k triu``) and an ``mpsfuzz`` marker (``-m
mpsfuzz``). An unreadable file is one item that fails with a one-line message.

Without ``--mpsfuzz-corpus`` the plugin does nothing and imports nothing heavy (no
torch): every hook returns at once. Disable it altogether with ``-p no:mpsfuzz``.
"""
from __future__ import annotations

from pathlib import Path

import pytest

DEFAULT_TIMEOUT_S = 20.0
# Lines of the recorded failure message quoted in a failure report.
MESSAGE_LINES = 6


def pytest_addoption(parser):
    group = parser.getgroup("mpsfuzz", "mpsfuzz: replay a corpus of findings as tests")
    group.addoption("--mpsfuzz-corpus", action="append", default=[], metavar="DIR", dest="mpsfuzz_corpus",
                    help="run each finding in this corpus folder (or this finding file) as a test that "
                         "passes once the bug is fixed; repeatable")
    group.addoption("--mpsfuzz-target", default=None, metavar="SPEC", dest="mpsfuzz_target",
                    help="replay on this target (mps, cuda, module:attr...) instead of each finding's own")
    group.addoption("--mpsfuzz-timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                    dest="mpsfuzz_timeout", help=f"seconds per run of a finding (default {DEFAULT_TIMEOUT_S:g})")
    group.addoption("--mpsfuzz-xfail", action="store_true", dest="mpsfuzz_xfail",
                    help="report a finding that still fails (or is flaky) as xfail; a fixed one then "
                         "fails as XPASS(strict)")
    group.addoption("--mpsfuzz-record", action="store_true", dest="mpsfuzz_record",
                    help="append each result to the finding's replay history")


# -- session state -------------------------------------------------------------------------

class _Session:
    """The corpus roots of this run and one worker pool per target spec, created when
    the first finding of that target runs (replay_one still gives each finding a fresh
    worker) and closed when pytest unconfigures."""

    def __init__(self, sources: list[Path], timeout_s: float):
        self.dirs = {p for p in sources if p.is_dir()}
        self.files = {p for p in sources if not p.is_dir()}
        self.timeout_s = timeout_s
        self.pools: dict = {}   # spec -> WorkerPool, or the one-line reason it cannot start

    def wants(self, path: Path) -> bool:
        path = path.resolve()
        if path in self.files:
            return True
        return (path.parent in self.dirs and path.suffix == ".json"
                and not path.name.startswith((".", "inflight")))

    def pool(self, spec: str):
        if spec not in self.pools:
            from .execution.targets import TargetError
            from .execution.worker import WorkerPool, WorkerStartError
            from .oracles.judge import judge_case
            try:
                self.pools[spec] = WorkerPool(spec, timeout_s=self.timeout_s, execute=judge_case)
            except (TargetError, WorkerStartError) as exc:
                self.pools[spec] = _first_line(exc) or type(exc).__name__
        return self.pools[spec]

    def close(self) -> None:
        pools, self.pools = self.pools, {}
        for pool in pools.values():
            if not isinstance(pool, str):
                pool.close()


_STATE = pytest.StashKey[_Session]()


def _state(config) -> _Session | None:
    return config.stash.get(_STATE, None)


def _first_line(x) -> str:
    lines = str(x).strip().splitlines()
    return lines[0] if lines else ""


def pytest_configure(config):
    sources = config.getoption("mpsfuzz_corpus", default=None)
    if not sources:
        return
    missing = [s for s in sources if not Path(s).exists()]
    if missing:
        raise pytest.UsageError(f"--mpsfuzz-corpus: no such file or folder: {', '.join(missing)}")
    timeout = config.getoption("mpsfuzz_timeout")
    if not timeout or timeout <= 0:
        raise pytest.UsageError(f"--mpsfuzz-timeout={timeout:g}: must be > 0")
    config.addinivalue_line("markers", "mpsfuzz(op, oracle, signature): a finding of an mpsfuzz corpus")
    roots = list(dict.fromkeys(Path(s).resolve() for s in sources))
    state = _Session(roots, timeout)
    config.stash[_STATE] = state
    config.add_cleanup(state.close)
    # The corpus paths become collection arguments: alone when the command line names no
    # test paths (so testpaths / the current folder are not collected), else added.
    corpus_args = [str(p) for p in roots]
    if config.getoption("file_or_dir", default=None):
        config.args = list(config.args) + [a for a in corpus_args if a not in config.args]
    else:
        config.args = corpus_args
        if hasattr(config, "args_source"):   # pytest >= 7.2: the header then says no testpaths
            config.args_source = pytest.Config.ArgsSource.ARGS


def pytest_collect_file(file_path, parent):
    state = _state(parent.config)
    if state is None or not state.wants(Path(file_path)):
        return None
    return FindingFile.from_parent(parent, path=Path(file_path))


# -- collection ----------------------------------------------------------------------------

class FindingFile(pytest.File):
    """One finding file: one item (a readable finding, or the reason it is not)."""

    def collect(self):
        try:
            import json
            from .corpus.finding import Finding
            finding, problem = Finding.from_json(json.loads(self.path.read_text())), ""
        except Exception as exc:   # never break collection: the item says what is wrong
            finding, problem = None, _first_line(exc) or type(exc).__name__
        yield FindingItem.from_parent(self, name=self.path.stem, finding=finding, problem=problem)


class FindingItem(pytest.Item):
    def __init__(self, *, finding=None, problem: str = "", **kwargs):
        super().__init__(**kwargs)
        self.finding, self.problem = finding, problem
        if finding is not None:
            self.add_marker(pytest.mark.mpsfuzz(op=finding.op, oracle=finding.oracle,
                                                signature=finding.signature))
            for word in (finding.op, finding.oracle):
                self.keywords[word] = True
            self.user_properties += [("mpsfuzz_op", finding.op), ("mpsfuzz_oracle", finding.oracle),
                                     ("mpsfuzz_signature", finding.signature)]

    def runtest(self):
        if self.finding is None:
            pytest.fail(f"unreadable finding {self.path}: {self.problem}", pytrace=False)
        from .corpus.finding import CANNOT_RUN
        from .corpus.replay import replay_one
        config, state = self.config, _state(self.config)
        spec = config.getoption("mpsfuzz_target") or self.finding.target_spec
        pool = state.pool(spec)
        if isinstance(pool, str):
            result, detail, device = CANNOT_RUN, pool, ""
        else:
            result, detail = replay_one(pool, self.finding, timeout_s=state.timeout_s)
            device = pool.device
        self.user_properties.append(("mpsfuzz_result", result))
        if config.getoption("mpsfuzz_record"):
            from .corpus.store import Corpus
            Corpus(self.path.parent).update(self.path, lambda f: f.record_replay(
                result, target=spec, device=device, detail=detail))
        outcome, message = verdict(self.finding, result, detail, self.path, xfail=config.getoption("mpsfuzz_xfail"))
        if outcome == "skip":
            _skip_here(message)
        if outcome == "xfail":
            pytest.xfail(message)
        if outcome == "fail":
            pytest.fail(message, pytrace=False)

    def repr_failure(self, excinfo, style=None):
        # Outcomes come as pytest.fail(..., pytrace=False): the message alone. Anything
        # else is an internal error of mpsfuzz: a short traceback.
        return super().repr_failure(excinfo, style if isinstance(excinfo.value, pytest.fail.Exception) else "short")

    def reportinfo(self):
        return self.path, 0, f"mpsfuzz finding {self.name}"


def _skip_here(reason: str):
    """Skip, reported at the finding's file rather than at this plugin's line."""
    try:
        exc = pytest.skip.Exception(reason, _use_item_location=True)
    except TypeError:   # a pytest without the keyword
        exc = pytest.skip.Exception(reason)
    raise exc


def verdict(finding, result: str, detail: str, path, *, xfail: bool = False) -> tuple[str, str]:
    """(outcome, message) of one replay: outcome is "pass", "fail", "xfail" or "skip".
    Failure messages say what fails, why (the one-line explanation), the first lines of
    the recorded message and the finding's path; xfail and skip reasons are one line."""
    from .corpus.finding import CANNOT_RUN, CHANGED, FIXED, FLAKY, STILL_FAILS
    if result == CANNOT_RUN:
        return "skip", f"cannot run here: {detail}"
    if result == FIXED:
        if xfail:
            return "fail", (f"XPASS(strict): fixed now: {finding.title}\n"
                            f"prune or update the finding (or replay it with --mpsfuzz-record, then "
                            f"`mpsfuzz corpus prune DIR --fixed-for 1`): {path}")
        return "pass", ""
    why = finding.explanation_text
    if result == STILL_FAILS:
        head = f"still fails: {finding.title}" + (" (regression: replayed as fixed before)" if finding.fixed else "")
    elif result == FLAKY:
        head = f"flaky: {finding.title} ({detail})"
    elif result == CHANGED:
        now = detail[len("now: "):] if detail.startswith("now: ") else detail
        head = f"fails differently now: {now} (recorded: {finding.title})"
    else:
        head = f"{result}: {finding.title} {detail}".strip()
    if xfail and result in (STILL_FAILS, FLAKY):
        return "xfail", head + (f"; {why}" if why else "")
    lines = [head]
    if why:
        lines.append(f"why: {why}")
    message = [line for line in finding.failure.message.strip().splitlines() if line.strip()]
    if message:
        lines.append("recorded message:")
        lines += ["    " + line for line in message[:MESSAGE_LINES]]
        if len(message) > MESSAGE_LINES:
            lines.append("    ...")
    lines.append(f"finding: {path}")
    return "fail", "\n".join(lines)
