"""Hostile or merely large input finishes in seconds: no step is quadratic (or worse) in the
size of a file, and a stopped run stops at once.

Each input is run in a child process with a deadline many times what it takes, so that a
regression fails the test instead of hanging the suite; the output is checked too."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_migrate.deps.emit import _Spans
from neuron_migrate.deps.entries import Edit
from tests.conftest import ROOT

DEADLINE = 20.0
"""Seconds a child run may take: each finishes in one or two here, and took a minute to
forever before."""


def run_cli(*args: str | Path, cwd: Path, deadline: float = DEADLINE
            ) -> subprocess.CompletedProcess[str]:
    """The CLI in a child process, killed (and the test failed) past the deadline."""
    started = time.monotonic()
    try:
        run = subprocess.run([sys.executable, "-m", "neuron_migrate", *map(str, args)],
                             cwd=cwd, capture_output=True, text=True, timeout=deadline,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{' '.join(map(str, args))} still running after {deadline} s") \
            from None
    assert time.monotonic() - started < deadline
    return run


def test_a_dockerfile_run_of_thousands_of_pins_is_read_in_linear_time(tmp_path: Path) -> None:
    lines = 5000
    (tmp_path / "Dockerfile").write_text(
        "FROM python:3.12\nRUN true \\\n"
        + "    && pip install torch-neuronx==2.1 neuronx-cc \\\n" * lines + "    && true\n")
    run = run_cli("apply", ".", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    text = (tmp_path / "Dockerfile").read_text()
    assert text.count('pip install "torch-neuronx==2.14.*"') == lines
    assert text.count(" nki ") == 1  # added once, beside the first pin


def _brute_clash(edit: Edit, taken: list[Edit]) -> bool:
    """Whether `edit` clashes with one already taken, compared with each in turn."""
    for other in taken:
        if edit == other:
            return True
        if edit.start == edit.end or other.start == other.end:
            point, span = (edit, other) if edit.start == edit.end else (other, edit)
            if span.start < point.start < span.end:
                return True
        elif edit.start < other.end and other.start < edit.end:
            return True
    return False


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 4)), max_size=40))
def test_the_sorted_edit_index_clashes_exactly_where_a_pairwise_check_does(
        spans: list[tuple[int, int]]) -> None:
    taken: list[Edit] = []
    index = _Spans()
    for start, length in spans:
        edit = Edit(start, start + length, "x")
        if edit in index:
            continue
        clash = index.clashes(edit)
        assert clash == _brute_clash(edit, taken)
        if not clash:
            taken.append(edit)
            index.add(edit)


def run_python(code: str, cwd: Path, deadline: float = DEADLINE) -> str:
    """`code` in a child Python, killed (and the test failed) past the deadline: a regular
    expression that backtracks holds the interpreter, so no thread could time it out."""
    try:
        run = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                             text=True, timeout=deadline,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    except subprocess.TimeoutExpired as stopped:
        raise AssertionError(f"still running after {deadline} s; it got as far as:\n"
                             f"{stopped.stdout!r}") from None
    assert run.returncode == 0, run.stderr
    return run.stdout


LINE_SCANNING = '''
import sys
from neuron_migrate.model import Options
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from neuron_migrate.runner import migrate_bytes

registry = Registry(all_rules(), Options(sources=frozenset({"xla", "cuda"})))
names = ["requirements.txt", "Dockerfile", "setup.sh", "Makefile", "pyproject.toml",
         "setup.cfg", "Pipfile", "environment.yml", "compose.yaml", "poetry.lock"]
for name in names:
    for piece in [" ", "\\t", " \\t", "\\\\ ", " #", " ,", "a:", "=", "-", "/", "${", "'"]:
        run = piece * (RUN // len(piece))
        text = (f"torch-neuronx==2.1 {run}x XLA_USE_BF16=1 python train.py\\n"
                f"RUN pip install torch-xla{run}\\n{run}\\n"
                f"image: nvidia/cuda:{run}x  # noqa: NM801 {run},NM802 {run}\\n")
        result = migrate_bytes(name, text.encode(), registry)
        print(name, repr(piece), result.error is None, flush=True)
'''


@pytest.mark.slow
def test_long_runs_of_one_character_in_any_dependency_file_are_read_in_linear_time(
        tmp_path: Path) -> None:
    """Every line reader of every dependency-file kind, with runs of spaces, tabs, comment
    and separator characters long enough that a backtracking expression (`\\s*#`, `\\s*,?\\s*`,
    `(\\s+)$`) takes minutes where a linear one takes milliseconds."""
    out = run_python("RUN = 10_000\n" + LINE_SCANNING, tmp_path, deadline=60)
    assert out.count("\n") == 10 * 12


def test_a_requirement_after_100_000_spaces_is_read(tmp_path: Path) -> None:
    spaces = " " * 100_000
    (tmp_path / "requirements.txt").write_text(f"{spaces}torch-neuronx==2.1  # old\n")
    run = run_cli("apply", "requirements.txt", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "requirements.txt").read_text().startswith(
        f"{spaces}torch-neuronx==2.14.*  # old\n")


def test_comment_stripping_and_noqa_codes_read_as_before() -> None:
    from neuron_migrate.deps.requirements import read_requirements
    from neuron_migrate.engine.kept_calls import one_line
    from neuron_migrate.engine.suppress import markers

    pins = [e.raw for e in read_requirements(
        "torch-xla  # a comment\n# torch-neuronx\n\ttorch-neuronx==2.1\t#x\n").entries]
    assert pins == ["torch-xla", "torch-neuronx==2.1"]
    assert [m.codes for m in markers("# noqa: NM101 ,  NM2,E501 x")] == [
        frozenset({"NM101", "NM2"})]
    assert one_line("f(\n    a,  \n\n  b)") == "f( a, b)"


def test_a_yaml_alias_bomb_is_read_once_per_node(tmp_path: Path) -> None:
    """12 levels of 9 aliases: 700 bytes that stand for 9**12 mappings when followed."""
    lines = ["base: &a0 {name: XLA_USE_BF16, value: '1'}"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 13)]
    (tmp_path / "compose.yaml").write_text("\n".join(lines) + "\n")
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "ci.yml").write_text(
        "\n".join(lines) + "\nrun: &r {steps: [{run: pip install torch-neuronx}]}\n")
    run = run_cli("check", "--select", "NM812", ".", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    assert run.stdout.count("NM812 [review]") == 2  # the one mapping, once in each file


OLD = "import torch_xla\ntorch_xla.sync()\nx = 1\n"


def test_configurations_that_are_not_regular_files_are_passed_over_with_a_warning(
        tmp_path: Path) -> None:
    """A FIFO would block the read for ever and a link to /dev/zero fill the memory."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "train.py").write_text(OLD)
    os.mkfifo(tmp_path / "sub" / ".neuron-migrate.toml")
    (tmp_path / "sub" / "pyproject.toml").symlink_to("/dev/zero")
    # the walk goes on upwards past them, to a configuration it can read
    (tmp_path / "neuron-migrate.toml").write_text('ignore = ["NM110"]\n')
    run = run_cli("check", ".", cwd=tmp_path)
    for name in (".neuron-migrate.toml", "pyproject.toml"):
        assert f"sub/{name}: not a regular file" in run.stderr, run.stderr
    assert "not read as a configuration" in run.stderr
    assert run.returncode == 0, run.stdout  # NM110 (the sync call) is ignored above


def test_a_configuration_over_the_size_limit_is_passed_over(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(OLD)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.neuron-migrate]\nignore = ["NM110"]\n' + "# padding\n" * 120_000)
    run = run_cli("check", ".", cwd=tmp_path)
    assert "pyproject.toml: larger than 1 MiB; not read as a configuration" in run.stderr
    assert run.returncode == 1 and "NM110" in run.stdout


def test_a_config_option_naming_a_fifo_is_an_error(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "settings.toml")
    (tmp_path / "train.py").write_text(OLD)
    run = run_cli("check", "--config", "settings.toml", ".", cwd=tmp_path)
    assert run.returncode == 2
    assert "settings.toml: not a regular file (a named pipe)" in run.stderr


def test_files_a_dockerfile_points_at_are_read_only_when_regular(tmp_path: Path) -> None:
    """The requirements file it installs and the script it launches, links to /dev/zero."""
    (tmp_path / "requirements.txt").symlink_to("/dev/zero")
    (tmp_path / "train.py").symlink_to("/dev/zero")
    (tmp_path / "Dockerfile").write_text(
        "FROM python:3.12\nCOPY . /app\nRUN pip install -r /app/requirements.txt\n"
        "ENV XLA_USE_BF16=1\nCMD python /app/train.py\n")
    run = run_cli("check", "Dockerfile", cwd=tmp_path)
    assert run.returncode == 1 and "NM812" in run.stdout, run.stdout + run.stderr


def test_a_file_of_a_thousand_copies_of_one_function_is_migrated_and_diffed(
        tmp_path: Path) -> None:
    """Every line repeats a thousand times: aligning the output with the input took minutes.
    The diff `--dry-run` prints applies with `git apply`, to the file `apply` writes."""
    unit = "def f():\n    return xm.xla_device()\n"
    source = "import torch_xla.core.xla_model as xm\n\n" + unit * 1200
    (tmp_path / "m.py").write_text(source)
    dry = run_cli("apply", "--dry-run", "m.py", cwd=tmp_path, deadline=45)
    assert dry.returncode == 1, dry.stderr
    patch = dry.stdout[:dry.stdout.index("\nm.py: ") + 1]
    assert patch.count("\n+    return ") == 1200
    subprocess.run(["git", "apply", "-"], input=patch, text=True, cwd=tmp_path, check=True)
    patched = (tmp_path / "m.py").read_text()
    (tmp_path / "m.py").write_text(source)
    assert run_cli("apply", "m.py", cwd=tmp_path, deadline=45).returncode == 0
    assert (tmp_path / "m.py").read_text() == patched and "xm." not in patched


MANY = "".join("def f():\n    return 1\n" for _ in range(600))


def _compiles(source: str) -> bool:
    try:
        compile(source, "m.py", "exec", dont_inherit=True)
    except SyntaxError:
        return False
    return True


def test_a_module_of_many_identical_functions_is_checked_as_compile_checks_it() -> None:
    """Sliced compilation finds the errors a whole compile finds, across slices too."""
    from neuron_migrate.engine.compile_check import compile_check

    for tail in ["", "return 2\n", "x = 1\nglobal x\n", "nonlocal y\n", "break\n",
                 "from __future__ import annotations\n", "def g():\n    yield from\n",
                 "async def h():\n    pass\nawait h()\n", "class C:\n    return 1\n"]:
        for source in (MANY + tail, "from __future__ import annotations\n" + MANY + tail,
                       tail + MANY):
            try:
                compile_check(source.encode(), "m.py")
                checked = True
            except SyntaxError:
                checked = False
            assert checked == _compiles(source), (tail, source[:40])


def test_compiling_thousands_of_identical_functions_takes_linear_time() -> None:
    from neuron_migrate.engine.compile_check import compile_check

    source = "".join("def f():\n    return torch.device('neuron')\n" for _ in range(20_000))
    started = time.process_time()
    compile_check(source.encode(), "m.py")
    assert time.process_time() - started < 6  # about 1 s; a whole compile took 14 s


STUCK_RUN = '''
import hashlib
import sys
from pathlib import Path

from neuron_migrate import per_file
from neuron_migrate.cli import app

real = per_file.migrate_bytes


def migrate_bytes(name, *args, **kwargs):
    if Path(name).name == "stuck.py":
        Path("stuck.started").write_text("")
        # minutes inside C (as in a native parser): no signal handler runs until it returns
        hashlib.pbkdf2_hmac("sha256", b"key", b"salt", 10**9)
    return real(name, *args, **kwargs)


per_file.migrate_bytes = migrate_bytes  # the workers are forked: they inherit it
app(["apply", "-j", "2", *sys.argv[1:]])
'''


def test_sigterm_stops_a_run_whose_worker_is_inside_a_long_call_into_c(tmp_path: Path) -> None:
    """The worker takes the stop request only when the call returns: it is killed once the
    grace second has passed, and the run ends with every file whole."""
    names = ["stuck.py", *(f"m{i:02}.py" for i in range(40))]
    for name in names:
        (tmp_path / name).write_text(OLD)
    run = subprocess.Popen([sys.executable, "-c", STUCK_RUN, *names], cwd=tmp_path,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True)
    try:
        deadline = time.monotonic() + DEADLINE
        while not (tmp_path / "stuck.started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (tmp_path / "stuck.started").exists(), "the worker never reached the call"
        run.send_signal(15)
        sent = time.monotonic()
        out, err = run.communicate(timeout=DEADLINE)
        stopped = time.monotonic() - sent
    finally:
        if run.poll() is None:  # still running: end it and its workers, then fail
            os.killpg(run.pid, 9)
            run.wait()
    assert stopped < 4, f"stopped {stopped:.1f} s after SIGTERM"  # about 1 s
    assert run.returncode == 128 + 15, err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*names, "stuck.started"])
    assert {(tmp_path / name).read_text() for name in names} <= {OLD, "x = 1\n"}
    workers = subprocess.run(["pgrep", "-s", str(run.pid)], capture_output=True, text=True)
    assert workers.stdout == "", "a worker outlived the run"


def test_gitignore_files_that_are_not_regular_or_too_large_are_named_not_read(
        tmp_path: Path) -> None:
    for folder in ("fifo", "zero", "big"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "train.py").write_text(OLD)
    os.mkfifo(tmp_path / "fifo" / ".gitignore")
    (tmp_path / "zero" / ".gitignore").symlink_to("/dev/zero")
    (tmp_path / "big" / ".gitignore").write_text("*.log\n" * 1_000_000)  # 6 MB
    run = run_cli("check", ".", cwd=tmp_path)
    assert run.returncode == 1 and run.stdout.count("NM110") >= 3, run.stdout + run.stderr
    assert "fifo/.gitignore: not a regular file (a named pipe)" in run.stderr
    assert "zero/.gitignore: not a regular file (a character device)" in run.stderr
    assert "big/.gitignore: larger than 5 MiB; its patterns are not applied" in run.stderr


def test_a_worker_stderr_of_many_blank_lines_is_read_in_linear_time() -> None:
    """smoke reads a dead worker's stderr for its traceback; the frame pattern must not retry
    a long run of blank lines from each of them (200,000 took over a minute)."""
    code = ("from neuron_migrate.smoke.summary import _error_from_stderr\n"
            "stderr = '\\n' * 200_000 + 'Traceback (most recent call last):\\n'"
            " + '  File \"train.py\", line 3, in <module>\\n' + 'ValueError: boom\\n'\n"
            "error = _error_from_stderr(stderr, 'train.py')\n"
            "assert error['type'] == 'ValueError' and error['frames'][0]['line'] == 3, error\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=False)
    assert run.returncode == 0, run.stderr


def _migrate(source: str, name: str = "m.py") -> None:
    from neuron_migrate.registry import Registry
    from neuron_migrate.rules import all_rules
    from neuron_migrate.runner import migrate_bytes

    result = migrate_bytes(name, source.encode(), Registry(all_rules()))
    assert result.error is None and result.new_source, result.error


HEAD = "import torch_xla.core.xla_model as xm\n\n"
"""Each case below has some hundreds of statements: work per statement that grows with the
statements before it (the whole function read again at each) counts tens of thousands."""


def test_a_function_of_hundreds_of_placements_is_read_once_for_its_calls(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether a placed model is trained there asks for the calls of the placing code: one
    function of 24 KB with a placement on each line took a minute."""
    from neuron_migrate.rules import trained_model

    walked: list[int] = []
    real = trained_model._own_calls
    monkeypatch.setattr(trained_model, "_own_calls",
                        lambda body: walked.append(len(body)) or real(body))
    _migrate(HEAD + "def train(x):\n" + "    x = x.to(xm.xla_device())\n" * 300
             + "    return x\n")
    assert sum(walked) < 2 * 300, f"{len(walked)} walks of {sum(walked)} statements"


def test_top_level_placements_do_not_each_rebuild_the_module(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A notebook cell (or a script) of hundreds of placements at the top level."""
    from neuron_migrate.rules import trained_model

    built: list[int] = []
    real = trained_model._own_calls
    monkeypatch.setattr(trained_model, "_own_calls",
                        lambda body: built.append(len(body)) or real(body))
    _migrate(HEAD + "x = 0\n" + "x = x.to(xm.xla_device())\n" * 300)
    assert sum(built) < 3 * 300, f"{len(built)} walks of {sum(built)} statements"


def test_a_name_bound_hundreds_of_times_is_resolved_without_rereading_its_bindings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from neuron_migrate.analysis.scopes import Binding

    asked: list[int] = []
    monkeypatch.setattr(Binding, "is_import", property(
        lambda self: asked.append(1) is None and self.qualname is not None))
    _migrate(HEAD + "def train(x):\n" + "    x = x.to(xm.xla_device())\n" * 300
             + "    return x\n")
    assert len(asked) < 50 * 300, f"{len(asked)} bindings read"


@pytest.mark.parametrize("body", [
    pytest.param("".join(f"s{i} = xm.get_rng_state()\nxm.set_rng_state(s{i})\n"
                         for i in range(300)), id="module"),
    pytest.param("".join(f"def f{i}():\n    s = xm.get_rng_state()\n    xm.set_rng_state(s)\n"
                         for i in range(300)), id="functions"),
])
def test_hundreds_of_rng_reads_and_restores_read_each_scope_once(
        monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """Each read of the RNG state is paired with its restores by the uses of its name in its
    scope: a scope walked again for each read made 1,600 pairs take a minute."""
    import ast
    import types

    from neuron_migrate.rules import rng_pairs

    visited = [0]

    def counted_walk(node: ast.AST):  # type: ignore[no-untyped-def]
        for each in ast.walk(node):
            visited[0] += 1
            yield each

    proxy = types.SimpleNamespace(**{k: getattr(ast, k) for k in dir(ast) if not
                                     k.startswith("__")})
    proxy.walk = counted_walk
    monkeypatch.setattr(rng_pairs, "ast", proxy)
    rng_pairs.rng_facts.cache_clear()
    source = HEAD + body
    _migrate(source)
    nodes = sum(1 for _ in ast.walk(ast.parse(source)))
    assert visited[0] < 6 * nodes, f"{visited[0]} nodes walked of {nodes}"


def test_the_findings_of_one_long_statement_are_located_in_linear_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each finding's position is the count of like nodes before it in its statement: one
    line of thousands of calls counted them again for each."""
    from neuron_migrate.engine import scoped_visitor

    signed: list[int] = []
    real = scoped_visitor.signature
    monkeypatch.setattr(scoped_visitor, "signature", lambda node: signed.append(1) or real(node))
    _migrate(HEAD + "devices = [" + ", ".join(["xm.xla_device()"] * 300) + "]\n")
    assert len(signed) < 20 * 300, f"{len(signed)} signatures worked out"


def test_a_candidate_grown_past_the_limit_after_discovery_is_not_read_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The size seen when the file was found says nothing of the size read: the read itself
    stops at the limit."""
    from neuron_migrate.migrate_file import MAX_BYTES, read_source

    grown = tmp_path / "train.py"
    grown.write_bytes(b"x = 1\n" * (MAX_BYTES // 6 + 1))
    small = os.stat(tmp_path)  # the size the file had when it was found
    monkeypatch.setattr(Path, "stat", lambda self, **kwargs: small)
    result = read_source(grown, "not migrated")
    assert not isinstance(result, bytes)
    assert result.skipped == f"{grown}: larger than 5 MiB, not migrated"


def test_a_candidate_replaced_by_a_fifo_after_discovery_is_not_opened_for_ever(
        tmp_path: Path) -> None:
    import threading

    from neuron_migrate.migrate_file import read_source

    fifo = tmp_path / "train.py"
    os.mkfifo(fifo)
    results: list[object] = []
    reader = threading.Thread(target=lambda: results.append(read_source(fifo, "")),
                              daemon=True)
    reader.start()
    reader.join(DEADLINE)
    if reader.is_alive():  # blocked in open(): a writer lets it go
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(DEADLINE)
        raise AssertionError("the read of a FIFO blocked")
    result = results[0]
    assert not isinstance(result, bytes)
    assert result.error == f"{fifo}: not a regular file (a named pipe)"  # type: ignore[attr-defined]


STUCK_PARSE = '''
import hashlib
import sys
from pathlib import Path

import libcst

from neuron_migrate.cli import app


def parse_module(source, *args, **kwargs):
    if b"stuck" in source:
        Path("stuck.started").write_text("")
        # minutes inside C, as LibCST's native parser on a large file: no handler runs
        hashlib.pbkdf2_hmac("sha256", b"key", b"salt", 10**9)
    return real(source, *args, **kwargs)


real, libcst.parse_module = libcst.parse_module, parse_module
app(["apply", "-j", "1", *sys.argv[1:]])
'''


def test_sigterm_stops_a_single_process_run_inside_the_native_parser(tmp_path: Path) -> None:
    """At -j1 the parse runs in the run's own process: SIGTERM ends it at once, every file
    old or new (those before it written, the one being parsed untouched)."""
    names = [*(f"a{i:02}.py" for i in range(5)), "m_stuck.py", *(f"z{i:02}.py" for i in range(5))]
    for name in names:
        (tmp_path / name).write_text(OLD + ("# stuck\n" if "stuck" in name else ""))
    run = subprocess.Popen([sys.executable, "-c", STUCK_PARSE, *names], cwd=tmp_path,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True)
    try:
        deadline = time.monotonic() + DEADLINE * 3
        while not (tmp_path / "stuck.started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (tmp_path / "stuck.started").exists(), "the run never reached the parse"
        run.send_signal(15)
        sent = time.monotonic()
        out, err = run.communicate(timeout=DEADLINE)
        stopped = time.monotonic() - sent
    finally:
        if run.poll() is None:  # still running: end it, then fail
            os.killpg(run.pid, 9)
            run.wait()
    assert stopped < 4, f"stopped {stopped:.1f} s after SIGTERM"  # at once; the call takes minutes
    assert run.returncode in (-15, 128 + 15), err
    for name in names:
        text = (tmp_path / name).read_text()
        assert text in ({OLD + "# stuck\n"} if "stuck" in name else {OLD, "x = 1\n"}), name
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*names, "stuck.started"])
