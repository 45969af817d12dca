"""Layer 2, execution: targets, worker processes and the executor that observes a case on both sides."""
