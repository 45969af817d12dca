"""The public import path of targets: ``from mpsfuzz.targets import DeviceTarget``.

Third-party targets (``--target package.module:attr``) and the docs import this module;
the code lives in :mod:`mpsfuzz.execution.targets`, which mpsfuzz itself imports. This
module only re-exports it (nothing inside mpsfuzz imports it: tests/test_layers.py).
"""
from .execution.targets import (BUILTIN, PREFERENCE, CompiledTarget, DeviceTarget, TargetError,  # noqa: F401
                                best_available, load_target)
