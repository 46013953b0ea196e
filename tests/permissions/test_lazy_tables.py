"""The data tables and the tree-sitter language are built on first use (permissions/tables.py):
opening the engine loads none of them, and once read they are the very tables in data/*.toml,
one object per name however they are reached."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from importlib import resources

import pytest

from metaharness.permissions import calls, classifier, path_checks, rules, shell

TABLES = [
    (shell, "WRAPPERS", "wrappers.toml", None),
    (shell, "OPTIONS", "options.toml", None),
    (shell, "FILECOMMANDS", "filecommands.toml", None),
    (classifier, "READONLY", "readonly.toml", None),
    (classifier, "ROUTINE", "routine.toml", "entry"),
    (classifier, "RISKY", "risky.toml", "feature"),
    (path_checks, "PROTECTED", "protected.toml", None),
]


def _parsed(file: str) -> dict:
    with resources.files("metaharness.permissions.data").joinpath(file).open("rb") as f:
        return tomllib.load(f)


@pytest.mark.parametrize("module,name,file,key", TABLES, ids=[t[1] for t in TABLES])
def test_table_is_the_data_file_and_one_object(module, name, file, key):
    expected = _parsed(file)
    value = getattr(module, name)
    assert value == (expected[key] if key else expected)
    assert getattr(module, name) is value
    assert vars(module)[name] is value  # stored: the module's own reads see the same object
    assert module._lazy(name) is value
    namespace: dict = {}
    exec(f"from {module.__name__} import {name}", namespace)
    assert namespace[name] is value


def test_inert_tools_and_re_exports():
    inert = {t.casefold() for t in _parsed("inert.toml")["tools"]}
    assert calls.INERT_TOOLS == frozenset(inert | {"todowrite", "update_plan", "request_user_input"})
    assert rules.OPTIONS is shell.OPTIONS
    assert rules.Word is shell.Word and rules.static_word is shell.static_word
    assert type(shell._LANGUAGE).__name__ == "Language"
    for module in (shell, classifier, calls, path_checks, rules):
        with pytest.raises(AttributeError):
            module.NO_SUCH_TABLE  # noqa: B018


def test_monkeypatched_table_is_what_the_module_reads(monkeypatch):
    monkeypatch.setitem(shell.WRAPPERS, "frobnicate", {"kind": "generic", "transparent": True})
    assert shell._lazy("WRAPPERS")["frobnicate"]["kind"] == "generic"


_FRESH = """
import json, sys
import oharness.permission_gate
from metaharness.permissions import calls, engine, path_checks
before = {
    "shell": "metaharness.permissions.shell" in sys.modules,
    "classifier": "metaharness.permissions.classifier" in sys.modules,
    "tree_sitter": "tree_sitter" in sys.modules,
    "tables": [n for n in ("INERT_TOOLS", "PROTECTED") if n in vars(calls) or n in vars(path_checks)],
}
from metaharness.permissions import Context, RuleSet, decide, oharness_call
ctx = Context(rules=RuleSet(), project_root="/p", home="/h", cwd="/p", mode="auto")
verdicts = [decide(oharness_call(tool, input, "/p"), ctx).behavior
            for tool, input in [("bash", {"command": "ls -la | grep x"}), ("bash", {"command": "sudo rm -rf /x"}),
                                ("todo", {}), ("write", {"path": "/p/.git/config", "content": ""})]]
print(json.dumps({"before": before, "verdicts": verdicts}))
"""


def test_fresh_process_loads_nothing_until_the_first_call_and_then_decides():
    out = subprocess.run([sys.executable, "-c", _FRESH], capture_output=True, text=True, timeout=60, check=True)
    result = json.loads(out.stdout)
    assert result["before"] == {"shell": False, "classifier": False, "tree_sitter": False, "tables": []}
    in_process = []
    from metaharness.permissions import Context, RuleSet, decide, oharness_call

    ctx = Context(rules=RuleSet(), project_root="/p", home="/h", cwd="/p", mode="auto")
    for tool, input in [("bash", {"command": "ls -la | grep x"}), ("bash", {"command": "sudo rm -rf /x"}),
                        ("todo", {}), ("write", {"path": "/p/.git/config", "content": ""})]:
        in_process.append(decide(oharness_call(tool, input, "/p"), ctx).behavior)
    assert result["verdicts"] == in_process
    assert in_process[0] == "allow" and in_process[1] != "allow" and in_process[3] != "allow"
