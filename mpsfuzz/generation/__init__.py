"""Layer 1, generation: dtypes, case recipes, the op catalogue and its specs, Hypothesis strategies."""
