"""A hostile repository cannot drive the reviewer's terminal: control characters, bidi overrides
and rich markup from file names, quoted code and requirement lines reach every human-readable
output as escapes, on a terminal and in a pipe. Machine formats stay exact."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from conftest import cli
from neuron_migrate.files.diff import quoted_name
from neuron_migrate.printable import one_line, printable

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\udc80-\udc9f]")
"""What must never reach the terminal (the newline and tab we print ourselves aside)."""
SGR = re.compile("\x1b\\[[0-9;]*m")
"""The colour and weight sequences rich writes on a terminal: our own, never the repository's."""

ESC_NAME = "esc\x1b[31mRED\x1b[0m\x1b]0;PWNED\x07.py"
CODE = ('import torch_xla.core.xla_model as xm\n'
        'xm.rendezvous("\x1b[2Jtag")\n'
        'device = xm.xla_device()  # \x1b]8;;http://evil\x07link\x1b]8;;\x07\r'
        'hidden = 1  # \u202eevil\x85\n')


@pytest.fixture
def hostile(in_tmp: Path) -> Path:
    """A repository whose names and contents carry terminal controls and rich markup."""
    for name in (ESC_NAME, "[red]markup.py", "[link=https:evil]linked.py", "bidi\u202eyp.py"):
        (in_tmp / name).write_text(CODE)
    with open(os.fsencode(in_tmp) + b"/raw\x9b2J.py", "w") as handle:  # a raw C1 CSI byte
        handle.write(CODE)
    (in_tmp / "skip\x1b[2J.txt").write_text("not read\n")
    (in_tmp / "requirements.txt").write_text("torch-xla==\x1b[2J2.1\ntorch-neuronx==2.1.0\n")
    return in_tmp


def _clean(text: str, where: str) -> None:
    hit = CONTROL.search(text)
    assert hit is None, f"{hit.group()!r} reached {where}: {text[max(0, hit.start() - 40):hit.end() + 20]!r}"


COMMANDS = [
    ("check",), ("check", "--diff"), ("apply", "--dry-run"), ("check", "-v"),
    ("check", "--format", "markdown"), ("check", "--format", "concise"),
    ("check", "--diff", "--format", "markdown"), ("scan",), ("scan", "-v"),
    ("scan", "--format", "markdown"), ("scan", "--format", "concise"), ("audit",),
    ("audit", "--format", "markdown"), ("audit", "--format", "concise"), ("apply",),
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_no_control_character_reaches_a_human_readable_output(hostile: Path,
                                                               command: tuple[str, ...]) -> None:
    run = cli(*command, ".")
    assert "Traceback" not in run.stderr
    _clean(run.stdout, "stdout")
    _clean(run.stderr, "stderr")
    assert "[red]markup.py" in run.stdout + run.stderr or command[0] == "scan"


@pytest.mark.parametrize("fmt", ["text", "markdown", "concise"])
def test_the_report_file_is_as_safe(hostile: Path, fmt: str) -> None:
    cli("check", "--diff", "--format", fmt, "-o", "report.out", ".")
    _clean((hostile / "report.out").read_text(encoding="utf-8", errors="surrogateescape"),
           "the --output file")


def test_the_escapes_read_as_git_shows_them(hostile: Path) -> None:
    run = cli("check", "--diff", ".")
    assert "esc\\x1b[31mRED\\x1b[0m\\x1b]0;PWNED\\a.py: 3 changes" in run.stdout
    assert 'xm.rendezvous("\\x1b[2Jtag")' in run.stdout  # quoted code in a message
    assert '-xm.rendezvous("\\x1b[2Jtag")' in run.stdout  # a diff line
    assert "\\x1b]8;;http://evil\\alink\\x1b]8;;\\a\\rhidden = 1  # \\u202eevil\\x85" in run.stdout
    assert '--- "a/esc\\033[31mRED\\033[0m\\033]0;PWNED\\a.py"' in run.stdout
    assert "raw\\x9b2J.py: 3 changes" in run.stdout
    assert "requirements.txt:1: pip would reject `torch-xla==\\x1b[2J2.1`" in run.stderr


def test_machine_formats_stay_exact(hostile: Path) -> None:
    """JSON carries the name and the message as they are, in its own escapes."""
    report = cli("check", "--format", "json", ".").json()
    paths = {file["path"] for file in report["files"]}
    assert ESC_NAME in paths
    assert "\\\\x1b" not in json.dumps(report)  # never escaped twice


def _entry(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[bytes]:
    """The installed command's own start-up (the lean path for check, typer for audit)."""
    return subprocess.run([sys.executable, "-m", "neuron_migrate", *args], cwd=cwd,
                          capture_output=True, env={**os.environ, **env}, timeout=300,
                          check=False)


@pytest.mark.parametrize("command", [("check", "--diff"), ("audit",)], ids=" ".join)
def test_through_the_installed_command_on_a_terminal_and_in_a_pipe(
        hostile: Path, command: tuple[str, ...]) -> None:
    """In a pipe the text goes out plain; with a terminal rich styles it (FORCE_COLOR stands
    for one): only our own colour sequences may appear then."""
    for env in ({}, {"FORCE_COLOR": "1", "TERM": "xterm-256color"}):
        run = _entry(*command, ".", cwd=hostile, **env)
        assert run.returncode in (1, 2), run.stderr  # findings; the requirement line errs
        for stream in (run.stdout, run.stderr):
            text = stream.decode("utf-8", "surrogateescape")
            assert bool(SGR.search(text)) == bool(env) or not text.strip() or \
                stream is run.stderr
            _clean(SGR.sub("", text), f"{command} {env}")
        assert b"[red]markup.py" in run.stdout


def test_smoke_text_output_is_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    from neuron_migrate.smoke.run import print_styled

    print_styled([("script said \x1b]0;PWNED\x07 \x1b[2J", "error"),
                          ("[red]not markup[/red]", "plain")])
    out = capsys.readouterr().out
    _clean(out, "smoke's output")
    assert "script said \\x1b]0;PWNED\\a \\x1b[2J" in out and "[red]not markup[/red]" in out


def test_a_crlf_line_end_is_kept_and_a_lone_carriage_return_is_not() -> None:
    assert printable("a = 1\r\n") == "a = 1\r\n"
    assert printable("shown\rhidden\n") == "shown\\rhidden\n"
    assert printable("\u2066x\u2069\udc9b\x7f") == "\\u2066x\\u2069\\x9b\\x7f"
    assert one_line("a\nb\r\n") == "a\\nb\\r\\n"


def test_a_hostile_name_in_the_diff_header_is_quoted_as_git_quotes_it(in_tmp: Path) -> None:
    """git reads the quoted name back: the patch of a file so named applies."""
    name = "tab\there\nnew\x1bline \u202e.py"
    assert quoted_name(f"a/{name}") == '"a/tab\\there\\nnew\\033line \\342\\200\\256.py"'
    (in_tmp / name).write_text("import torch_xla.core.xla_model as xm\nd = xm.xla_device()\n")
    subprocess.run(["git", "init", "-q"], cwd=in_tmp, check=True)
    lines = cli("apply", "--dry-run", ".").stdout.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("--- "))
    end = next(i for i in range(start + 2, len(lines)) if lines[i][:1] not in " +-@\\")
    assert lines[start] == '--- "a/tab\\there\\nnew\\033line \\342\\200\\256.py"\n'
    (in_tmp / "change.patch").write_text("".join(lines[start:end]))
    check = subprocess.run(["git", "apply", "--check", "change.patch"], cwd=in_tmp,
                           capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stderr


def test_markdown_of_hostile_names_keeps_its_headings(in_tmp: Path) -> None:
    """A line break in a name would end its heading and start the page's own markup."""
    names = ["a\n# injected.py", "b\r## also.py", "c``\n## x` [link](https:evil).py"]
    for name in names:  # and a message quoting code over two lines
        (in_tmp / name).write_text("import torch_xla.core.xla_model as xm\n"
                                   "xm.rendezvous(\n'## in a message [x](http://evil)')\n")
    (in_tmp / "requirements.txt").write_text("torch-xla==[y](http://evil)\n")
    document = cli("check", "--format", "markdown", ".").stdout
    tokens = MarkdownIt("commonmark").parse(document)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings[0] == "neuron-migrate report" and headings[1] == "Errors"
    assert len(headings) == 2 + len(names), headings
    shown = [token.children for token in tokens if token.type == "inline"]
    links = [child for children in shown for child in children or () if child.type == "link_open"]
    assert all("evil" not in (link.attrs.get("href") or "") for link in links)


def test_audit_markdown_lists_hostile_names_without_breaking_out(in_tmp: Path) -> None:
    """The audit's worst-files list quotes each name as the file sections do: a line break
    or a backtick in a name cannot start a heading or a link in the page."""
    names = ["a\n# injected.py", "b`` [link](https:evil).py"]
    for name in names:
        (in_tmp / name).write_text("import torch_xla.core.xla_model as xm\n"
                                   "d = xm.xla_device()\n")
    document = cli("audit", "--format", "markdown", ".").stdout
    assert "Worst files first:" in document
    tokens = MarkdownIt("commonmark").parse(document)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert not any("injected" in heading and "\\n" not in heading for heading in headings), \
        headings
    shown = [token.children for token in tokens if token.type == "inline"]
    links = [child for children in shown for child in children or () if child.type == "link_open"]
    assert all("evil" not in (link.attrs.get("href") or "") for link in links)


def test_github_annotations_show_controls_as_escapes(hostile: Path) -> None:
    """The workflow-command syntax escapes only `%`, line breaks, `:` and `,`: a terminal
    control in a name or in quoted code would reach the job's log, which renders ANSI."""
    run = cli("check", "--format", "github", ".")
    assert "::" in run.stdout
    _clean(run.stdout, "github annotations")
    assert "file=esc\\x1b[31mRED\\x1b[0m\\x1b]0;PWNED\\a.py" in run.stdout
    assert 'rendezvous("\\x1b[2Jtag")' in run.stdout


@pytest.mark.parametrize("fmt", ["json", "sarif", "gitlab"])
def test_json_formats_escape_what_a_terminal_acts_on_and_read_back_exact(
        hostile: Path, fmt: str) -> None:
    """JSON may carry DEL, the C1 controls (a UTF-8 terminal reads U+009B as ESC [) and bidi
    overrides raw; they are written as \\uXXXX, which a parser reads back as the same text."""
    (hostile / "c1.py").write_text("import torch_xla.core.xla_model as xm\n"
                                   "xm.rendezvous('\x9b2J\u202e\x85')\n")
    run = cli("check", "--format", fmt, ".")
    assert not re.search("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]", run.stdout)
    assert "\\u009b2J\\u202e\\u0085" in run.stdout
    assert "\x9b2J\u202e\x85" in json.dumps(json.loads(run.stdout), ensure_ascii=False)


def test_junit_shows_controls_as_escapes(hostile: Path) -> None:
    """JUnit XML is read in CI logs and terminals: a control from a name or quoted code is
    shown as its escape (U+009B is valid XML, and a UTF-8 terminal acts on it)."""
    (hostile / "c1.py").write_text("import torch_xla.core.xla_model as xm\n"
                                   "xm.rendezvous('\x9b2J')\n")
    run = cli("check", "--format", "junit", ".")
    _clean(run.stdout, "junit")
    assert "esc\\x1b[31mRED" in run.stdout and "\\x9b2J" in run.stdout
