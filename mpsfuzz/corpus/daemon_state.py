"""The daemon's state file, ``<corpus>/daemon/state.json``: what an unattended daemon has
done across restarts (uptime, cases, findings per family, the scheduler's statistics,
the behaviours seen), plus its liveness (pid, heartbeat, status).

It lives in the corpus layer, not with the daemon (campaign/), because `mpsfuzz status`
(reports/) reads it and `mpsfuzz corpus merge` merges it: the file format is the
corpus's, the daemon only fills it in.

Written atomically (atomic.py: temp file, fsync, rename), so a daemon killed mid-write
leaves the previous state. A corrupt or unreadable file is never fatal to the daemon:
:func:`load_state` moves it aside to ``state.json.corrupt-<timestamp>`` and starts afresh
with a one-line warning (``state.load_warning``); :func:`read_state` (for readers such as
`mpsfuzz status`, which must not move the daemon's files) raises :class:`StateError`.

Merging shards (:func:`merge_states`) is idempotent, like finding sightings: every state
has an ``id`` and keeps, in ``shards``, the counters each other state contributed to it
when merged in; merging the same shard again replaces its earlier contribution instead
of adding it twice.
"""
from __future__ import annotations

import calendar
import errno
import hashlib
import json
import os
import socket
import time
import uuid
from dataclasses import dataclass, field, fields
from pathlib import Path

from ..atomic import CorpusWriteError, atomic_write_json, corpus_write

DAEMON_DIR = "daemon"           # <corpus>/daemon/: everything the daemon writes besides findings
STATE_FILE = "state.json"
EVENTS_FILE = "events.jsonl"    # campaign/events_log.py writes it, reports/status.py reads its tail
LOGS_DIR = "logs"               # <corpus>/daemon/logs/: worker and daemon logs (deletable under a disk cap)

STATE_VERSION = 1
STATUSES = ("running", "stopped", "killed")
LAST_FINDINGS = 20              # findings kept in ``last_findings``
MAX_BEHAVIOURS = 200_000        # behaviour hashes kept (16 hex digits each: ~4 MB of JSON at the cap)

# Counters that add up when shards merge (and that a shard's contribution records).
COUNTERS = ("runs", "uptime_s", "cases", "findings_new", "restarts", "harness_errors")
# Per-op scheduler counters that add up (campaign/scheduler.py's JSON ``ops``); its
# smoothed statistics do not add up and are rebuilt from these by the scheduler.
SCHEDULER_COUNTERS = ("cases", "seconds", "findings", "behaviours")


class StateError(Exception):
    """The state file exists but cannot be read as a daemon state (one line)."""


def daemon_dir(corpus_dir) -> Path:
    return Path(corpus_dir) / DAEMON_DIR


def state_path(corpus_dir) -> Path:
    return daemon_dir(corpus_dir) / STATE_FILE


def events_path(corpus_dir) -> Path:
    return daemon_dir(corpus_dir) / EVENTS_FILE


def now_iso(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if t is None else t))


def parse_iso(text: str | None) -> float | None:
    """Seconds since the epoch of a ``now_iso`` string; None for None or a bad string."""
    if not text:
        return None
    try:
        return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))
    except (TypeError, ValueError):
        return None


def behaviour_hash(key) -> str:
    """The first 16 hex digits of sha1(repr(key)): how a behaviour key is kept on disk."""
    return hashlib.sha1(repr(key).encode()).hexdigest()[:16]


def new_state_id() -> str:
    return f"{socket.gethostname()}-{uuid.uuid4().hex[:12]}"


@dataclass
class DaemonState:
    """One corpus's daemon state. Counters only grow; ``status``, ``pid`` and
    ``heartbeat_at`` say whether a daemon runs now (see :func:`liveness`)."""

    id: str = field(default_factory=new_state_id)
    version: int = STATE_VERSION
    started_at: str | None = None         # the first start (ISO, UTC)
    runs: int = 0                         # starts of the daemon
    uptime_s: float = 0.0                 # accumulated over every run
    cases: int = 0
    findings_new: int = 0
    per_family: dict = field(default_factory=dict)     # family -> {"cases": n, "findings": n}
    restarts: int = 0                     # worker restarts
    harness_errors: int = 0
    workers: int = 0                      # worker processes of the running daemon
    scheduler: dict | None = None         # campaign/scheduler.py's to_json()
    seen_behaviours: int = 0              # distinct behaviours seen (may exceed len(behaviours) past the cap)
    behaviours: set = field(default_factory=set)       # behaviour_hash()es, at most MAX_BEHAVIOURS (sorted on disk)
    torch_version_replayed: str | None = None          # the torch the corpus was last replayed on
    last_findings: list = field(default_factory=list)  # newest last: {signature, op, oracle, status, time}
    heartbeat_at: str | None = None
    pid: int | None = None
    host: str | None = None               # where ``pid`` runs (a pid means nothing elsewhere)
    status: str = "stopped"               # one of STATUSES
    # Merged-in shards: state id -> its counters when last merged (see merge_states).
    shards: dict = field(default_factory=dict)
    # Why the file on disk was not used (set by load_state, never saved).
    load_warning: str | None = field(default=None, compare=False)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status={self.status!r}: expected one of {', '.join(STATUSES)}")
        self.behaviours = set(self.behaviours)

    # -- the daemon's life ---------------------------------------------------------------
    def mark_started(self, *, workers: int = 0) -> None:
        """This process is the corpus's daemon now: one more run, pid, host, heartbeat."""
        now = now_iso()
        self.runs += 1
        self.started_at = self.started_at or now
        self.pid, self.host, self.status, self.heartbeat_at = os.getpid(), socket.gethostname(), "running", now
        self.workers = workers

    def mark_alive(self, *, uptime_s: float) -> None:
        """A heartbeat: ``uptime_s`` more seconds of running since the last one."""
        if not isinstance(uptime_s, (int, float)) or not uptime_s >= 0:
            raise ValueError(f"uptime_s={uptime_s!r}: expected a number >= 0")
        self.uptime_s += uptime_s
        self.heartbeat_at = now_iso()

    def mark_stopped(self, status: str = "stopped") -> None:
        """The daemon ends: ``stopped`` (asked to) or ``killed`` (a signal it caught)."""
        if status not in ("stopped", "killed"):
            raise ValueError(f"status={status!r}: expected 'stopped' or 'killed'")
        self.status, self.workers, self.heartbeat_at = status, 0, now_iso()

    # -- updating ----------------------------------------------------------------------
    def add_behaviour(self, key) -> bool:
        """Count ``key`` (campaign/behaviour.py's behaviour_of) if never seen; whether it
        is new. Past MAX_BEHAVIOURS hashes, new keys are counted but not kept (the file
        stays a few MB), so such a key counts again when it comes back."""
        h = behaviour_hash(key)
        if h in self.behaviours:
            return False
        self.seen_behaviours += 1
        if len(self.behaviours) < MAX_BEHAVIOURS:
            self.behaviours.add(h)
        return True

    def add_finding(self, *, signature: str, op: str, oracle: str, status: str, when: str | None = None) -> None:
        self.last_findings = (self.last_findings + [{"signature": signature, "op": op, "oracle": oracle,
                                                     "status": status, "time": when or now_iso()}])[-LAST_FINDINGS:]

    def add_family(self, family: str, *, cases: int = 0, findings: int = 0) -> None:
        row = self.per_family.setdefault(family, {"cases": 0, "findings": 0})
        row["cases"] = row.get("cases", 0) + cases
        row["findings"] = row.get("findings", 0) + findings

    # -- the file format ---------------------------------------------------------------
    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "load_warning"}
        out["behaviours"] = sorted(self.behaviours)
        return out

    @classmethod
    def from_json(cls, data) -> "DaemonState":
        if not isinstance(data, dict):
            raise StateError(f"expected a JSON object, got {type(data).__name__}")
        if data.get("version") != STATE_VERSION:
            raise StateError(f"version={data.get('version')!r}: this mpsfuzz reads version {STATE_VERSION}")
        for name, kind in FIELD_TYPES.items():
            if name in data and (not isinstance(data[name], kind) or isinstance(data[name], bool)):
                raise StateError(f"{name}={_short(data[name])}: expected {getattr(kind, '__name__', 'a number')}")
        if data.get("scheduler") is not None and not isinstance(data["scheduler"], dict):
            raise StateError(f"scheduler={_short(data['scheduler'])}: expected an object or null")
        known = {f.name for f in fields(cls)} - {"load_warning"}
        try:
            return cls(**{k: v for k, v in data.items() if k in known})
        except (TypeError, ValueError) as exc:
            raise StateError(str(exc)) from None


# The fields whose type a file must get right (others are free text or null).
FIELD_TYPES = {"runs": int, "uptime_s": (int, float), "cases": int, "findings_new": int, "restarts": int,
               "harness_errors": int, "workers": int, "seen_behaviours": int, "per_family": dict,
               "behaviours": list, "last_findings": list, "shards": dict}


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- reading and writing ---------------------------------------------------------------
def read_state(corpus_dir) -> DaemonState | None:
    """The state on disk, or None where there is none. Raises StateError (one line)
    where it cannot be read; moves nothing (for readers: `mpsfuzz status`)."""
    path = state_path(corpus_dir)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise StateError(f"{path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return DaemonState.from_json(json.loads(text))
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        raise StateError(f"{path}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    except StateError as exc:
        raise StateError(f"{path}: {exc}") from None


def load_state(corpus_dir) -> DaemonState:
    """The daemon's state, to go on from: a fresh one where there is none; where the
    file cannot be read, it is moved aside to ``state.json.corrupt-<timestamp>`` and a
    fresh state comes back with ``load_warning`` saying so (one line), never silently."""
    try:
        state = read_state(corpus_dir)
    except StateError as exc:
        path = state_path(corpus_dir)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        aside, n = path.with_name(f"{STATE_FILE}.corrupt-{stamp}"), 1
        while aside.exists():  # two bad files within a second: keep both
            aside, n = path.with_name(f"{STATE_FILE}.corrupt-{stamp}-{n}"), n + 1
        try:
            os.replace(path, aside)
            where = f"moved aside to {aside.name}"
        except OSError as move:
            where = f"could not move it aside ({move.strerror or move}): it will be overwritten"
        state = DaemonState()
        state.load_warning = f"daemon state unreadable, starting afresh: {exc} ({where})"
        return state
    return state if state is not None else DaemonState()


def save_state(corpus_dir, state: DaemonState) -> Path:
    """Write ``state`` atomically; CorpusWriteError where the corpus cannot be written
    (the previous file stays whole)."""
    path = state_path(corpus_dir)
    if path.parent.exists() and not path.parent.is_dir():
        raise CorpusWriteError(path.parent, "not a folder")
    with corpus_write(path):
        path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, state.to_json())
    return path


# -- liveness --------------------------------------------------------------------------
def pid_alive(pid: int | None) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    except OSError as exc:
        return exc.errno == errno.EPERM
    return True


def liveness(state: DaemonState) -> str:
    """``running``, ``stopped``, ``killed``, ``died`` (the file says running but its pid
    is not alive: the daemon ended without saying so) or ``elsewhere`` (it says running
    on another host, whose pids cannot be checked from here)."""
    if state.status != "running":
        return state.status
    if state.host and state.host != socket.gethostname():
        return "elsewhere"
    return "running" if pid_alive(state.pid) else "died"


# -- merging shards --------------------------------------------------------------------
def _counters(state: DaemonState) -> dict:
    """What ``state`` counts in total (its own work plus merged shards)."""
    ops = (state.scheduler or {}).get("ops", {}) if isinstance(state.scheduler, dict) else {}
    return {**{name: getattr(state, name) for name in COUNTERS},
            "per_family": {fam: {k: row.get(k, 0) for k in ("cases", "findings")}
                           for fam, row in state.per_family.items() if isinstance(row, dict)},
            "scheduler": {op: {k: row.get(k, 0) for k in SCHEDULER_COUNTERS}
                          for op, row in ops.items() if isinstance(row, dict)}}


def _combine(parts: list[dict], sign: int = 1) -> dict:
    """Sum (or, sign -1, subtract from the first) counter dicts, nested ones included."""
    out = json.loads(json.dumps(parts[0])) if parts else {}
    for part in parts[1:]:
        for name in COUNTERS:
            out[name] = out.get(name, 0) + sign * part.get(name, 0)
        for nested in ("per_family", "scheduler"):
            mine = out.setdefault(nested, {})
            for key, row in part.get(nested, {}).items():
                into = mine.setdefault(key, {})
                for k, v in row.items():
                    into[k] = into.get(k, 0) + sign * v
    return out


def _non_negative(counters: dict) -> dict:
    for name in COUNTERS:
        counters[name] = max(0, counters.get(name, 0))
    for nested in ("per_family", "scheduler"):
        for row in counters.get(nested, {}).values():
            for k in row:
                row[k] = max(0, row[k])
    return counters


def _contributions(state: DaemonState) -> dict[str, dict]:
    """state id -> counters: the state's own part (its total less its shards) and each
    shard it holds."""
    own = _non_negative(_combine([_counters(state), *state.shards.values()], sign=-1))
    return {**{sid: c for sid, c in state.shards.items() if isinstance(c, dict)}, state.id: own}


def merge_states(states) -> DaemonState:
    """One state for several shards (the first state's id, so that merging into a
    destination keeps the destination's identity): counters, per-family rows and the
    scheduler's per-op counters summed, behaviours united, the first start and the
    latest heartbeat and replay kept, the last findings interleaved by time.

    Idempotent: each state id counts once, with its latest counters (the larger uptime,
    then the more cases), so merging a shard again, or a destination that already
    holds it, does not count it twice. The result is not running (``stopped``): a
    merged state describes no one process."""
    states = list(states)
    if not states:
        raise ValueError("states=[]: nothing to merge")
    latest: dict[str, dict] = {}
    for state in states:
        for sid, counters in _contributions(state).items():
            have = latest.get(sid)
            if have is None or (counters.get("uptime_s", 0), counters.get("cases", 0)) > \
                    (have.get("uptime_s", 0), have.get("cases", 0)):
                latest[sid] = counters
    first = states[0]
    totals = _combine([{name: 0 for name in COUNTERS} | {"per_family": {}, "scheduler": {}}, *latest.values()])
    merged = DaemonState(id=first.id)
    for name in COUNTERS:
        setattr(merged, name, totals[name])
    merged.per_family = totals["per_family"]
    merged.scheduler = _merged_scheduler([s.scheduler for s in states], totals["scheduler"])
    merged.shards = {sid: c for sid, c in latest.items() if sid != first.id}
    hashes = set().union(*(s.behaviours for s in states))
    overflow = sum(max(0, s.seen_behaviours - len(s.behaviours)) for s in states)
    merged.behaviours = set(sorted(hashes)[:MAX_BEHAVIOURS])
    merged.seen_behaviours = max(len(hashes) + overflow, *(s.seen_behaviours for s in states))
    starts = [s.started_at for s in states if s.started_at]
    merged.started_at = min(starts) if starts else None
    beats = [s.heartbeat_at for s in states if s.heartbeat_at]
    merged.heartbeat_at = max(beats) if beats else None
    replayed = [s for s in states if s.torch_version_replayed]
    merged.torch_version_replayed = replayed[0].torch_version_replayed if replayed else None
    seen, findings = set(), []
    for row in sorted((r for s in states for r in s.last_findings if isinstance(r, dict)),
                      key=lambda r: str(r.get("time", ""))):
        key = (row.get("signature"), row.get("time"))
        if key not in seen:
            seen.add(key)
            findings.append(row)
    merged.last_findings = findings[-LAST_FINDINGS:]
    return merged


def _merged_scheduler(schedulers: list, ops: dict) -> dict | None:
    """The first scheduler's settings with the summed per-op counters (the smoothed
    statistics, which do not add up, are left for the scheduler to rebuild)."""
    base = next((s for s in schedulers if isinstance(s, dict)), None)
    if base is None:
        return None
    return {**{k: v for k, v in base.items() if k != "ops"}, "ops": ops}
