"""Op families: each module registers its :class:`~mpsfuzz.fuzzer.catalogue.OpSpec` records."""
