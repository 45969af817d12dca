"""Findings and the on-disk corpus (one JSON file per distinct signature)."""
