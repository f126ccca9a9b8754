"""A program's queries and shown relations, as the command line prints them and the
API returns them: which relations a run shows, and a query atom's answers (its
constants and repeated variables applied, its columns named after its variables) from
a Spark DataFrame or from a table the run left on the driver."""
from __future__ import annotations

from .dataflow import term_text


def shown_relations(dataflow) -> list:
    """What a run shows: its .output relations, else none beside its queries' answers,
    else every derived relation."""
    if dataflow.outputs:
        return list(dataflow.outputs)
    if dataflow.queries:
        return []
    return [n for n, s in dataflow.relations.items() if s.kind == "derived"]


def _query_selection(atom) -> tuple:
    """What a query atom asks of its relation's columns 0, 1, ...: ([(i, j)]: columns
    that must be equal, a repeated variable; [(i, value)]: a constant's column; the
    answer's column names where its variables name them, else None)."""
    from ..bootstrap import syntax as S
    from ..bootstrap.planner import const_value

    seen: dict = {}
    equal, fixed = [], []
    for i, a in enumerate(atom.args):
        if isinstance(a, S.Var):
            if a.name in seen:
                equal.append((i, seen[a.name]))
            seen.setdefault(a.name, i)
        elif not isinstance(a, S.Wildcard):
            fixed.append((i, const_value(a)))
    names = [a.name if isinstance(a, S.Var) and seen[a.name] == i else None for i, a in enumerate(atom.args)]
    return equal, fixed, names


def query_headers(atom, declared: tuple) -> list:
    """The column headings of a query's answers: a variable's name; for a constant (or a
    repeated variable, a wildcard), the relation's declared column name, or, when the
    relation has none (`materialize`, `define`: columns c0, c1, ... inside), the argument
    as the query wrote it, never the internal `c0`.

    >>> from evita.bootstrap import syntax as S
    >>> q = S.Atom("path", (S.Const("node1", S.STRING), S.Var("Y"), S.Wildcard()))
    >>> query_headers(q, ("c0", "c1", "c2")), query_headers(q, ("src", "dst", "cost"))
    (['"node1"', 'Y', '_'], ['src', 'Y', 'cost'])
    """
    names = _query_selection(atom)[2]
    return [name or (column if column != f"c{i}" else atom_text(arg))
            for i, (name, column, arg) in enumerate(zip(names, declared, atom.args))]


def query_frame(df, atom):
    """Tuples of `df` matching a query atom: its constants and repeated variables; the
    answer's columns named after the query's variables where it has them."""
    from pyspark.sql import functions as F

    cols = df.columns
    equal, fixed, names = _query_selection(atom)
    for i, j in equal:
        df = df.where(F.col(cols[i]) == F.col(cols[j]))
    for i, value in fixed:
        df = df.where(F.col(cols[i]) == F.lit(value))
    return df.toDF(*[n or c for n, c in zip(names, cols)])


def query_table(table, atom):
    """`query_frame` over a pandas table the run left on the driver (c0, c1, ...)."""
    equal, fixed, _ = _query_selection(atom)
    keep = [table[f"c{i}"] == table[f"c{j}"] for i, j in equal] + [table[f"c{i}"] == v for i, v in fixed]
    for k in keep[1:]:
        keep[0] = keep[0] & k
    return table[keep[0].to_numpy()].reset_index(drop=True) if keep else table


def atom_text(a) -> str:
    return term_text(a)
