"""Layer 4, triage: re-run, reduce, explain and localise a failure (pipeline.py runs them in turn)."""
