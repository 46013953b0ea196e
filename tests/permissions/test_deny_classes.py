"""Deny holds (issue 12): every failure class the adversarial corpus found, many spellings each.

Each class is a list of commands that reach a denied action. Under DENY (R's deny rules, plus
`Read(.env)`, `Read(~/.ssh/**)` and `Bash(git push*)` as deny) every command must be denied in
Bypass, and denied or asked in Manual — never allowed. Where the spec names the reason, the
case says which (`explain --json` reports the same reason: see test_explain_names_the_reason).

Classes f and g are about allow coverage rather than deny: an unsafe leading assignment on a
shell layer, or an interpreter running code that is not in a file, must never be covered by a
wildcard allow rule nor by the Auto routine table (the permission rule “unprovable and environment taint”, the permission rule “leading assignments”).
"""

from __future__ import annotations

import json

import pytest

from permissions_rules import R

DENY = {
    "allow": R["allow"],
    "deny": R["deny"] + ["Read(.env)", "Read(~/.ssh/**)", "Bash(git push*)"],
}

# a. Anything after a here-document operator on the same line; substitutions in unquoted bodies.
CLASS_A = [
    "cat <<EOF && rm -rf build\nhi\nEOF",
    "cat <<EOF || rm -rf build\nhi\nEOF",
    "cat <<EOF; rm -rf build\nhi\nEOF",
    "cat <<'EOF' && rm -rf build\nhi\nEOF",
    "cat <<-EOF && rm -rf build\n\thi\n\tEOF",
    "cat <<EOF | sh\nrm -rf build\nEOF",
    "cat <<'EOF' | bash\nrm -rf build\nEOF",
    "cat <<EOF | xargs rm -rf\nbuild\nEOF",
    "cat <<EOF > .env\nKEY=2\nEOF",
    "cat <<EOF >> .env\nKEY=2\nEOF",
    "cat <<EOF | tee .env\nKEY=2\nEOF",
    "cat <<EOF | tee -a .env.local\nKEY=2\nEOF",
    "cat <<EOF 2>/dev/null && rm -rf build\nhi\nEOF",
    "cat <<A <<B && rm -rf build\na\nA\nb\nB",
    "cat <<EOF & rm -rf build\nhi\nEOF",
    "cat <<EOF | grep x && git push\nhi\nEOF",
    "echo $(cat <<EOF\nhi\nEOF\n) && rm -rf build",
    "x=$(cat <<EOF\nhi\nEOF\n); rm -rf build",
    "echo \"$(cat <<EOF\nhi\nEOF\n)\"; rm -rf build",
    "echo $(cat <<EOF && rm -rf build\nhi\nEOF\n)",
    "cat <<EOF\n$(rm -rf build)\nEOF",
    "cat <<EOF\n`rm -rf build`\nEOF",
    "cat <<EOF\n${x:-$(rm -rf build)}\nEOF",
    "cat <<-EOF\n\t$(rm -rf build)\n\tEOF",
    "cat <<EOF\nprefix $(echo a; rm -rf build) suffix\nEOF",
    "cat <<A <<B\na\nA\n$(rm -rf build)\nB",
    "cat <<EOF\n$(cat .env)\nEOF",
    "cat <<EOF\n$(echo x > .env)\nEOF",
    "bash <<EOF\nrm -rf build\nEOF",
    "sh <<EOF && true\nrm -rf build\nEOF",
    "cat <<EOF >.env && true\nx\nEOF",
    "{ cat <<EOF; } && rm -rf build\nhi\nEOF",
    "if cat <<EOF; then rm -rf build; fi\nhi\nEOF",
    "cat <<EOF | sh -s\nrm -rf build\nEOF",
    "cat << EOF|tee .env\nx\nEOF",
    # a body whose first line starts with a backslash, which the grammar reads as words (make fuzz, issue 24)
    "bash <<'EOF'\n\\rm -rf build\nEOF", ": \"$(bash <<'EOF'\n\\rm -rf build\nEOF)\"", "sh <<EOF\n\\rm -rf build\nEOF",
    "x=$(sh <<'EOF'\n\\rm -rf build\nEOF)", "echo \"$(bash <<'EOF'\n\\git push\nEOF)\"",
    # … and what such a body runs or where it goes (quotes are ordinary in an unquoted body)
    "cat <<EOF\n\\x '$(rm -rf build)'\nEOF", "cat <<EOF\n\\x\n$(rm -rf build)\nEOF", "cat <<-EOF\n\\x `git push`\nEOF",
    "cat <<EOF > .env\n\\x\nEOF", "cat <<EOF\n\\x\nEOF\nrm -rf build", "<<EOF\n\\x '$(rm -rf build)'\nEOF",
]

# b. `time` in front of a group or a subshell.
CLASS_B = [
    "time { rm -rf build; }", "time -p { rm -rf build; }", "time ( rm -rf build )", "time -p ( rm -rf build )",
    "time ! rm -rf build", "time ! { rm -rf build; }", "time -p ! ( rm -rf build )", "time { true; rm -rf build; }",
    "time (cd src && rm -rf ../build)", "time { echo x > .env; }", "time ( cat .env )", "time -p { git push; }",
    "true && time { rm -rf build; }", "time { rm -rf build; } 2>/dev/null", "time -- rm -rf build",
    "time if true; then rm -rf build; fi", "time while rm -rf build; do break; done", "time -p rm -rf build",
    # `time` repeated before a compound command (make fuzz, issue 24)
    "time time if false; then :; else $'\\x72m' -rf build; fi", "time -p time { rm -rf build; }", "time time -p ( rm -rf build )",
]

# c. Substitutions nested where the walk used not to reach.
CLASS_C = [
    "echo ${v:-$(rm -rf build)}", "echo ${v:=$(rm -rf build)}", "echo ${v:+$(rm -rf build)}", "echo ${v:?$(rm -rf build)}",
    "echo ${v-`rm -rf build`}", "echo ${v#$(rm -rf build)}", "echo ${v##$(rm -rf build)}", "echo ${v%$(rm -rf build)}",
    "echo ${v%%$(rm -rf build)}", "echo ${v/$(rm -rf build)/x}", "echo ${v/x/$(rm -rf build)}", "echo ${v//x/`rm -rf build`}",
    "echo ${v^^$(rm -rf build)}", "echo ${v,,$(rm -rf build)}", "echo ${v:$(rm -rf build)}", "echo ${v:0:$(rm -rf build)}",
    "echo \"${v:-$(rm -rf build)}\"", "echo ${v[$(rm -rf build)]}", "echo ${#v[$(rm -rf build)]}",
    "a[$(rm -rf build)]=1", "a[`rm -rf build`]=x", "declare a[$(rm -rf build)]=1", "local a[$(rm -rf build)]=1 2>/dev/null",
    "a[$(rm -rf build)]=1 true", "export a[$(rm -rf build)]", "echo $(( $(rm -rf build) + 1 ))", "(( a[$(rm -rf build)] ))",
    "echo `echo \\`rm -rf build\\``", "echo `echo \\`echo \\\\\\`rm -rf build\\\\\\`\\``", "x=`echo \\`rm -rf build\\``",
    "echo ${v:-${w:-$(rm -rf build)}}", "echo ${v:-\"$(rm -rf build)\"}", "echo ${v/#$(rm -rf build)}", "echo ${v@Q} $(rm -rf build)",
    "echo ${v:-$(cat .env)}", "echo ${v:-$(echo x > .env)}", "echo ${v:-$(git push)}", "[[ ${v:-$(rm -rf build)} ]]",
    "for x in ${v:-$(rm -rf build)}; do :; done", "case ${v#$(rm -rf build)} in *) ;; esac",
]

# d. Tilde prefixes bash expands that are not `~`/`~user` (the cwd is the project root).
CLASS_D_BUILTIN = ["rm -rf ~+", "rm -r ~+", "rm -f ~+/", "rm -rf ~-", "rm -rf ~+0", "rm -rf ~-1", "rm -rf ~+2", "rm -rf ~1"]
CLASS_D = [
    "echo x > ~+/.env", "cat ~+/.env", "cp src/a.py ~+/.env", "echo x > ~-/.env", "echo {} > ~+/.oharness/settings.json",
    "tee ~+/.env < /dev/null", "cat ~+2/.env", "head ~-/.env", "echo x >> ~+0/.env.local",
]

# e. Write targets through options.
CLASS_E = [
    "cp -t .oharness src/a.py", "cp -rt .oharness src", "cp -at .oharness src/a.py", "cp -vt.oharness src/a.py",
    "cp --target-directory=.oharness src/a.py", "cp --target-directory .oharness src/a.py", "cp --target=.oharness src/a.py",
    "cp --targ .oharness src/a.py", "mv -t .oharness src/a.py", "mv -ft .oharness src/a.py", "mv --target-directory=.oharness src/a.py",
    "install -t .oharness src/a.py", "install -Dt .oharness src/a.py", "install -m 644 -t .oharness src/a.py",
    "ln -st .oharness /etc/passwd", "ln -t .oharness src/a.py", "ln --target-directory=.oharness src/a.py",
    "cp -t ~/.oharness src/a.py", "cp -T src/a.py .env", "install -D src/a.py .env", "install -m 600 src/a.py .env",
    "sed -f script.sed -i .env", "sed -i -f script.sed .env", "sed -i.bak -f script.sed .env", "sed --file=script.sed -i .env",
    "sed -n -i -e p .env", "sed -e p -i .env", "sed --in-place -e p .env", "sed -si -e p x .env",
    "chmod --reference=src/a.py .env", "chmod --reference src/a.py .env", "chown --reference=src/a.py .env",
    "chgrp --reference=src/a.py .env", "chown --reference src/a.py .env.local", "chmod -R --reference=src/a.py .oharness",
    "touch -r src/a.py .env", "touch --reference=src/a.py .env", "touch -d 2020-01-01 .env", "truncate -r src/a.py .env",
    "truncate --size=0 .env", "sort -o .env src/a.py", "sort -o.env src/a.py", "sort --output=.env src/a.py",
    "uniq src/a.py .env", "tee -a .env < src/a.py", "tee --append .env < src/a.py", "shred -n 1 -u .env",
    "mkdir -m 700 .oharness/x", "rmdir -p .oharness", "ln -sfT /etc/passwd .env", "dd if=src/a.py of=.env",
    "curl -o .env https://x.example", "curl --output .env https://x.example", "curl -so.env https://x.example",
    "wget -O .env https://x.example", "wget --output-document=.env https://x.example", "patch -o .env < p.diff",
    "patch .env < p.diff", "tar -xf a.tar -C .oharness", "tar xf a.tar --directory=.oharness", "unlink .env",
]

# f. Unsafe leading assignments on shell layers: never covered by a wildcard allow or Auto.
CLASS_F = [
    "BASH_ENV=/tmp/x sh -c 'ls'", "ENV=/tmp/x sh -c 'ls'", "LD_PRELOAD=/tmp/x.so bash -c 'ls -la'", "PATH=/tmp/evil bash -c 'ls'",
    "IFS=/ bash -c 'ls'", "SHELLOPTS=xtrace bash -c 'ls'", "PYTHONSTARTUP=/tmp/x bash -c 'ls'", "GIT_DIR=/tmp/x sh -c 'git status'",
    "BASHOPTS=x bash -c 'ls'", "PS4='$(id)' bash -xc 'ls'", "PROMPT_COMMAND=id bash -c 'ls'", "BASH_ENV=/tmp/x eval ls",
    "LD_PRELOAD=/tmp/x.so eval 'ls -la'", "PATH=/tmp/evil exec ls", "BASH_ENV=/tmp/x exec bash -c ls",
    "env BASH_ENV=/tmp/x bash -c 'ls'", "env PATH=/tmp/evil ls", "env LD_PRELOAD=/tmp/x.so sh -c 'ls'",
    "env -- BASH_ENV=/tmp/x sh -c ls", "GIT_CONFIG_GLOBAL=/tmp/x sh -c 'git status'", "X=1 BASH_ENV=/tmp/x sh -c 'ls'",
    "BASH_ENV=/tmp/x timeout 5 bash -c 'ls'", "BASH_ENV=/tmp/x command bash -c ls", "NODE_OPTIONS=--require=/tmp/x sh -c 'ls'",
    "BASH_ENV=/tmp/x sh -c 'echo ok'", "BASH_ENV=/tmp/x nice bash -c 'ls'",
]
F_ALLOW = ["Bash(ls *)", "Bash(ls)", "Bash(sh -c *)", "Bash(bash -c *)", "Bash(git status*)", "Bash(echo *)", "Bash(eval *)",
           "Bash(exec *)", "Bash(env *)", "Bash(timeout *)", "Bash(nice *)", "Bash(command *)"]

# g. Interpreters running code that is not in a file.
CLASS_G = [
    "python3 -Ic 'import os'", "python3 -Sc 'import os'", "python3 -BEc 'import os'", "python3 -IScprint(1)", "python3 -cprint(1)",
    "python3 -W ignore -c 'import os'", "python3 -X dev -c 'import os'", "python -u -c 'import os'", "python3.11 -Ic x",
    "python3 - <<EOF\nimport os\nEOF", "python3 <<EOF\nimport os\nEOF", "python3 <<'EOF'\nimport os\nEOF", "python3 <<< 'import os'",
    "python3 -I <<< 'import os'", "echo 'import os' | python3", "echo 'import os' | python3 -", "echo x | python3 -I",
    "python3 /dev/stdin <<< 'import os'", "python3 /dev/fd/0 <<< x", "python3 /proc/self/fd/0 < x.py", "python3 -u /dev/stdin",
    "python3 < x.py", "node -pe 1", "node -e 1", "node --eval=1", "node --print 1", "node --input-type=module -e 1",
    "node - <<< 'x'", "echo 1 | node", "node <<EOF\n1\nEOF", "node /dev/stdin <<< 1", "perl -ne 'print'", "perl -pe 1",
    "perl -lne 1", "perl -Mstrict -e 1", "perl <<< 'print 1'", "echo 1 | perl", "ruby -ne 1", "ruby -rjson -e 1",
    "ruby <<< 'puts 1'", "php -r 1", "php <<< '<?php 1;'", "lua -e 1", "echo 1 | lua -", "Rscript -e 1", "deno eval 1",
]
G_ALLOW = ["Bash(python3 *)", "Bash(python *)", "Bash(python3.11 *)", "Bash(node *)", "Bash(perl *)", "Bash(ruby *)",
           "Bash(php *)", "Bash(lua *)", "Bash(Rscript *)", "Bash(deno *)", "Bash(echo *)", "Bash(cat *)"]

# h. Another spelling of a denied action.
CLASS_H = [
    "rm --recur --force build", "rm --rec --forc build", "rm --recursiv -f build", "rm -f --recu build", "rm --r --f build",
    "eval -- 'rm -rf build'", "eval -- rm -rf build", "eval -- -- 'rm -rf build'",
    "sh /dev/stdin <<< 'rm -rf build'", "bash /dev/stdin <<< 'rm -rf build'", "echo 'rm -rf build' | bash /dev/stdin",
    "bash /proc/self/fd/0 <<< 'rm -rf build'", "bash /dev/fd/0 < x", "sh - <<< 'rm -rf build'", "bash -s <<< 'rm -rf build'",
    "echo 'rm -rf build' | sh /dev/stdin", "bash -- /dev/stdin <<< 'rm -rf build'", "bash -x /dev/stdin < x.sh",
    "git -c alias.x=push x", "git -c alias.x=push x origin main", "git -c alias.x='push --force' x", "git -c 'alias.x=!rm -rf build' x",
    "git -c alias.x='!git push' x", "git -c alias.p=push -C . p", "git -calias.x=push x", "git --config-env=alias.x=V x",
    "git -c alias.X=push X", "git -c Alias.x=push x", "git -c alias.x=\"$V\" x",
    "ln -s .env x && echo hi > x", "ln -sf .env x; echo hi >> x", "ln .env x && echo hi > x", "ln -s .oharness o && echo {} > o/settings.json",
    "ln -s ~/.oharness h; echo x > h/settings.json", "ln -s .env x; cat x", "cp -s .env x && echo hi > x", "cp -l .env x; echo > x",
    "ln -s link-env y && echo x > y", "ln -sT .env z && tee z < /dev/null",
    "git checkout -p .env", "git checkout -p -- .env", "git checkout HEAD .env", "git checkout HEAD -- .env", "git checkout .env",
    "git restore .env", "git restore -s HEAD .env", "git restore --source=HEAD~1 .env", "git restore -p .env", "git restore --staged --worktree .env",
    "git checkout main -- .oharness/settings.json", "git checkout-index -f .env", "git checkout --patch .env",
    "diff -r ~/.ssh /tmp/x", "diff -ru keys /tmp/x", "diff --recursive ~/.ssh /tmp", "grep -r x ~/.ssh", "grep -R x keys", "grep -rl x ~",
    "grep --recursive x ~/.ssh", "tar c ~/.ssh", "tar cf - ~/.ssh", "tar -czf /tmp/x.tgz keys", "tar czf /tmp/x.tgz ~/.ssh",
    "tar --create -f /tmp/x.tar ~/.ssh", "cp -r ~/.ssh /tmp/x", "cp -a keys /tmp/x", "zip -r /tmp/z.zip ~/.ssh", "rsync -a ~/.ssh /tmp/x",
    "rg x ~/.ssh", "ag x ~/.ssh", "tar c .", "grep -r KEY .", "diff -r . /tmp/x",
    # a cd through `command` or `builtin` moves the directory as a plain one does (make fuzz, issue 24)
    "command cd src && cat ../.env", "builtin cd src; cat ../.env", "command cd src && cd .. && cat .env",
]

# i. Programs that run their arguments as a command.
CLASS_I = [
    "strace rm -rf build", "strace -f -o /tmp/log rm -rf build", "strace -e trace=file rm -rf build", "strace -- rm -rf build",
    "ltrace rm -rf build", "ltrace -f -o /tmp/l rm -rf build", "fakeroot rm -rf build", "fakeroot -- rm -rf build",
    "fakeroot -u rm -rf build", "parallel rm -rf ::: build", "parallel -j2 'rm -rf {}' ::: build", "echo build | parallel rm -rf",
    "parallel --halt now,fail=1 rm -rf ::: build", "chroot / rm -rf build", "chroot --userspec=1:1 / rm -rf build",
    "nsenter -t 1 -m rm -rf build", "nsenter --target 1 --mount -- rm -rf build", "unshare -r rm -rf build",
    "unshare -Urmn --fork rm -rf build", "unshare --user --map-root-user rm -rf build", "systemd-run rm -rf build",
    "systemd-run --user --scope rm -rf build", "systemd-run -p Nice=5 --wait rm -rf build", "sg staff -c 'rm -rf build'",
    "sg staff 'rm -rf build'", "sg - staff -c 'rm -rf build'", "su -c 'rm -rf build'", "su -l root -c 'rm -rf build'",
    "su root --command='rm -rf build'", "runuser -u x -- rm -rf build", "runuser -l x -c 'rm -rf build'",
    "setsid rm -rf build", "setsid -f rm -rf build", "setsid --wait rm -rf build", "stdbuf -oL rm -rf build",
    "stdbuf -o 0 -e 0 rm -rf build", "ionice -c 3 rm -rf build", "ionice -c3 -n7 rm -rf build", "ionice -t rm -rf build",
    "taskset 0x1 rm -rf build", "taskset -c 0 rm -rf build", "taskset -c 0,1 rm -rf build", "taskset --cpu-list 0 rm -rf build",
    "flock /tmp/l rm -rf build", "flock -n /tmp/l rm -rf build", "flock -x -w 5 /tmp/l rm -rf build", "flock /tmp/l -c 'rm -rf build'",
    "watch rm -rf build", "watch -n 1 rm -rf build", "watch -n1 -d 'rm -rf build'", "watch -t -x rm -rf build", "watch --interval=1 rm -rf build",
    "script -c 'rm -rf build'", "script -qc 'rm -rf build' /dev/null", "script -q -c 'rm -rf build' /dev/null",
    "script --command 'rm -rf build'", "at now <<< 'rm -rf build'", "echo 'rm -rf build' | at now", "at now <<EOF\nrm -rf build\nEOF",
    "batch <<< 'rm -rf build'", "echo 'rm -rf build' | batch", "at -m now + 1 minute <<< 'rm -rf build'", "at now",
    "ssh host rm -rf build", "ssh host 'rm -rf build'", "ssh -p 22 host rm -rf build", "ssh -o StrictHostKeyChecking=no host 'rm -rf build'",
    "ssh host -- rm -rf build", "ssh -t user@host 'cd x && rm -rf build'", "ssh host \"$CMD\"", "ssh host git push",
    "nice -n 5 strace -f rm -rf build", "timeout 5 fakeroot rm -rf build", "sudo strace rm -rf build",
    "strace cat .env", "fakeroot tee .env < /dev/null", "chroot / cp src/a.py .env", "unshare -r git push",
    "frobnicate-wrapper rm -rf build", "mywrap --opt x rm -rf build", "caffeinate rm -rf build", "firejail rm -rf build",
    "valgrind rm -rf build", "xvfb-run rm -rf build", "torsocks git push", "proxychains git push origin",
    "doas -u root rm -rf build", "pkexec --user root rm -rf build", "sudo -s -- rm -rf build", "sudo -iu root rm -rf build",
]


@pytest.fixture(scope="module")
def ctxs(world_session):
    import os
    os.environ["HOME"] = world_session.home
    s = world_session.setup(project=DENY)
    return {"bypass": world_session.ctx(s, mode="bypass"), "manual": world_session.ctx(s, mode="manual"),
            "bypass-full": world_session.ctx(s, mode="bypass", ws="full-access")}


def _check_denied(world, ctxs, command):
    for name, ctx in ctxs.items():
        v = world.decide(f"Bash({command})", ctx)
        if name.startswith("bypass"):
            assert v.behavior == "deny", (name, command, v.to_json())
        else:
            assert v.behavior in ("deny", "ask"), (name, command, v.to_json())


DENIED = [(k, c) for k, cases in (("a", CLASS_A), ("b", CLASS_B), ("c", CLASS_C), ("d", CLASS_D), ("e", CLASS_E),
                                   ("h", CLASS_H), ("i", CLASS_I)) for c in cases]


@pytest.mark.parametrize("klass,command", DENIED, ids=[f"{k}:{c[:70]}" for k, c in DENIED])
def test_denied_in_bypass_never_allowed_in_manual(world_session, ctxs, klass, command):
    _check_denied(world_session, ctxs, command)


@pytest.mark.parametrize("command", CLASS_D_BUILTIN)
def test_d_tilde_prefixes_builtin_rules_only(world_session, command):
    # With no settings at all, `~+` (the working directory: the project root) is caught by the
    # built-in rules, as a possible match since bash expands it at run time.
    s = world_session.setup(project={})
    try:
        v = world_session.decide(f"Bash({command})", world_session.ctx(s, mode="bypass", ws="full-access"))
        assert v.behavior == "deny", v.to_json()
    finally:
        world_session.setup(project=DENY)


ASKED = [("f", c, F_ALLOW) for c in CLASS_F] + [("g", c, G_ALLOW) for c in CLASS_G]


@pytest.mark.parametrize("klass,command,allow", ASKED, ids=[f"{k}:{c[:70]}" for k, c, _ in ASKED])
def test_never_covered_by_a_wildcard_allow_or_auto(world_session, klass, command, allow):
    s = world_session.setup(project={"allow": allow})
    try:
        for mode in ("manual", "auto", "accept-edits"):
            v = world_session.decide(f"Bash({command})", world_session.ctx(s, mode=mode))
            assert v.behavior == "ask", (mode, command, v.to_json())
    finally:
        world_session.setup(project=DENY)


def test_g_exact_rule_still_covers_interpreter_code(world_session):
    s = world_session.setup(project={"allow": ["Bash(python3 -Ic 'import os')"]})
    try:
        v = world_session.decide("Bash(python3 -Ic 'import os')", world_session.ctx(s, mode="manual"))
        assert (v.behavior, v.reason) == ("allow", "allow-rule"), v.to_json()
    finally:
        world_session.setup(project=DENY)


# The reason is the spec's where it names one.
REASONS = [
    ("cat <<EOF && rm -rf build\nhi\nEOF", "deny-rule"),
    ("time { rm -rf build; }", "deny-rule"),
    ("echo ${v%%$(rm -rf build)}", "deny-rule"),
    ("a[$(rm -rf build)]=1", "deny-rule"),
    ("echo x > ~+/.env", "maybe-deny"),
    ("cp -t .oharness src/a.py", "deny-rule"),
    ("chmod --reference=src/a.py .env", "deny-rule"),
    ("sed -i -f script.sed .env", "deny-rule"),
    ("rm --recur --force build", "deny-rule"),
    ("eval -- 'rm -rf build'", "deny-rule"),
    ("bash /dev/stdin <<< 'rm -rf build'", "deny-rule"),
    ("echo 'rm -rf build' | bash /dev/stdin", "maybe-deny"),
    ("git -c alias.x=push x", "deny-rule"),
    ("ln -s .env x && echo hi > x", "deny-rule"),
    ("git checkout -p .env", "deny-rule"),
    ("strace -f -o /tmp/log rm -rf build", "deny-rule"),
    ("parallel rm -rf ::: build", "deny-rule"),
    ("ssh host rm -rf build", "deny-rule"),
    ("frobnicate-wrapper rm -rf build", "maybe-deny"),
    ("python3 <<< 'import os'", "bypass"),
]


@pytest.mark.parametrize("command,reason", REASONS)
def test_explain_names_the_reason(world_session, ctxs, command, reason):
    v = world_session.decide(f"Bash({command})", ctxs["bypass"])
    assert v.reason == reason, v.to_json()


def test_explain_json_names_maybe_deny(world_session, ctxs, tmp_path):
    import subprocess
    import sys
    world_session.setup(project=DENY)
    out = subprocess.run(
        [sys.executable, "-m", "oharness", "permissions", "explain", "Bash(frobnicate-wrapper rm -rf build)",
         "--mode", "bypass", "--json"],
        cwd=world_session.root, capture_output=True, text=True, env={**__import__("os").environ, "HOME": world_session.home})
    data = json.loads(out.stdout)
    assert data["verdict"] == "deny" and data["reason"] == "maybe-deny", out.stdout + out.stderr
