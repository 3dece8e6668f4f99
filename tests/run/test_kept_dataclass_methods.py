"""The compiled code of dataclasses' methods, kept between runs
(`neuron_migrate.kept_code.dataclass_methods`): a later process takes it from the file instead of compiling it, and the classes behave as
the builtin `exec` makes them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from neuron_migrate.kept_code import dataclass_methods
from tests.conftest import ROOT

_MARKER = "a global of this module"
_TEXT = "def __create_fn__():\n def f(x: int) -> int:\n  return x + 1\n return f"

_CHILD = """
import sys
from pathlib import Path
from neuron_migrate.kept_code import dataclass_methods
dataclass_methods.FOLDER = Path(sys.argv[1])
dataclass_methods.install()
import dataclasses
store = dataclasses.exec

@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int = 2

point = Point(1)
assert point == Point(1, 2) and repr(point) == "Point(x=1, y=2)" and hash(point) == hash(Point(1))
print(len(store.files["__main__"].new), len(store.files["__main__"].used))
"""


def _child(folder: Path, *environment: tuple[str, str]) -> tuple[int, int]:
    done = subprocess.run([sys.executable, "-c", _CHILD, str(folder)], capture_output=True,
                          text=True, check=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                               **dict(environment)})
    compiled, used = done.stdout.split()
    return int(compiled), int(used)


def test_a_later_process_takes_the_code_from_the_file(tmp_path: Path) -> None:
    compiled, used = _child(tmp_path)
    assert compiled == used > 0
    assert len(list(tmp_path.glob("dataclass-code.*.marshal"))) == 1
    assert _child(tmp_path) == (0, used)  # nothing compiled: every text was in the file


def test_nothing_is_written_when_python_writes_no_bytecode(tmp_path: Path) -> None:
    compiled, _ = _child(tmp_path, ("PYTHONDONTWRITEBYTECODE", "1"))
    assert compiled > 0 and list(tmp_path.iterdir()) == []


def test_code_is_compiled_as_exec_compiles_a_text(tmp_path: Path) -> None:
    """This test module has `from __future__ import annotations`; `exec` called by
    `dataclasses` does not, so annotations stay objects, not strings."""
    store = dataclass_methods._Store(tmp_path, "tag")
    namespace: dict[str, object] = {}
    store(_TEXT, {"__builtins__": __builtins__}, namespace)
    function = namespace["__create_fn__"]()  # type: ignore[operator]
    assert function(1) == 2 and function.__annotations__ == {"x": int, "return": int}
    assert function.__code__.co_filename == "<string>"


def test_a_file_of_another_bytecode_version_is_ignored(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    store = dataclass_methods._Store(tmp_path, "tag")
    store.code(_TEXT, "package")
    store.save()
    reread = dataclass_methods._Store(tmp_path, "tag")
    reread.code(_TEXT, "package")
    assert reread.files["package"].new == {}  # taken from the file
    path = reread.path("package")
    path.write_bytes(b"\0\0\0\0" + path.read_bytes()[4:])
    other = dataclass_methods._Store(tmp_path, "tag")
    other.code(_TEXT, "package")
    assert list(other.files["package"].new) == [_TEXT]


def test_each_package_has_a_file_of_its_own(tmp_path: Path, monkeypatch) -> None:
    """A run that never imports LibCST does not read the code of LibCST's classes."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    store = dataclass_methods._Store(tmp_path, "tag")
    store(_TEXT, {"__name__": "libcst._nodes.op"}, {})
    store(_TEXT.replace("1", "2"), {"__name__": "neuron_migrate.model"}, {})
    store.save()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "dataclass-code.libcst.tag.marshal", "dataclass-code.neuron_migrate.tag.marshal"]
    later = dataclass_methods._Store(tmp_path, "tag")
    later(_TEXT.replace("1", "2"), {"__name__": "neuron_migrate.options"}, {})
    assert list(later.files) == ["neuron_migrate"] and later.files["neuron_migrate"].new == {}


def test_a_call_not_made_by_dataclasses_runs_as_the_builtin_would(tmp_path: Path) -> None:
    """Without globals, `exec` runs in its caller's globals (this module's)."""
    store = dataclass_methods._Store(tmp_path, "tag")
    namespace: dict[str, object] = {}
    store("result = _MARKER", None, namespace)
    assert namespace == {"result": _MARKER} and store.files == {}


def test_the_run_installs_it_and_leaves_classes_as_they_are() -> None:
    """And the kept regular expressions (tests/run/test_kept_regexes.py) with it."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys, dataclasses, importlib, re; sys.argv = "
         "['neuron-migrate', 'check', '-']; from neuron_migrate.entry import main\ntry:\n "
         "main()\nexcept SystemExit:\n pass\ncompiler = getattr(re, '_compiler', None) or "
         "importlib.import_module('sre_compile')\n"
         "print(type(dataclasses.exec).__name__, type(compiler.compile).__name__)"],
        capture_output=True, text=True, input="x = 1\n", timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.stdout.strip().splitlines()[-1] == "_Store _Compile"
