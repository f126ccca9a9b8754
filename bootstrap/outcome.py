"""What a command left behind, so that its error message tells the truth about it.

A command can fail at any point: parsing, checking, a stage, the planner, the run, the
writing of its `-D` files. By then it may have stored a compile in the catalog (every
compile is kept, `catalog/store.py`) or written some output files. The store and the
writer record here what they committed (`stored`, `wrote`); the command line's error
report ends with `describe()`, which says exactly that, and `evita catalog` agrees with
it. `evita` resets the record when a command starts (`reset`).

>>> reset(); describe()
'nothing was stored in the catalog.'
>>> stored("tc", range(11)); expect_outputs("out"); describe()
'the compile of tc is stored in the catalog (11 versions, 0-10: evita catalog --program tc); no output file was written.'
>>> wrote("out/path.csv"); describe()
'the compile of tc is stored in the catalog (11 versions, 0-10: evita catalog --program tc); 1 output file was written: out/path.csv.'
>>> reset(); stored("tc", [0, 1, 2], failed=True); describe()
'the failed compile of tc is kept apart in the catalog (3 versions, 0-2, status failed); its last good compile, if any, is unchanged.'
>>> reset()
"""
from __future__ import annotations

_programs: dict = {}  # program -> (kind, version numbers): "compile", "failed compile", "parsed program"
_outputs: list = []  # output files written
_outputs_expected: list = []  # the folders a run was asked to write (-D)


def reset() -> None:
    _programs.clear()
    _outputs.clear()
    _outputs_expected.clear()


def stored(program: str, versions=(), failed: bool = False, parsed: bool = False) -> None:
    """The store committed rows of `program`: a compile (its version numbers), the
    versions of a failed compile (kept apart), or the parsed program (`evita load`)."""
    kind = "parsed program" if parsed else "failed compile" if failed else "compile"
    _programs[program] = (kind, sorted(versions))


def expect_outputs(folder: str) -> None:
    """The command was asked to write output files to `folder` (`-D`)."""
    _outputs_expected.append(str(folder))


def wrote(path: str) -> None:
    """An output file was written, whole."""
    _outputs.append(str(path))


def anything() -> bool:
    """Did the command store or write anything?"""
    return bool(_programs or _outputs)


def describe() -> str:
    """One sentence: what the command stored in the catalog and what files it wrote."""
    parts = [_program_text(name, kind, versions) for name, (kind, versions) in _programs.items()]
    if not parts:
        parts.append("nothing was stored in the catalog")
    if _outputs:
        shown = ", ".join(_outputs[:3]) + (f" and {len(_outputs) - 3} more" if len(_outputs) > 3 else "")
        parts.append(f"{len(_outputs)} output file{'s were' if len(_outputs) != 1 else ' was'} written: {shown}")
    elif _outputs_expected:
        parts.append("no output file was written")
    return "; ".join(parts) + "."


def _program_text(name: str, kind: str, versions: list) -> str:
    span = (f"1 version, {versions[0]}" if len(versions) == 1 else
            f"{len(versions)} versions, {versions[0]}-{versions[-1]}") if versions else "no versions"
    if kind == "failed compile":
        return (f"the failed compile of {name} is kept apart in the catalog ({span}, status failed); "
                "its last good compile, if any, is unchanged")
    if kind == "parsed program":
        return f"the program {name} is stored in the catalog as parsed (evita catalog --program {name})"
    return f"the compile of {name} is stored in the catalog ({span}: evita catalog --program {name})"
