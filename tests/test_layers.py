"""The import layers: every arrow between our modules points down.

Every module under src/ is parsed with `ast` (nothing is imported, so an import inside a
function or under TYPE_CHECKING counts like any other) and each import of ours is checked
against the rules below. The floors, from the ground up:

* `metaharness.protocol` — the wire; imports nothing of ours outside itself;
* `metaharness.permissions` — the permission engine; imports nothing of ours but protocol;
* `oharness` — our own harness; of metaharness it imports only those two floors;
* `metaharness.loopback`, `metaharness.adapters` — an adapter imports neither the run, the CLI
  nor another adapter (the contract `adapters/base.py`, the child-process kit
  `adapters/process/`, the vendor CLIs' shared start `adapters/vendor.py` and a shared ACP core
  `adapters/acp/` are there for all of them);
* `metaharness.run` — the run; imports no adapter package (only the registry and the contract);
* workflow, batch, replay — above the run: of it they import only `metaharness.run.spec`, and
  reach the rest through the library API `metaharness.api`, as an embedder would;
* `metaharness.inspect` — the Inspect agent, on top: the same rule as those, and nothing of ours
  imports it (it imports `inspect_ai`, which nothing else may need);
* and no cycle between packages.

Where today's code breaks a rule, the break is listed in ALLOWED with the reason; an entry
that no longer matches any import fails the test too, so the list only shrinks.
"""

from __future__ import annotations

import ast
import functools
import pathlib

import pytest

SRC = pathlib.Path(__file__).resolve().parent.parent / "src"
OURS = ("metaharness", "oharness")

# Modules adapters share; every other `metaharness.adapters.<name>` is one adapter's own.
ADAPTER_SHARED = ("metaharness.adapters.base", "metaharness.adapters.process", "metaharness.adapters.vendor",
                  "metaharness.adapters.acp")
# What an adapter may import of ours besides its own package and ADAPTER_SHARED.
ADAPTER_FLOORS = ("metaharness.protocol", "metaharness.permissions", "metaharness.loopback")
ABOVE_RUN = ("metaharness.workflow", "metaharness.batch", "metaharness.replay", "metaharness.export",
             "metaharness.inspect")

# (importer, imported) → why it is still allowed. Named in the report of the restructuring.
# Empty: every arrow points down. (The CLI reference generator, which imports both command
# lines, lives outside both packages, in tools/.)
ALLOWED: dict[tuple[str, str], str] = {}


# -- reading the imports -------------------------------------------------------------------


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, pathlib.Path]:
    return {module_name(p): p for top in OURS for p in (SRC / top).rglob("*.py")}


def imports_of(module: str, source: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ours that `source` (the text of `module`) imports."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:  # `from pkg import mod` imports the module pkg.mod
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in known else target)
    return {t for t in found if t.split(".")[0] in OURS}


@functools.cache  # read when a test first asks, not at collection (every test worker collects)
def import_graph() -> dict[str, set[str]]:
    modules = all_modules()
    known = set(modules)
    return {m: imports_of(m, p.read_text(), p.name == "__init__.py", known) for m, p in modules.items()}


# -- the rules -----------------------------------------------------------------------------


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def adapter_package(module: str) -> str | None:
    """`metaharness.adapters.<name>` for a module of one adapter (or of a shared one), else None."""
    parts = module.split(".")
    if len(parts) >= 3 and parts[:2] == ["metaharness", "adapters"]:
        return ".".join(parts[:3])
    return None


def wrong_way(importer: str, imported: str) -> str | None:
    """Why this arrow points the wrong way, or None when it is allowed."""
    if within(importer, "metaharness.protocol") and not within(imported, "metaharness.protocol"):
        return "protocol imports nothing of ours"
    if within(importer, "metaharness.permissions") and not any(
        within(imported, p) for p in ("metaharness.permissions", "metaharness.protocol")
    ):
        return "the permission engine imports nothing of ours but protocol"
    if within(importer, "oharness") and not within(imported, "oharness") and not any(
        within(imported, p) for p in ("metaharness.protocol", "metaharness.permissions")
    ):
        return "oharness imports only metaharness's protocol and permission engine"
    if within(importer, "metaharness") and within(imported, "oharness"):
        return "metaharness launches oharness, it does not import it"
    own = adapter_package(importer)
    if own is not None and within(imported, "metaharness"):
        if within(imported, own) or any(within(imported, p) for p in ADAPTER_SHARED + ADAPTER_FLOORS):
            return None
        return "an adapter imports neither the run, the CLI nor another adapter"
    if within(importer, "metaharness.run"):
        theirs = adapter_package(imported)
        if theirs is not None and theirs not in ADAPTER_SHARED[:2]:
            return "the run imports no adapter package, only the registry and the contract"
    if within(imported, "metaharness.inspect") and not within(importer, "metaharness.inspect"):
        return "the Inspect agent is the top layer: nothing of ours imports it"
    if any(within(importer, p) for p in ABOVE_RUN):
        if within(imported, "metaharness.run") and imported != "metaharness.run.spec":
            return "workflow, batch and replay use the run through metaharness.api (or its spec)"
        if within(imported, "metaharness.adapters") or within(imported, "metaharness.cli"):
            return "workflow, batch and replay import neither the adapters nor the CLI"
    return None


def unit(module: str) -> str:
    """The package a module counts in for the cycle check: `oharness`, or metaharness's second level."""
    parts = module.split(".")
    return parts[0] if parts[0] == "oharness" or len(parts) == 1 else ".".join(parts[:2])


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


# -- the tests -----------------------------------------------------------------------------



def test_every_arrow_points_down():
    broken = sorted(
        f"{importer} -> {imported}: {why}"
        for importer, targets in import_graph().items()
        for imported in targets
        if (why := wrong_way(importer, imported)) and (importer, imported) not in ALLOWED
    )
    assert not broken, "imports that point the wrong way:\n" + "\n".join(broken)


def test_every_allowed_exception_is_still_needed():
    stale = [pair for pair in ALLOWED if pair[1] not in import_graph().get(pair[0], set()) or not wrong_way(*pair)]
    assert not stale, f"allowlist entries no import needs any more (remove them): {stale}"


def test_no_cycle_between_packages():
    edges: dict[str, set[str]] = {}
    for importer, targets in import_graph().items():
        for imported in targets:
            if (importer, imported) not in ALLOWED and unit(importer) != unit(imported):
                edges.setdefault(unit(importer), set()).add(unit(imported))
    assert not cycles(edges)


# The rules themselves, on arrows written for the purpose: each rule can fail.
@pytest.mark.parametrize("importer, imported", [
    ("metaharness.protocol.events", "metaharness.run.spec"),
    ("metaharness.permissions.engine", "metaharness.adapters.base"),
    ("metaharness.permissions.engine", "oharness.gate"),
    ("oharness.loop", "metaharness.run.loop"),
    ("metaharness.run.loop", "oharness"),
    ("metaharness.adapters.claude.adapter", "metaharness.run.loop"),
    ("metaharness.adapters.claude.adapter", "metaharness.cli.main"),
    ("metaharness.adapters.codex", "metaharness.adapters.claude.launch"),
    ("metaharness.adapters.opencode.adapter", "metaharness.adapters.gemini.translate"),
    ("metaharness.adapters.acp.client", "metaharness.adapters.opencode"),
    ("metaharness.adapters.gemini", "metaharness.adapters"),
    ("metaharness.run.loop", "metaharness.adapters.codex"),
    ("metaharness.workflow.host", "metaharness.run.loop"),
    ("metaharness.batch.cell", "metaharness.run.host"),
    ("metaharness.replay.session", "metaharness.adapters.claude"),
    ("metaharness.replay.session", "metaharness.run.host"),
    ("metaharness.replay.redecide", "metaharness.run.decide"),
    ("metaharness.replay.redecide", "metaharness.adapters"),
    ("metaharness.batch.plan", "metaharness.cli.main"),
    ("metaharness.adapters.acp.doctor", "metaharness.run.spec"),
    ("metaharness.inspect", "metaharness.run.loop"),
    ("metaharness.inspect", "metaharness.adapters.claude"),
    ("metaharness.cli.main", "metaharness.inspect"),
])
def test_a_wrong_arrow_is_caught(importer, imported):
    assert wrong_way(importer, imported) is not None


@pytest.mark.parametrize("importer, imported", [
    ("metaharness.permissions.policy", "metaharness.protocol.values"),
    ("oharness.permission_gate", "metaharness.permissions"),
    ("metaharness.adapters.opencode.adapter", "metaharness.adapters.acp.client"),
    ("metaharness.adapters.gemini.launch", "metaharness.adapters.process"),
    ("metaharness.adapters.claude.adapter", "metaharness.loopback.server"),
    ("metaharness.run.loop", "metaharness.adapters.base"),
    ("metaharness.workflow.host", "metaharness.run.spec"),
    ("metaharness.replay.redecide", "metaharness.api"),
    ("metaharness.adapters.codex.rpc", "metaharness.adapters.process.jsonrpc"),
    ("metaharness.cli.acp_doctor", "metaharness.adapters.acp.seam"),
    ("metaharness.inspect", "metaharness.api"),
    ("metaharness.inspect", "metaharness.export.atif"),
])
def test_a_right_arrow_passes(importer, imported):
    assert wrong_way(importer, imported) is None


def test_imports_are_read_from_the_source():
    known = {"metaharness.run.loop", "metaharness.adapters.base"}
    source = "def f():\n    from metaharness.run import loop\n\nfrom ..base import Adapter\nimport os\n"
    found = imports_of("metaharness.adapters.claude.seam", source, False, known)
    assert found == {"metaharness.run.loop", "metaharness.adapters.base"}
    assert wrong_way("metaharness.adapters.claude.seam", "metaharness.run.loop")


def test_a_cycle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_two_packages_depend_one_way():
    """oharness stands on metaharness's wire and permission engine; nothing of metaharness imports
    oharness (it runs oharness as a child process), so the two packages never tie both ways."""
    upward = sorted((importer, imported) for importer, targets in import_graph().items() if importer.startswith("metaharness")
                    for imported in targets if imported.split(".")[0] == "oharness")
    assert not upward, upward
