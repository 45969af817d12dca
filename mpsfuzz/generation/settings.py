"""What generation needs in every process, passed explicitly (issue 39, point 2).

A campaign's cases are drawn in its own process, in drafter processes and again in
workers and triage (a case is made from its recipe wherever it runs). Each of them must
agree on how large one input may be, whether users' kernels draw their large inputs,
and which users' kernel files define ops. :class:`GenerationSettings` holds that; the
campaign's plan (campaign/plan.py) builds it, and every process mpsfuzz starts is handed
it as an argument and :func:`install`\\ s it once at its start. Generation reads the
installed settings (``recipes.max_bytes()``, ``kernels.large_sizes_enabled()``, the
kernel files the catalogue imports).

The environment is a user's way in, never mpsfuzz's own channel:
:func:`from_environment` is the one place that reads ``MPSFUZZ_MAX_BYTES``,
``MPSFUZZ_HOST_MAX_BYTES``, ``MPSFUZZ_LARGE`` and ``MPSFUZZ_KERNELS``, as the defaults
under ``--max-bytes``, ``--large`` and ``--kernels``; mpsfuzz never sets them. A process
that installed nothing (a script driving the engine, the pytest plugin) gets the
settings its environment gives, read once.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace

DEFAULT_MAX_BYTES = 1 << 30
# The host builds every storage before moving it, and the CPU reference builds it again
# (with a float64 copy for the arbiter): whatever --max-bytes allows the device, no
# storage past this is built, so that a worker's host memory stays bounded (a few GiB a
# worker) however many lanes share the machine. On an 80 GB GPU, --max-bytes 40GB once let
# a triage probe build 16 GiB contiguous copies of stride-0 views in four lanes at once.
HOST_MAX_BYTES = 1 << 30

# The variables a user may set by hand (docs/cli.md), read by from_environment alone.
MAX_BYTES_ENV = "MPSFUZZ_MAX_BYTES"
HOST_MAX_BYTES_ENV = "MPSFUZZ_HOST_MAX_BYTES"
LARGE_ENV = "MPSFUZZ_LARGE"
KERNELS_ENV = "MPSFUZZ_KERNELS"


@dataclass(frozen=True)
class GenerationSettings:
    """``max_bytes``: the most one input may take on the device (``--max-bytes``: what
    the large family draws within); ``host_max_bytes``: the most one storage may take
    on the host, before the smaller of it and ``max_bytes`` is taken (:attr:`host_bound`);
    ``large_inputs``: users' kernels that declare large inputs draw them (``--large``);
    ``kernel_files``: the real paths of users' kernel files (``--kernels``), imported by
    the catalogue of every process."""
    max_bytes: int = DEFAULT_MAX_BYTES
    host_max_bytes: int = HOST_MAX_BYTES
    large_inputs: bool = False
    kernel_files: tuple[str, ...] = ()

    def __post_init__(self):
        for name in ("max_bytes", "host_max_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name}={value!r}: must be an integer > 0")
        if not isinstance(self.kernel_files, tuple):
            raise ValueError(f"kernel_files={self.kernel_files!r}: must be a tuple of paths")

    @property
    def host_bound(self) -> int:
        """The most one storage may take on the host: the smaller of the two bounds."""
        return min(self.max_bytes, self.host_max_bytes)

    def with_kernel_files(self, paths) -> "GenerationSettings":
        """These settings with the kernel files ``paths`` added (real paths, each once,
        after those already named)."""
        files = list(self.kernel_files)
        files += [real for real in dict.fromkeys(os.path.realpath(p) for p in paths) if real not in files]
        return replace(self, kernel_files=tuple(files))

    def to_json(self) -> dict:
        return {"max_bytes": self.max_bytes, "host_max_bytes": self.host_max_bytes,
                "large_inputs": self.large_inputs, "kernel_files": list(self.kernel_files)}

    @classmethod
    def from_json(cls, data: dict) -> "GenerationSettings":
        return cls(max_bytes=int(data["max_bytes"]), host_max_bytes=int(data["host_max_bytes"]),
                   large_inputs=bool(data["large_inputs"]), kernel_files=tuple(data["kernel_files"]))


def _bytes(environ: Mapping[str, str], name: str) -> int:
    """The positive integer in ``environ[name]``; 0 where unset or not one."""
    try:
        value = int(environ.get(name) or 0)
    except ValueError:
        return 0
    return max(0, value)


def from_environment(environ: Mapping[str, str] | None = None) -> GenerationSettings:
    """The settings a user's environment gives (``os.environ`` by default): the one
    place mpsfuzz reads these variables. Unset or malformed, each is the default."""
    environ = os.environ if environ is None else environ
    kernel_files = tuple(p for p in environ.get(KERNELS_ENV, "").split(os.pathsep) if p)
    return GenerationSettings(max_bytes=_bytes(environ, MAX_BYTES_ENV) or DEFAULT_MAX_BYTES,
                              host_max_bytes=_bytes(environ, HOST_MAX_BYTES_ENV) or HOST_MAX_BYTES,
                              large_inputs=environ.get(LARGE_ENV, "") == "1",
                              kernel_files=GenerationSettings().with_kernel_files(kernel_files).kernel_files)


_INSTALLED: GenerationSettings | None = None


def install(settings: GenerationSettings) -> None:
    """Make ``settings`` this process's: what generation reads from now on. Called once
    at a process's start (the CLI after its plan, a lane, a worker, a drafter)."""
    global _INSTALLED
    if not isinstance(settings, GenerationSettings):
        raise TypeError(f"install() takes GenerationSettings, not {type(settings).__name__}")
    _INSTALLED = settings


def installed() -> GenerationSettings:
    """This process's settings; where none were installed, its environment's (read once)."""
    global _INSTALLED
    if _INSTALLED is None:
        _INSTALLED = from_environment()
    return _INSTALLED
