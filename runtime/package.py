"""Evita as a zip for Spark's executors and for `spark-submit` (`evita package`).

On a cluster the executors' Python imports Evita from the package's zip
(`session.ship_package` adds it, `connect.ship_package_remote` over Spark Connect); a
driver that Evita does not start (`spark-submit --py-files evita.zip evita_main.py`)
gets the zip and the launcher script from `evita package`. The zip is built from the
installed package's own files, with fixed timestamps, so the same code gives the same
bytes.
"""
from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from pathlib import Path

_PACKAGE_FILES = (".py", ".dl", ".lark", ".properties")
_PACKAGE_DIRS = ("bootstrap", "catalog", "runtime", "stages")  # pyproject's packages, under the root
_zip: Path | None = None


def _package_root() -> Path:
    return Path(__file__).resolve().parent.parent


def imported_from_zip() -> Path | None:
    """The zip this process imports Evita from (`spark-submit --py-files evita.zip`), else None."""
    root = _package_root()
    if root.is_dir():
        return None
    for p in root.parents:
        if p.is_file():
            return p
    return None


def package_bytes() -> bytes:
    """The `evita` package this process runs (what pip installed, or a checkout) as a zip
    with `evita/` at its top, the bytes fixed by the sources (no timestamps)."""
    import io
    import zipfile

    inside = imported_from_zip()
    if inside is not None:  # running from a shipped zip already: that zip is the package
        return inside.read_bytes()
    root = _package_root()
    files = sorted(p for p in root.glob("*") if p.is_file() and p.suffix in _PACKAGE_FILES)
    for d in _PACKAGE_DIRS:
        files += sorted(p for p in (root / d).rglob("*") if p.is_file() and p.suffix in _PACKAGE_FILES
                        and "__pycache__" not in p.parts)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for p in files:  # fixed timestamps: the same sources give the same bytes, hence the same name
            info = zipfile.ZipInfo(f"evita/{p.relative_to(root).as_posix()}", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, p.read_bytes())
    return buf.getvalue()


def write_package(output: str | os.PathLike) -> Path:
    """Write the package zip to `output` (`evita package`): the file to give
    `spark-submit --py-files` (or `spark.submit.pyFiles`) for a driver Evita does not start."""
    target = Path(output)
    if target.parent != Path(""):
        target.parent.mkdir(parents=True, exist_ok=True)
    from ..catalog.fs import Loc

    Loc.of(target).write_atomically(package_bytes())
    return target


LAUNCHER = '''"""Evita's command line under spark-submit (written by `evita package --launcher`):

    spark-submit --master MASTER --py-files evita.zip evita_main.py run PROGRAM [options]

The arguments after this file are `evita`'s. Evita reads its grammar and stages as files,
so when the driver has no installed `evita` and imports it from the zip (cluster deploy
mode), the zip is unpacked into a temporary folder first.
"""
import atexit
import os
import shutil
import sys
import tempfile
import zipfile


def _unpacked():
    for entry in list(sys.path):
        if entry.endswith(".zip") and os.path.isfile(entry):
            with zipfile.ZipFile(entry) as z:
                if "evita/__init__.py" in z.namelist():
                    target = tempfile.mkdtemp(prefix="evita-driver-")
                    atexit.register(shutil.rmtree, target, True)
                    z.extractall(target)
                    return target
    return None


try:
    import evita
    installed = bool(getattr(evita, "__file__", None)) and os.path.isdir(os.path.dirname(evita.__file__))
except ImportError:
    installed = False
if not installed:
    folder = _unpacked()
    if folder is None:
        sys.exit("evita_main.py: no evita package: give spark-submit --py-files evita.zip (evita package)")
    for name in [m for m in sys.modules if m == "evita" or m.startswith("evita.")]:
        del sys.modules[name]
    sys.path.insert(0, folder)

from evita.bootstrap.cli import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
'''


def write_launcher(output: str | os.PathLike) -> Path:
    """Write `LAUNCHER`, the Python file spark-submit runs as the application."""
    target = Path(output)
    if target.parent != Path(""):
        target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(LAUNCHER)
    return target


def package_zip() -> Path:
    """The package's zip (`package_bytes`), written once per process, named by its content
    hash (EVITA_PYFILES_DIR, default the temp dir)."""
    global _zip
    if _zip is not None and _zip.exists():
        return _zip
    import hashlib

    data = package_bytes()
    out_dir = Path(os.environ.get("EVITA_PYFILES_DIR") or tempfile.gettempdir()) / "evita-pyfiles"
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"evita-{hashlib.sha256(data).hexdigest()[:16]}.zip"
    if not target.exists():
        from ..catalog.fs import Loc

        Loc.of(target).write_atomically(data)
    _zip = target
    return target
