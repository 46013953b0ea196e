"""Decision time for a compound shell command against 1,000 rules (permissions.md issue 4, item 6).

Prints p50/p99 of `decide()` beside a bare tree-sitter-bash parse of the same command, measured in
the same run, and their ratio: for a call decided before in the session (the decision kept, its
filesystem reads checked again — what a run's repeated `git status` meets), for a command string
whose analysis is kept but whose decision is not (the same string in another call or context),
and for the first sight of a command string (both memos cleared before each decision); also the floor of any Python analysis over tree-sitter (the parse plus
a visit of every node that reads its type, nothing else) and the shell analysis alone. Figures only;
no assertion. The first line names the engine build measured: pure Python (the source, what the
editable install runs) or compiled (`make compiled`, then PYTHONPATH=build/compiled).
Run: .venv/bin/python bench/bench_permissions.py
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time

import tree_sitter
import tree_sitter_bash

from metaharness.permissions import Context, RuleSet, decide, oharness_call, parse_rule
from metaharness.permissions.build import engine_build
from metaharness.permissions.decision import forget_decisions
from metaharness.permissions.engine import builtin_rules
from metaharness.permissions.shell import analyse
from metaharness.permissions.subjects import analysis_of

COMMAND = ("cd src && git status --short && npm run test -- --watch=false 2>&1 | tee /tmp/test.log; "
           "FOO=1 timeout 60 make -j4 build > build.log && echo \"done $(date +%s)\" || "
           "{ find . -name '*.o' -exec rm -f {} + ; git push origin HEAD; }")
N = 3000


def rules_1000(root: str, home: str) -> RuleSet:
    rs = RuleSet()
    for r in builtin_rules(root, home):
        rs.add(r)
    programs = ["git", "npm", "docker", "kubectl", "cargo", "python", "node", "make", "terraform", "aws"]
    i = 0
    while len(rs.all()) < 1000:
        p = programs[i % len(programs)]
        kind = i % 10
        if kind < 6:
            rs.add(parse_rule(f"Bash({p} sub{i} --flag{i % 7} *)", ("deny", "ask", "allow")[i % 3], "project"))
        elif kind < 8:
            rs.add(parse_rule(f"{('Read', 'Write')[i % 2]}(dir{i}/**)", ("deny", "ask", "allow")[i % 3], "project"))
        else:
            rs.add(parse_rule(f"mcp__srv{i}__tool_*", "allow", "project"))
        i += 1
    rs.add(parse_rule("Bash(rm -rf *)", "deny", "project"))
    rs.add(parse_rule("Bash(git push*)", "ask", "project"))
    return rs


def visit(node) -> None:
    """The least a Python analysis must do: touch every node once."""
    node.type
    for child in node.children:
        visit(child)


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> None:
    base = tempfile.mkdtemp(prefix="ohbench-", dir="/var/tmp")
    root, home = os.path.join(base, "proj"), os.path.join(base, "home")
    os.makedirs(os.path.join(root, "src"))
    os.makedirs(home)
    rules = rules_1000(root, home)
    ctx = Context(rules=rules, project_root=root, home=home, mode="auto")
    call = oharness_call("bash", {"command": COMMAND}, root)
    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))
    source = COMMAND.encode()

    for _ in range(200):  # warm caches (compiled patterns) and the allocator
        decide(call, ctx)
        parser.parse(source)
    parse_t, floor_t, analyse_t, decide_t, first_t, kept_t = [], [], [], [], [], []
    for _ in range(N):
        t = time.perf_counter_ns()
        visit(parser.parse(source).root_node)
        floor_t.append((time.perf_counter_ns() - t) / 1000)
        t0 = time.perf_counter_ns()
        parser.parse(source)
        t1 = time.perf_counter_ns()
        analyse(COMMAND, root, home)  # the shell analysis alone (parse + walk), no rules
        t2 = time.perf_counter_ns()
        v = decide(call, ctx)
        t3 = time.perf_counter_ns()
        forget_decisions(ctx)
        t4 = time.perf_counter_ns()
        decide(call, ctx)
        t5 = time.perf_counter_ns()
        kept_t.append((t5 - t4) / 1000)
        analysis_of.cache_clear()
        forget_decisions(ctx)
        t6 = time.perf_counter_ns()
        decide(call, ctx)
        first_t.append((time.perf_counter_ns() - t6) / 1000)
        parse_t.append((t1 - t0) / 1000)
        analyse_t.append((t2 - t1) / 1000)
        decide_t.append((t3 - t2) / 1000)
    print(f"engine build: {engine_build()}")
    print(f"rules: {len(rules.all())}   command: {len(COMMAND)} chars, "
          f"{sum(1 for s in v.subjects if s.kind == 'cmd')} cmd subjects, {len(v.subjects)} subjects")
    print(f"verdict: {v.behavior} [{v.reason}{'; ' + v.rule if v.rule else ''}]")
    print(f"bare tree-sitter parse   p50 {statistics.median(parse_t):8.1f} µs   p99 {pct(parse_t, 0.99):8.1f} µs")
    print(f"parse + visit every node p50 {statistics.median(floor_t):8.1f} µs   p99 {pct(floor_t, 0.99):8.1f} µs"
          "   (the floor of a Python walk)")
    print(f"shell analysis alone     p50 {statistics.median(analyse_t):8.1f} µs   p99 {pct(analyse_t, 0.99):8.1f} µs")
    print(f"decide(), first sight    p50 {statistics.median(first_t):8.1f} µs   p99 {pct(first_t, 0.99):8.1f} µs"
          "   (memos cleared: parse, walk, every rule)")
    print(f"decide(), analysis kept  p50 {statistics.median(kept_t):8.1f} µs   p99 {pct(kept_t, 0.99):8.1f} µs"
          "   (the decision made again from the kept analysis)")
    print(f"decide(), seen before    p50 {statistics.median(decide_t):8.1f} µs   p99 {pct(decide_t, 0.99):8.1f} µs"
          "   (1,000 rules; the decision kept, its filesystem reads checked)")
    print(f"ratio first sight/parse  p50 {statistics.median(first_t) / statistics.median(parse_t):8.1f}x     "
          f"p99 {pct(first_t, 0.99) / pct(parse_t, 0.99):8.1f}x")
    print(f"ratio analysis kept/parse p50 {statistics.median(kept_t) / statistics.median(parse_t):7.1f}x     "
          f"p99 {pct(kept_t, 0.99) / pct(parse_t, 0.99):8.1f}x")
    print(f"ratio seen before/parse  p50 {statistics.median(decide_t) / statistics.median(parse_t):8.1f}x     "
          f"p99 {pct(decide_t, 0.99) / pct(parse_t, 0.99):8.1f}x   (goal p50 <= 2x, p99 <= 3x)")
    print(f"target p99 < 200 µs: {'met' if pct(decide_t, 0.99) < 200 else 'NOT met'}")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
