"""Generation and execution: recipes, strategies, the op catalogue, workers, the engine."""
