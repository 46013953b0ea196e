"""The build hook: the permission engine's hot pure modules compiled with mypyc, where it can be.

Everything else about the package is in pyproject.toml. A wheel built from this tree (`pip install
.`, `pip wheel .`) carries the modules in COMPILED as C extensions when mypyc (pinned in
pyproject.toml's build requirements) and a C compiler are there at build time, and the same modules
as plain Python otherwise (or without Python's headers); the two builds make the same decisions (tests/permissions/
test_compiled_equivalence.py). Pure Python is forced with METAHARNESS_PURE=1 in the build's
environment. An editable install (`pip install -e .`, what `make install` does) is always pure: it
runs the source being edited. `make compiled` builds a compiled tree of the package into
build/compiled for the tests and the benchmarks (docs/performance.md).

Only modules that run nothing but their own pure code belong in COMPILED: mypyc checks their
annotations at run time and binds their calls between compiled modules at build time, so a test
can no longer replace one of their functions (it can still change a table they read).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import sysconfig

from setuptools import setup

ENGINE = "src/metaharness/permissions/"
COMPILED = [
    ENGINE + "shell/words.py",
    ENGINE + "shell/entries.py",
    ENGINE + "shell/lexical.py",
    ENGINE + "shell/model.py",
    ENGINE + "shell/walk.py",
    ENGINE + "shell/wrappers.py",
    ENGINE + "shell/fileops.py",
    ENGINE + "shell/interpreters.py",
    ENGINE + "classifier.py",
    ENGINE + "rules.py",
    ENGINE + "match.py",
    ENGINE + "index.py",
    ENGINE + "subjects.py",
    ENGINE + "paths.py",
    ENGINE + "grants.py",
    ENGINE + "decision.py",
]
# The type check the compiled modules pass; the modules they import are read, not compiled. The
# package is a namespace package (src/metaharness has no __init__.py): its base is named, so the
# modules are metaharness.permissions.…
MYPY_OPTIONS = ["--ignore-missing-imports", "--follow-imports=silent", "--explicit-package-bases"]


def _why_pure() -> str | None:
    """Why this build is pure Python, or None when it compiles."""
    if os.environ.get("METAHARNESS_PURE", "") not in ("", "0"):
        return "METAHARNESS_PURE is set"
    if "editable_wheel" in sys.argv:
        return "an editable install runs the source"
    try:
        import mypyc.build  # noqa: F401
    except ImportError:
        return "mypyc is not installed"
    compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    if not compiler or shutil.which(compiler[0]) is None:
        return "no C compiler"
    if not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        return "no Python headers (Python.h)"
    return None


def ext_modules() -> list:
    why = _why_pure()
    if why is not None:
        print(f"metaharness: the permission engine is built as pure Python ({why})", file=sys.stderr)
        return []
    from mypyc.build import mypycify

    os.environ["MYPYPATH"] = "src"
    return mypycify(COMPILED + MYPY_OPTIONS, opt_level="3", group_name="metaharness_engine")


setup(ext_modules=ext_modules())
