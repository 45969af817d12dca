"""What a daemon's campaign keeps for its whole life is bounded: message tables past
their cap count under one row per op, behaviours are kept as capped hashes."""
from __future__ import annotations

from mpsfuzz.campaign import engine


def test_a_message_table_keeps_at_most_its_cap_of_rows(monkeypatch):
    monkeypatch.setattr(engine, "MAX_MESSAGES", 3)
    table: dict = {}
    for n in range(10):
        engine._count_message(table, "add", f"size {n} not supported")
    engine._count_message(table, "add", "size 0 not supported")      # a row it has
    assert len(table) == 4                                            # 3 rows and the overflow
    assert table[("add", "size 0 not supported")] == 2
    assert table[("add", engine.OTHER_MESSAGES)] == 7
    assert sum(table.values()) == 11                                  # nothing uncounted
