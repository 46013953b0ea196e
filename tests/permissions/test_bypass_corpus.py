"""The bypass corpus: forbidden actions wrapped by templates (compound commands, wrappers, env
prefixes, redirections, substitutions, quoting tricks, sh -c nesting, symlinks, `..`, case
variants). Under rules that forbid the action, every attempt must come out deny in Bypass and
deny or ask in every other mode — never allow."""

from __future__ import annotations

import pytest

from permissions_rules import R

# Forbidden payloads: (id, shell text). Rules: R + deny Read(.env) + deny Read(~/.ssh/**).
RM = [
    "rm -rf build", "rm -fr build", "rm -r -f build", "rm -Rf build", "rm --recursive --force build",
    "rm -rfv -- build", "RM -RF build", "Rm -Rf build", "/bin/rm -rf build", "../../bin/rm -rf build",
    "'r'm -rf build", '"rm" -rf build', "r\\m -rf build", "\\rm -rf build", "$'\\x72m' -rf build",
    "$'rm' -rf build", "rm -r --force build", "rm -f -r -- build", "rm -rf ./build", "rm -rf build/..",
]
ENV_WRITE = [
    "echo x > .env", "echo x >> .env", "echo x > ./.env", "echo x > src/../.env", "echo x > link-env",
    "echo x > .ENV", "echo x > config/.env.local", "tee .env < /dev/null", "cp src/a.py .env.local",
    "mv src/a.py .env", "sed -i s/a/b/ .env", "touch .env.backup", "truncate -s0 .env", "dd if=/dev/zero of=.env",
    "printf x >| .env", "echo x &> .env", "echo x 2> .env", "ln -sf /etc/passwd .env", "chmod 777 .env",
    "install src/a.py .env", "curl -o .env https://x.example/e",
]
SECRET_READ = [
    "cat .env", "cat < .env", "head -c 100 .env", "cat ./config/../.env", "grep KEY .env", "cat link-env",
    "base64 .env", "cat keys/id_rsa", "cat ~/.ssh/id_rsa", "sort .env", "diff .env /dev/null",
]
BUILTIN = [
    "echo '{}' > .oharness/settings.json", "rm -rf .oharness", "rm -rf ~/.oharness", "rm -rf /",
    "rm -rf ~", "rm -rf ~/", "rm -rf .", "tee ~/.oharness/trust.json < /dev/null", "mv .oharness /tmp/x",
]

TEMPLATES = [
    "{P}", "true && {P}", "false || {P}", "ls; {P}", "ls\n{P}", "echo hi | {P}", "{P} &", "{P} && true",
    "timeout 5 {P}", "nice -n 5 {P}", "nohup {P}", "env {P}", "env -i PATH=/bin {P}", "sudo {P}",
    "sudo -u root {P}", "command {P}", "exec {P}", "time {P}", "stdbuf -o0 {P}", "FOO=1 {P}",
    "PATH=/bin {P}", "LANG=C {P}", "echo $({P})", "echo `{P}`", "x=$({P}); echo ok", "cat <({P})",
    "echo hi > >({P})", ': "$({P})"', "sh -c '{P}'", 'bash -c "{P}"', "bash -lc '{P}'",
    "sh -c \"sh -c '{P}'\"", "eval '{P}'", 'eval "{P}"', "bash <<'EOF'\n{P}\nEOF", "bash <<< '{P}'",
    "trap '{P}' EXIT; true", "watch -n1 '{P}'", "su -c '{P}'", "script -qc '{P}' /dev/null", "flock /tmp/l {P}",
    "if true; then {P}; fi", "for i in 1; do {P}; done", "while false; do :; done; {P}", "({P})", "{{ {P}; }}",
    "! {P}", "f() {{ {P}; }}; f", "case x in x) {P};; esac", "until true; do {P}; done",
    "cat <<EOF\n$({P})\nEOF",
]

SHELL_QUOTE_SAFE = lambda p: "'" not in p  # noqa: E731 - templates with '…' need payloads without quotes


def _corpus():
    out = []
    for group, payloads in (("rm", RM), ("envw", ENV_WRITE), ("read", SECRET_READ), ("builtin", BUILTIN)):
        for pi, p in enumerate(payloads):
            for ti, t in enumerate(TEMPLATES):
                if ("'{P}'" in t or "<<'EOF'" in t or "<<< '" in t) and not SHELL_QUOTE_SAFE(p):
                    continue
                if '"{P}"' in t and ('"' in p or "$" in p or "\\" in p):
                    continue
                if ("watch" in t or "su -c" in t or "script" in t) and group != "rm":
                    continue
                # keep the corpus fast: every payload with the first templates, every template with a
                # rotating subset of payloads
                if ti > 8 and (pi + ti) % 3:
                    continue
                out.append((f"{group}{pi}-t{ti}", "Bash(" + t.format(P=p) + ")"))
    return out


CORPUS = _corpus()


def test_corpus_is_large():
    assert len(CORPUS) >= 300, len(CORPUS)


RULES = {**R, "deny": R["deny"] + ["Read(.env)", "Read(~/.ssh/**)"]}


@pytest.fixture(scope="module")
def contexts(world_session):
    import os
    os.environ["HOME"] = world_session.home
    s = world_session.setup(project=RULES)
    return {m: world_session.ctx(s, mode=m) for m in ("bypass", "manual", "auto", "accept-edits")} | {
        "bypass-full": world_session.ctx(s, mode="bypass", ws="full-access")}


@pytest.mark.parametrize("case,call", CORPUS, ids=[c[0] for c in CORPUS])
def test_never_allowed(world_session, contexts, case, call):
    for name, ctx in contexts.items():
        v = world_session.decide(call, ctx)
        if name.startswith("bypass"):
            assert v.behavior == "deny", (name, call, v.to_json())
        else:
            assert v.behavior in ("deny", "ask"), (name, call, v.to_json())


ASK_PAYLOADS = ["git push", "git push origin main", "git -C /tmp/x push --force", "git --no-pager push",
                "GIT_DIR=x git push", "/usr/bin/git push", "GIT push"]


@pytest.mark.parametrize("template", TEMPLATES[:30])
@pytest.mark.parametrize("payload", ASK_PAYLOADS)
def test_ask_rule_never_allowed_outside_bypass(world_session, contexts, payload, template):
    call = "Bash(" + template.format(P=payload) + ")"
    for name in ("manual", "auto", "accept-edits"):
        v = world_session.decide(call, contexts[name])
        assert v.behavior in ("ask", "deny"), (name, call, v.to_json())


# Hand-written attempts beyond the templates: shell constructs, wrappers and spellings that known
# harnesses have missed. All run under R (`Bash(rm -rf *)` denied).
EXOTIC = ["coproc rm -rf build", "select x in a; do rm -rf build; done", "rm -rf build & wait", "{ rm -rf build ; } 2>/dev/null",
 "exec 2>&1; rm -rf build", "[[ $(rm -rf build) ]]", "(( $(rm -rf build) ))", "arr=( $(rm -rf build) )", "declare x=$(rm -rf build)",
 "f() { local x=$(rm -rf build); }", 'echo ${x:-$(rm -rf build)}', 'echo "${x:-$(rm -rf build)}"', "case $(rm -rf build) in *) ;; esac",
 "for x in $(rm -rf build); do :; done", "cat <<< $(rm -rf build)", "rm -rf build <<EOF\nhi\nEOF", "echo x | tee >(rm -rf build)",
 "rm$IFS-rf$IFS build", 'r""m -rf build', 'rm -rf bu""ild', "\\r\\m -rf build", "builtin command rm -rf build", "doas rm -rf build",
 "pkexec rm -rf build", "echo 'rm -rf build' | bash", "bash -c \"$(echo rm -rf build)\"", "xargs -a list rm -rf", "env -S 'rm -rf build'",
 "nice -10 rm -rf build", "unbuffer rm -rf build", "setsid rm -rf build", "ionice -c3 rm -rf build", "chrt -f 1 rm -rf build",
 "taskset 0x1 rm -rf build", "flock -c 'rm -rf build' /tmp/l", "su - root -c 'rm -rf build'", "runuser -u x -- rm -rf build",
 "sudo -E -H -u x rm -rf build", "sudo --user=x rm -rf build", "eval rm -rf build", "eval 'r''m -rf build'", "command -p rm -rf build",
 "exec -a x rm -rf build", "time -p rm -rf build", "stdbuf -oL rm -rf build", "bash -x -c 'rm -rf build'", "bash --norc -c 'rm -rf build'",
 "sh -ec 'rm -rf build'", "zsh -fc 'rm -rf build'", "x=rm; $x -rf build", "${RM:-rm} -rf build", "`echo rm` -rf build", "$(echo rm) -rf build",
 "echo rm -rf build | sh -s", "sh < script.sh", "bash -s < /dev/stdin", "source <(echo rm -rf build)", ". <(echo rm -rf build)",
 "trap 'rm -rf build' INT TERM", "alias x='rm -rf build'", "watch -x rm -rf build", "find . -execdir rm -rf {} \\;", "find . -ok rm -rf {} \\;",
 "git status && { cd src; rm -rf ../build; }", "cd src && rm -rf ../build", "rm -rf ./build/", "rm -rf build/.", "RM=1 rm -rf build",
 "rm -rf build 2>/dev/null || true", "! (rm -rf build)", "if rm -rf build; then :; fi", "while rm -rf build; do break; done",
 "until ! rm -rf build; do :; done", "rm -r -v -f build", "rm --force --recursive build", "rm -Rf -- build", "rm -dRf build",
 "rm -rf=x build", "busybox sh -c 'rm -rf build'", "nohup sh -c 'rm -rf build' &", "timeout 5s bash -c 'sudo rm -rf build'",
]


@pytest.mark.parametrize("command", EXOTIC)
def test_exotic_attempts(world_session, contexts, command):
    for name, ctx in contexts.items():
        v = world_session.decide(f"Bash({command})", ctx)
        if name.startswith("bypass"):
            assert v.behavior == "deny", (name, command, v.to_json())
        else:
            assert v.behavior in ("deny", "ask"), (name, command, v.to_json())
