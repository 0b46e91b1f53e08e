"""Every code block of docs/*.md runs in the suite or says what it is. ```python blocks run
(tests/test_docs_blocks.py) unless marked ``<!-- not run: why -->`` or ``<!-- output: what wrote it -->``;
```text / ```console blocks are output (messages, usage lines, transcripts on several hosts); each
command line of a ```bash block is checked here: a ``dualdl`` command parses with dualdl's own
argument parser, a ``make`` target exists, a ``python FILE`` names a file of the repository."""
import glob
import os
import re
import shlex

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
LANGUAGES = {"python", "bash", "text", "console"}
# the reader's own script: docs/distributed.md's training script (its python block, launched on 2
# processes by tests/test_docs_blocks.py)
USER_SCRIPTS = {"train.py"}
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.S | re.M)


def fences(path):
    text = open(os.path.join(ROOT, path)).read()
    return [(text[:m.start()].count("\n") + 1, m.group(1).split()[0] if m.group(1).strip() else "", m.group(2))
            for m in FENCE.finditer(text)]


def commands(code):
    """The command lines of a shell block: comments dropped, ``\\`` continuations joined."""
    out, line = [], ""
    for raw in code.splitlines():
        part = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        line += part.rstrip("\\")
        if not part.endswith("\\") and line.strip():
            out.append(line.strip())
            line = ""
    return out


def test_every_block_names_its_language():
    bad = [(p, line, lang) for p in PAGES for line, lang, _ in fences(p) if lang not in LANGUAGES]
    assert not bad, f"fences without one of {sorted(LANGUAGES)}: {bad}"


BASH = [(p, line, cmd) for p in PAGES for line, lang, code in fences(p) if lang == "bash" for cmd in commands(code)]


def test_there_are_shell_commands_to_check():
    assert len(BASH) >= 10, BASH


@pytest.mark.parametrize("page,line,cmd", BASH, ids=[f"{p}:{n}" for p, n, _ in BASH])
def test_shell_command_is_real(page, line, cmd):
    words = shlex.split(cmd)
    while words and re.match(r"^[A-Z_]+=", words[0]):          # VAR=value before the command
        words = words[1:]
    head = words[0]
    if head in ("dualdl", ".venv/bin/dualdl") or words[:3] == ["python", "-m", "dualdl"]:
        args = words[3:] if head == "python" else words[1:]
        from dualdl import cli
        try:
            if hasattr(cli, "subcommand_parser") and args and args[0] in cli.SUBCOMMANDS:
                cli.subcommand_parser(args[0]).parse_args(args[1:])
            else:
                cli.build_parser().parse_args(args)
        except SystemExit as e:
            pytest.fail(f"{page}:{line}: `{cmd}` does not parse (exit {e.code})")
    elif head == "make":
        targets = set(re.findall(r"^([\w-]+):", open(os.path.join(ROOT, "Makefile")).read(), re.M))
        for w in words[1:]:
            if "=" not in w:
                assert w in targets, f"{page}:{line}: make has no target {w!r}"
    elif head in ("python", "python3", ".venv/bin/python"):
        script = next(w for w in words[1:] if not w.startswith("-"))
        assert script in USER_SCRIPTS or os.path.exists(os.path.join(ROOT, script)), \
            f"{page}:{line}: {script} is not in the repository"
    elif head in ("pip", "pip3", "export", "cd", "mkdir", "MXNET_ENGINE_TYPE"):
        pass
    else:
        pytest.fail(f"{page}:{line}: unchecked command {cmd!r}: add a rule to tests/test_docs_fences.py")
