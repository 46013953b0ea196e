"""Table tests for every data file (the permission rule “implementation layout”): readonly, wrappers, options,
filecommands, routine, risky, protected, inert."""

from __future__ import annotations

import pytest

from metaharness.permissions import classifier, parse_rule
from metaharness.permissions.calls import INERT_TOOLS
from metaharness.permissions.rules import MATCH, NO, shell_broad_match
from metaharness.permissions.shell import FILECOMMANDS, WRAPPERS, analyse

CWD, HOME = "/w/proj", "/home/u"


def cmds(text):
    return analyse(text, CWD, HOME).cmds


# readonly.toml ---------------------------------------------------------------------------
READ_ONLY = ["ls -la", "cat a", "head -n 3 a", "tail a", "wc -l a", "echo hi", "printf x", "pwd", "cd src", "grep x a",
             "egrep x a", "fgrep x a", "rg x", "find . -name x", "which ls", "type ls", "file a", "stat a", "du -sh",
             "df", "diff a b", "cmp a b", "sort a", "uniq a", "cut -f1 a", "tr a b", "basename a", "dirname a",
             "realpath a", "readlink a", "date", "printenv", "id", "whoami", "uname -a", "true", "false", "test -f a",
             "[ -f a ]", "tree", "jq . a", "ps", "command -v ls", "timeout 5 ls", "git status", "git log",
             "git diff", "git show", "git rev-parse HEAD", "git ls-files", "git blame a", "git describe", "git grep x",
             "git branch", "git branch -a", "git remote -v"]
NOT_READ_ONLY = ["find . -delete", "find . -exec rm {} ;", "sort -o out a", "uniq a b", "date -s now", "printf -v x y",
                 "tail -f log", "git push", "git -c core.pager=x log", "git branch newname", "git remote add o u",
                 "rm a", "./ls", "sudo ls", "cd $X", "git --exec-path=/x status", "git log --output=f", "git diff --ext-diff"]


@pytest.mark.parametrize("text", READ_ONLY)
def test_readonly_listed(text):
    assert all(classifier.is_read_only(c, trusted=True) for c in cmds(text)), text


@pytest.mark.parametrize("text", NOT_READ_ONLY)
def test_readonly_refused(text):
    assert not all(classifier.is_read_only(c, trusted=True) for c in cmds(text)), text


def test_git_read_only_only_when_trusted():
    assert not classifier.is_read_only(cmds("git status")[0], trusted=False)


# wrappers.toml -----------------------------------------------------------------------------
WRAPPED = {
    "timeout": "timeout -s KILL 5 {P}", "time": "time -p {P}", "nice": "nice -n 10 {P}", "nohup": "nohup {P}",
    "stdbuf": "stdbuf -o L {P}", "command": "command -p {P}", "builtin": "builtin {P}", "noglob": "noglob {P}",
    "exec": "exec -a x {P}", "env": "env -u X A=1 {P}", "sh": "sh -c '{P}'", "bash": "bash -ec '{P}'",
    "zsh": "zsh -c '{P}'", "dash": "dash -c '{P}'", "ksh": "ksh -c '{P}'", "eval": "eval '{P}'",
    "sudo": "sudo -u root -E {P}", "doas": "doas -u root {P}", "pkexec": "pkexec --user root {P}",
    "runuser": "runuser -u root -- {P}", "su": "su -c '{P}' root", "xargs": "xargs -n1 -I{{}} {P}",
    "find": "find . -exec {P} ;", "watch": "watch -n 1 '{P}'", "script": "script -q -c '{P}' /dev/null",
    "flock": "flock -w 3 /tmp/lock {P}", "setsid": "setsid -f {P}", "ionice": "ionice -c 3 {P}",
    "chrt": "chrt -f 10 {P}", "taskset": "taskset -c 0 {P}", "unbuffer": "unbuffer {P}", "busybox": "busybox {P}",
    "trap": "trap '{P}' EXIT", "alias": "alias x='{P}'",
    "coproc": "coproc {P}",
    "strace": "strace -f -o /tmp/log {P}", "ltrace": "ltrace -o /tmp/l {P}", "fakeroot": "fakeroot -- {P}",
    "parallel": "parallel -j2 {P} ::: x", "chroot": "chroot --userspec=1:1 / {P}", "nsenter": "nsenter -t 1 -m {P}",
    "unshare": "unshare -Urmn --fork {P}", "systemd-run": "systemd-run -p Nice=5 --user {P}", "sg": "sg staff -c '{P}'",
    "at": "at now <<< '{P}'", "batch": "batch <<< '{P}'", "ssh": "ssh -p 22 host {P}", "git": "git -c 'alias.x=!{P}' x",
    "firejail": "firejail {P}", "torsocks": "torsocks -P 9050 {P}", "proxychains": "proxychains -f x.conf {P}",
    "proxychains4": "proxychains4 {P}", "valgrind": "valgrind {P}", "xvfb-run": "xvfb-run -a {P}",
    # issue 24: the POSIX shells, the shells that are not POSIX (opaque, words still analysed)
    # and the programs that hand a string to a shell.
    "ash": "ash -c '{P}'", "mksh": "mksh -ec '{P}'", "lksh": "lksh -c '{P}'", "posh": "posh -s <<< '{P}'",
    "yash": "yash -- /dev/stdin <<< '{P}'", "oksh": "oksh -c '{P}'", "loksh": "loksh -c '{P}'",
    "pdksh": "pdksh -c '{P}'", "bosh": "bosh -c '{P}'", "osh": "osh -c '{P}'", "rbash": "rbash -c '{P}'",
    "busybox-sh": "busybox-sh -c '{P}'", "ksh93": "ksh93 -c '{P}'", "toybox": "toybox sh -c '{P}'",
    "fish": "fish --command='{P}'", "tcsh": "tcsh -fc '{P}'", "csh": "csh -c '{P}'", "nu": "nu -c '{P}'",
    "elvish": "elvish -c '{P}'", "xonsh": "xonsh -c '{P}'", "pwsh": "pwsh -Command '{P}'", "rc": "rc -c '{P}'",
    "es": "es -c '{P}'", "ion": "ion -c '{P}'", "expect": "expect -c 'exec {P}'",
    "nix-shell": "nix-shell -p hello --run '{P}'", "entr": "entr -s '{P}'", "hush": "hush -c '{P}'",
    "man": "man -P '{P}' ls",
    # programs that are not wrappers but run an option's value: by a shell, or in a language of
    # their own that can reach one (opaque, words still analysed)
    "tar": "tar -cf /tmp/x.tar --checkpoint=1 --checkpoint-action=exec='{P}' a", "rsync": "rsync -e '{P}' h:x .",
    "zip": "zip -T -TT '{P}' z.zip a", "vim": "vim -es -c '!{P}' -c q", "vi": "vi +'!{P}'", "nvim": "nvim --cmd '!{P}'",
    "ex": "ex -s -c '!{P}'", "view": "view -c '!{P}' a", "vimdiff": "vimdiff -c '!{P}' a b", "less": "less +'!{P}' a",
    "gdb": "gdb -batch -ex 'shell {P}'", "emacs": "emacs --batch --eval '{P}'", "split": "split --filter='{P}' a",
    # builtins that change what a later name runs: the call is opaque, the rest still analysed
    "hash": "hash -p /usr/bin/env x; {P}", "enable": "enable -f /tmp/l.so x; {P}",
}
# The keys of an option whose value is a command (`ssh -o ProxyCommand=S`, git's command settings).
KEYED = ["ssh -o ProxyCommand='{P}' h", "ssh -oLocalCommand='{P}' h", "ssh -o 'KnownHostsCommand {P}' h",
         "git -c core.pager='{P}' log", "git -c core.sshCommand='{P}' fetch", "git -c credential.helper='!{P}' fetch",
         "git -c diff.x.textconv='{P}' log -p", "git -c filter.lfs.smudge='{P}' checkout .", "git -c pager.log='{P}' log",
         "tar --checkpoint-action 'exec={P}' -cf x.tar a", "tar -xf x.tar --to-command='{P}'", "tar -I '{P}' -cf x.tar a",
         "rsync --rsync-path='{P}' a h:x", "zip --unzip-command '{P}' -T z.zip a"]
KEYED_ALLOWED = ["ssh -o Port=22 h true", "ssh -o StrictHostKeyChecking=no h true", "git -c user.name=x log",
                 "git -c color.ui=never status", "git -c core.quotepath=off diff", "tar -cf x.tar a", "rsync -a src/ /tmp/r",
                 "zip -qr z.zip src", "vim a", "git log | less", "less a", "gdb -p 1 --batch"]


def test_every_wrapper_kind_has_a_handler():
    from metaharness.permissions.shell.wrappers import KINDS
    assert {spec["kind"] for spec in WRAPPERS.values()} <= set(KINDS)


def test_every_wrapper_has_a_case():
    assert set(WRAPPED) == set(WRAPPERS)


@pytest.mark.parametrize("name", sorted(WRAPPED))
def test_wrapper_unwraps(name):
    rule = parse_rule("Bash(rm -rf *)", "deny")
    found = [c for c in cmds(WRAPPED[name].format(P="rm -rf build")) if shell_broad_match(rule.shell, c) == MATCH]
    assert found, name


@pytest.mark.parametrize("text", KEYED)
def test_a_keyed_command_option_is_analysed(text):
    rule = parse_rule("Bash(rm -rf *)", "deny")
    found = [c for c in cmds(text.format(P="rm -rf build")) if shell_broad_match(rule.shell, c) == MATCH]
    assert found, text


@pytest.mark.parametrize("text", KEYED_ALLOWED)
def test_other_keys_and_plain_uses_run_nothing(text):
    analysis = analyse(text, CWD, HOME)
    assert not analysis.opaque and {c.basename for c in analysis.cmds} <= {
        "ssh", "true", "git", "tar", "rsync", "zip", "vim", "less", "gdb"}, text


@pytest.mark.parametrize("name", sorted(n for n, s in WRAPPERS.items() if s.get("transparent") and s["kind"] == "generic"))
def test_transparent_wrapper_layers(name):
    outer = cmds(WRAPPED[name].format(P="ls"))[0]
    assert outer.transparent and outer.inner is not None


# options.toml ------------------------------------------------------------------------------
@pytest.mark.parametrize("pattern,command,result", [
    ("rm -rf *", "rm --recursive --force x", MATCH), ("rm -rf *", "rm -R -f x", MATCH), ("rm -rf *", "rm -r x", NO),
    ("git push*", "git -C /x -c a=b --no-pager push", MATCH), ("git push -f *", "git push --force origin", MATCH),
    ("kubectl delete *", "kubectl --context prod delete pod x", MATCH), ("npm publish", "npm --prefix x publish", MATCH),
    ("chmod -R *", "chmod --recursive 777 x", MATCH), ("cp -r *", "cp -R a b", MATCH), ("mv -f *", "mv --force a b", MATCH),
    ("ln -s *", "ln --symbolic a b", MATCH), ("tar -x *", "tar -xzf a.tgz", MATCH), ("kill -9 *", "kill -9 1", MATCH),
    ("chown -R *", "chown --recursive u x", MATCH), ("chgrp -R *", "chgrp --recursive g x", MATCH),
    ("rmdir -p *", "rmdir --parents a/b", MATCH),
])
def test_option_normalisation(pattern, command, result):
    rule = parse_rule(f"Bash({pattern})", "deny")
    assert shell_broad_match(rule.shell, cmds(command)[0]) == result


# filecommands.toml ---------------------------------------------------------------------------
FILE_CASES = {
    "cat": ("cat a b", ["a", "b"], []), "head": ("head -n 3 a", ["a"], []), "tail": ("tail -n 3 a", ["a"], []),
    "less": ("less a", ["a"], []), "more": ("more a", ["a"], []), "nl": ("nl a", ["a"], []), "wc": ("wc a", ["a"], []),
    "sort": ("sort -o out a", ["a"], ["out"]), "uniq": ("uniq a b", ["a"], ["b"]), "cut": ("cut -f1 a", ["a"], []),
    "paste": ("paste a b", ["a", "b"], []), "grep": ("grep -e x a", ["a"], []), "egrep": ("egrep x a", ["a"], []),
    "fgrep": ("fgrep x a", ["a"], []), "rg": ("rg x a", ["a"], []), "ag": ("ag x a", ["a"], []),
    "diff": ("diff a b", ["a", "b"], []), "cmp": ("cmp a b", ["a", "b"], []), "comm": ("comm a b", ["a", "b"], []),
    "od": ("od a", ["a"], []), "xxd": ("xxd a b", ["a"], ["b"]), "hexdump": ("hexdump a", ["a"], []),
    "strings": ("strings a", ["a"], []), "file": ("file a", ["a"], []), "stat": ("stat a", ["a"], []),
    "md5sum": ("md5sum a", ["a"], []), "sha1sum": ("sha1sum a", ["a"], []), "sha256sum": ("sha256sum a", ["a"], []),
    "base64": ("base64 a", ["a"], []), "jq": ("jq . a", ["a"], []), "sed": ("sed -i s/a/b/ f", [], ["f"]),
    "awk": ("awk 1 a", ["a"], []), "gawk": ("gawk 1 a", ["a"], []), "source": ("source a", ["a"], []), ".": (". a", ["a"], []),
    "touch": ("touch a", [], ["a"]), "mkdir": ("mkdir -p a", [], ["a"]), "rmdir": ("rmdir a", [], ["a"]),
    "rm": ("rm -f a", [], ["a"]), "unlink": ("unlink a", [], ["a"]), "shred": ("shred a", [], ["a"]),
    "cp": ("cp a b", ["a"], ["b"]), "install": ("install -m 644 a b", ["a"], ["b"]), "mv": ("mv a b", [], ["a", "b"]),
    "ln": ("ln -s a b", ["a"], ["b"]), "tee": ("tee a", [], ["a"]), "truncate": ("truncate -s 0 a", [], ["a"]),
    "chmod": ("chmod 644 a", [], ["a"]), "chown": ("chown u a", [], ["a"]), "chgrp": ("chgrp g a", [], ["a"]),
    "patch": ("patch a -i p", ["p"], ["a"]), "curl": ("curl -o out -d @body https://x", ["body"], ["out"]),
    "wget": ("wget -O out https://x", [], ["out"]), "dd": ("dd if=a of=b", ["a"], ["b"]),
    "tar": ("tar -xf a.tar -C dest", ["a.tar"], ["dest"]), "zip": ("zip -r out.zip dir", ["dir"], ["out.zip"]),
    "rsync": ("rsync -a src dst", ["src"], ["dst"]), "perl": ("perl -pi -e s/a/b/ f", ["f"], ["f"]),
    "ruby": ("ruby -ne print a", ["a"], []), "shuf": ("shuf -o out a", ["a"], ["out"]),
    "split": ("split -l 1 a part", ["a"], ["part"]), "csplit": ("csplit -f part a 1", ["a"], ["part"]),
    "sponge": ("sponge a", [], ["a"]), "tac": ("tac a", ["a"], []), "rev": ("rev a", ["a"], []),
    "fold": ("fold -w 8 a", ["a"], []), "fmt": ("fmt -w 8 a", ["a"], []), "expand": ("expand -t 4 a", ["a"], []),
    "unexpand": ("unexpand a", ["a"], []), "column": ("column -t a", ["a"], []), "pr": ("pr -h x a", ["a"], []),
    "look": ("look x a", ["a"], []), "tsort": ("tsort a", ["a"], []), "join": ("join -t , a b", ["a", "b"], []),
    "iconv": ("iconv -f utf8 -o out a", ["a"], ["out"]), "sha224sum": ("sha224sum a", ["a"], []),
    "sha384sum": ("sha384sum a", ["a"], []), "sha512sum": ("sha512sum a", ["a"], []), "b2sum": ("b2sum a", ["a"], []),
    "cksum": ("cksum a", ["a"], []), "sum": ("sum a", ["a"], []), "zcat": ("zcat a.gz", ["a.gz"], []),
    "bzcat": ("bzcat a.bz2", ["a.bz2"], []), "xzcat": ("xzcat a.xz", ["a.xz"], []), "zstdcat": ("zstdcat a.zst", ["a.zst"], []),
    "gzip": ("gzip a", [], ["a"]), "gunzip": ("gunzip -c a.gz", ["a.gz"], []), "bzip2": ("bzip2 -k a", ["a"], []),
    "bunzip2": ("bunzip2 a.bz2", [], ["a.bz2"]), "xz": ("xz -c a", ["a"], []), "unxz": ("unxz a.xz", [], ["a.xz"]),
    "zstd": ("zstd -o out a --rm", ["a"], ["out"]), "openssl": ("openssl enc -in a -out b", ["a"], ["b"]),
    "xargs": ("xargs -a a echo", ["a"], []), "bash": ("bash a", ["a"], []), "sh": ("sh -e a", ["a"], []),
    "dash": ("dash a", ["a"], []), "zsh": ("zsh a", ["a"], []), "ksh": ("ksh a", ["a"], []),
    "python": ("python a", ["a"], []), "python3": ("python3 -X dev a", ["a"], []), "node": ("node a", ["a"], []),
    "setfacl": ("setfacl -m u:x:r a", [], ["a"]), "chattr": ("chattr -i a", [], ["a"]),
}
# `curl file://PATH` reads PATH, however its URL is spelled.
URL_READS = [("curl -s file:///etc/passwd", "/etc/passwd"), ("curl 'file:///etc/passwd'", "/etc/passwd"),
             ("curl -o out FILE://localhost/etc/x", "/etc/x"), ("curl https://x file:///a", "/a")]


@pytest.mark.parametrize("text,path", URL_READS)
def test_curl_reads_a_file_url(text, path):
    assert path in [p.word.deny_value for p in cmds(text)[0].paths if p.access == "read"], text


def test_every_filecommand_has_a_case():
    assert set(FILE_CASES) == set(FILECOMMANDS)


@pytest.mark.parametrize("name", sorted(FILE_CASES))
def test_filecommand_operands(name):
    text, reads, writes = FILE_CASES[name]
    c = cmds(text)[0]
    got_r = [p.word.deny_value for p in c.paths if p.access == "read"]
    got_w = [p.word.deny_value for p in c.paths if p.access == "write" and not p.deny_only]
    assert (got_r, got_w) == (reads, writes), (text, got_r, got_w)


@pytest.mark.parametrize("text,target", [("ln -s a b", "a"), ("ln a b", "a"), ("ln -s ../x d/b", "d/../x"),
                                         ("cp -s a b", "a"), ("cp -l a b", "a"), ("ln -t dir a", "a")])
def test_link_sources_count_as_written_for_deny(text, target):
    c = cmds(text)[0]
    assert target in [p.word.deny_value for p in c.paths if p.access == "write" and p.deny_only]


@pytest.mark.parametrize("text,writes", [
    ("cp -t d a", ["d"]), ("cp -rt d a", ["d"]), ("cp -vtd a", ["d"]), ("cp --target-directory=d a", ["d"]),
    ("cp --targ d a", ["d"]), ("mv -ft d a", ["a", "d"]), ("install -Dt d a", ["d"]), ("ln -st d a", ["d"]),
    ("chmod --reference=r f", ["f"]), ("chown --ref r f g", ["f", "g"]), ("sort -o.env a", [".env"]),
    ("curl -so out https://x", ["out"]), ("sed -i -f s.sed f", ["f"]), ("sed -f s.sed -i f", ["f"]),
])
def test_option_bound_write_targets(text, writes):
    c = cmds(text)[0]
    assert sorted(p.word.deny_value for p in c.paths if p.access == "write" and not p.deny_only) == sorted(writes)


# routine.toml / risky.toml ------------------------------------------------------------------
ROUTINE = ["git add .", "git commit -m x", "git switch main", "git fetch", "git checkout feature", "git checkout -b new",
           "git stash", "git stash pop", "git restore --staged a", "git branch topic", "npm test", "pnpm test",
           "npm run build", "yarn run lint", "bun run typecheck", "yarn build", "pytest -q", "python -m pytest",
           "python3 -m unittest", "ruff check .", "ruff format", "mypy src", "black .", "cargo build", "cargo clippy",
           "go test ./...", "gofmt -l .", "make", "make test", "tsc", "eslint .", "prettier -w .", "mvn verify",
           "gradle build", "./gradlew test"]
NOT_ROUTINE = ["git checkout -- a", "git checkout .", "npm run deploy", "make install", "python x.py", "npm install",
               "git stash drop", "git branch -D x", "cargo run", "go run ."]


@pytest.mark.parametrize("text", ROUTINE)
def test_routine(text):
    c = cmds(text)[0]
    assert classifier.is_routine(c) and classifier.risky_feature(c) is None, text


@pytest.mark.parametrize("text", NOT_ROUTINE)
def test_not_routine(text):
    c = cmds(text)[0]
    assert not classifier.is_routine(c) or classifier.risky_feature(c) is not None, text


RISKY = {
    "rm": "rm a", "find-delete": "find . -delete", "sudo": "sudo ls", "git-push": "git push",
    "git-reset-hard": "git reset --hard", "git-clean": "git clean -fd", "git-checkout-paths": "git checkout -- a",
    "git-restore": "git restore a", "git-branch-delete": "git branch -D x", "git-rebase": "git rebase main",
    "git-stash-drop": "git stash drop", "kubectl": "kubectl get pods", "terraform-apply": "terraform apply",
    "npm-publish": "npm publish", "twine-upload": "twine upload dist/*", "docker-rm": "docker rmi x", "disk": "mkfs.ext4 /dev/x",
    "chmod-recursive": "chmod -R 777 x", "kill": "pkill x", "system": "systemctl restart x", "remote": "ssh host",
    "rsync-remote": "rsync -a x host:/y",
}


def test_every_risky_feature_has_a_case():
    assert set(RISKY) == {f["id"] for f in classifier.RISKY}


@pytest.mark.parametrize("fid", sorted(RISKY))
def test_risky(fid):
    got = {classifier.risky_feature(c) for c in cmds(RISKY[fid])}
    assert fid in got, (RISKY[fid], got)


# protected.toml / inert.toml -----------------------------------------------------------------
def test_protected_and_secret(world):
    from metaharness.permissions.path_checks import PROTECTED
    ctx = world.ctx(world.setup(project={}), mode="manual", ws="full-access")
    for p in PROTECTED["paths"]:
        target = p if p.startswith("~") else (p.lstrip("/*") if "/" in p else "sub/" + p)
        v = world.decide(f"Write({target}/x)" if not target.endswith((".json", ".yml", ".toml", ".yaml", "rc", "conf", "config")) else f"Write({target})", ctx)
        assert v.reason == "protected-path", (p, v.to_json())
    for p in PROTECTED["secret"]:
        v = world.decide(f"Read({p}/x)" if not p.endswith(("netrc", ".json", "config")) else f"Read({p})", ctx)
        assert v.reason == "secret-path", (p, v.to_json())


def test_inert_tools(world):
    ctx = world.ctx(mode="plan")
    for t in sorted(INERT_TOOLS):
        v = world.decide(t, ctx)
        assert (v.behavior, v.reason) == ("allow", "inert"), t
