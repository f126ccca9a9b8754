"""What each stage did to a program: rules added, removed and changed, as program text.

Versions are compared by rule id: a rule whose id is new was added, one whose id is gone
was removed, one whose id stayed but whose printed text differs was changed.
"""
from __future__ import annotations

from dataclasses import dataclass

from evita.catalog.decode import decode
from evita.catalog.printer import format_rule


@dataclass
class StageDiff:
    version: int
    stage: str
    added: list  # rule text
    removed: list
    changed: list  # (old text, new text)

    @property
    def counts(self) -> tuple:
        return len(self.added), len(self.removed), len(self.changed)


def rule_texts(rows, program_id: str) -> dict:
    """rule id -> printed rule, for one catalog version."""
    program = decode(rows, program_id)
    ids = {r[rows_col(rows, "name")]: r[rows_col(rows, "id")] for r in rows.get("rule", [])}
    return {ids.get(r.name, r.name): format_rule(r) for r in program.rules}


def rows_col(rows, column: str) -> int:
    from evita.catalog import schema

    return schema.table("rule").column_names.index(column)


def diff_versions(versions: list, program_id: str) -> list:
    """versions: [(number, stage, CatalogRows)] in order -> one StageDiff per stage after parse."""
    out = []
    before = None
    for number, stage, rows in versions:
        now = rule_texts(rows, program_id)
        if before is not None:
            added = [now[i] for i in sorted(now) if i not in before]
            removed = [before[i] for i in sorted(before) if i not in now]
            changed = [(before[i], now[i]) for i in sorted(now) if i in before and before[i] != now[i]]
            out.append(StageDiff(number, stage, added, removed, changed))
        before = now
    return out
