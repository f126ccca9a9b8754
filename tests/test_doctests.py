"""The doctests of every module of the installed `evita` package, one test per module.

The modules are found by walking the package (`pkgutil.walk_packages`), so a new module
is tested with no edit here. Not `--doctest-modules` on the repository root: the root
is the package `evita` (pyproject.toml `package-dir`), and pytest would import its files
under the wrong names.
"""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import evita

MODULES = sorted(m.name for m in pkgutil.walk_packages(evita.__path__, "evita."))


def test_the_walk_finds_the_subpackages():
    assert {"evita.bootstrap.parser", "evita.catalog.printer", "evita.runtime.columnar"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in finder.find(module, name):
        runner.run(test)
    failed, attempted = runner.summarize(verbose=False)
    assert failed == 0, f"{failed} of {attempted} doctest examples of {name} failed (output above)"
