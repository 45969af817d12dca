"""Test helpers for mpsfuzz itself.

:mod:`mpsfuzz.testing.faults` provides a fault-injecting CPU target that emulates
historical MPS bugs, so that the fuzzer's oracles can be proved on a machine without an
MPS device (``--target mpsfuzz.testing.faults:target``).
"""
