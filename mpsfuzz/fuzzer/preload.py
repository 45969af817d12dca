"""Imported once by the worker zygote (forkserver) so forked workers start warm."""
from ..oracles import all_oracles
from . import catalogue, executor  # noqa: F401

catalogue.all_ops()
all_oracles()
