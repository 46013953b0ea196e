"""The data tables (`data/*.toml`) and the module attributes that are built on first use.

What belongs here: reading a table from the package's data directory, and `lazy_attributes`,
which gives a module a `__getattr__` for constants that are costly to build (TOML tables, the
tree-sitter language). A session opens and writes its `init` line before its first tool call,
so nothing the first call needs is built at import (oharness start-up time is benchmarked).

Rules it keeps: a lazy attribute is built at most once per module and stored in the module's
globals, so `module.NAME`, `from module import NAME` and the module's own reads (through the
returned reader) all see one object, exactly as if it had been assigned at import; a value
replaced in the module (a test's monkeypatch) is what every later read sees.
"""

from __future__ import annotations

from typing import Any, Callable


def load_table(name: str) -> dict:
    """One TOML file of `metaharness/permissions/data`, parsed."""
    import tomllib
    from importlib import resources

    with resources.files("metaharness.permissions.data").joinpath(name).open("rb") as handle:
        return tomllib.load(handle)


def lazy_attributes(
    namespace: dict[str, Any], builders: dict[str, Callable[[], Any]]
) -> tuple[Callable[[str], Any], Callable[[str], Any]]:
    """(module `__getattr__`, reader) for the constants in `builders`, stored into `namespace`
    (the module's `globals()`) when first read. Use the reader inside the module: a plain
    global lookup does not reach a module's `__getattr__`."""
    module = namespace["__name__"]

    def module_getattr(name: str) -> Any:
        build = builders.get(name)
        if build is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        # setdefault: should two threads race on the first read, both keep the stored value.
        return namespace.setdefault(name, build())

    def read(name: str) -> Any:
        value = namespace.get(name)
        return value if value is not None else module_getattr(name)

    return module_getattr, read
