"""Nothing a user sees points outside the site: help texts, error messages, and the docstrings the
API pages render name no `§` and no document the site does not contain."""

from __future__ import annotations

import ast
import re

import click

from .support import DOCS, ROOT, forbidden_in


def _commands():
    from metaharness.cli.main import cli
    from oharness.cli import main as oharness

    def walk(command, path):
        yield path, command
        if isinstance(command, click.Group):
            ctx = click.Context(command, info_name=path[-1])
            for name in command.list_commands(ctx):
                yield from walk(command.get_command(ctx, name), [*path, name])

    yield from walk(cli, ["metaharness"])
    yield from walk(oharness, ["oharness"])


def test_help_texts_name_no_section_or_outside_document():
    found = []
    for path, command in _commands():
        texts = [command.help or "", command.short_help or "", command.epilog or ""]
        texts += [getattr(p, "help", None) or "" for p in command.params]
        for text in texts:
            if forbidden_in(text):
                found.append((" ".join(path), text))
    assert found == []


def test_every_option_says_what_it_does():
    missing = []
    for path, command in _commands():
        assert command.help, f"{' '.join(path)} has no help text"
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden and not getattr(param, "help", None):
                missing.append((" ".join(path), param.opts[0]))
    assert missing == []


def _docstring_ids(tree) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def test_no_string_in_the_code_names_a_section_or_outside_document():
    """Every string literal that is not a docstring may reach a user as a message."""
    found = []
    for path in sorted((ROOT / "src").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = _docstring_ids(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                    and forbidden_in(node.value)):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value[:80]!r}")
    assert found == []


def _api_objects() -> list[tuple[str, list[str] | None]]:
    """The `::: path` directives of the API page, with their `members` lists."""
    text = (DOCS / "reference" / "api.md").read_text()
    objects = []
    for match in re.finditer(r"^::: ([\w.]+)\n((?:    .*\n)*)", text, flags=re.M):
        members = re.search(r"members: \[([^\]]*)\]", match.group(2))
        objects.append((match.group(1), [m.strip() for m in members.group(1).split(",")] if members else None))
    return objects


def _rendered_docstrings(obj, members: list[str] | None):
    if obj.docstring:
        yield obj.path, obj.docstring.value
    names = members if members is not None else [n for n in obj.members if not n.startswith("_")]
    for name in names:
        member = obj.members[name]
        if member.is_alias:
            continue
        yield from _rendered_docstrings(member, None if member.is_class else [])


def test_the_docstrings_the_api_pages_render_name_no_section_or_outside_document():
    import griffe

    objects = _api_objects()
    assert objects, "the API page renders nothing"
    # Each package is loaded once and every directive's object looked up in it (a load per directive
    # read the whole package again each time: a minute of the fast tier under load).
    loader = griffe.GriffeLoader(search_paths=[str(ROOT / "src")])
    packages: dict = {}
    found = []
    for path, members in objects:
        package, _, rest = path.partition(".")
        if package not in packages:
            packages[package] = loader.load(package)
        obj = packages[package][rest] if rest else packages[package]
        for where, text in _rendered_docstrings(obj, members):
            if forbidden_in(text):
                found.append((where, forbidden_in(text)))
    assert found == []
