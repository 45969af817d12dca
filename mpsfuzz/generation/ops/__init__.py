"""Op families: each module registers its :class:`~mpsfuzz.generation.catalogue.OpSpec` records."""
