"""Layer 7, campaign: the engine that drives Hypothesis, the workers, triage and the corpus."""
