"""Op families: each module registers its :class:`~mpsfuzz.generation.opspec.OpSpec` records."""
