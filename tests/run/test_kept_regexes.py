"""The regular expressions modules compile at import, kept between runs
(`neuron_migrate.kept_code.regexes`): a later process takes their code from the file, and every
pattern taken from it is the pattern `re` would compile (`==` compares text, flags and the
engine's code)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from neuron_migrate.kept_code.store import KeptFile
from tests.conftest import ROOT

_MODULE = r'''
import re
PATTERNS = [
    (r"(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<value>\d+)", 0),
    (r"""
        ^ torch [-_] (?: neuronx | xla )   # a package
        (?: \s* (==|>=|<) \s* ([\d.]+) )?  # and its pin
    """, re.VERBOSE | re.IGNORECASE | re.MULTILINE),
    (rb"(?<![\w.])xm\.(mark_step|xla_device)\(", 0),
    (r"[^\x00-\x7f]+|(?i:CUDA)", re.ASCII),
]
COMPILED = [re.compile(text, flags) for text, flags in PATTERNS]
'''

_CHILD = """
import importlib, json, re, sys
from pathlib import Path
from neuron_migrate.kept_code import regexes
regexes.FOLDER = Path(sys.argv[1])
regexes.install()
sys.path.insert(0, sys.argv[1])
hook = (getattr(re, "_compiler", None) or importlib.import_module("sre_compile")).compile
module = importlib.import_module("kept_patterns")
late = re.compile("(?P<late>x+)" + sys.argv[2])  # compiled at run time, not at import
assert late.match("xx" + sys.argv[2]).group("late") == "xx"
same = [hook.original(text, flags) == compiled
        for (text, flags), compiled in zip(module.PATTERNS, module.COMPILED)]
first = module.COMPILED[0].search("lr = 3")
print(json.dumps({"type": type(hook).__name__, "new": len(hook.kept.new), "same": same,
                  "groups": first.groupdict(), "index": dict(module.COMPILED[0].groupindex),
                  "kept_late": any(key[0] == late.pattern for key in hook.kept.new)}))
"""


def _child(folder: Path, *environment: tuple[str, str], late: str = "y") -> dict:
    (folder / "kept_patterns.py").write_text(_MODULE)
    done = subprocess.run([sys.executable, "-c", _CHILD, str(folder), late],
                          capture_output=True, text=True, check=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                               **dict(environment)})
    return json.loads(done.stdout)


def _kept(folder: Path) -> list[Path]:
    return list(folder.glob("regex-code.*.marshal"))


def test_a_later_process_takes_the_code_from_the_file(tmp_path: Path) -> None:
    first = _child(tmp_path)
    assert first["type"] == "_Compile"
    assert first["new"] >= 4 and first["same"] == [True] * 4 and not first["kept_late"]
    assert first["groups"] == {"name": "lr", "value": "3"}
    assert len(_kept(tmp_path)) == 1
    later = _child(tmp_path, late="z")
    assert later["new"] == 0  # every pattern compiled at import came from the file
    assert later["same"] == [True] * 4 and later["groups"] == first["groups"]
    assert later["index"] == {"name": 1, "value": 2}


def test_nothing_is_written_when_python_writes_no_bytecode(tmp_path: Path) -> None:
    assert _child(tmp_path, ("PYTHONDONTWRITEBYTECODE", "1"))["new"] >= 4
    assert _kept(tmp_path) == []


def test_what_a_run_imports_comes_back_the_same(tmp_path: Path) -> None:
    """Every pattern the engine, the rules and the dependency readers compile at import,
    taken from the file, equals the pattern `re` compiles from its text."""
    script = ("import sys, re\nfrom pathlib import Path\n"
              "from neuron_migrate.kept_code import regexes\n"
              "regexes.FOLDER = Path(sys.argv[1])\nregexes.install()\n"
              "import neuron_migrate.engine.migrate, neuron_migrate.rules\n"
              "import neuron_migrate.deps.yaml_nodes, neuron_migrate.deps.shell\n")
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True,
                   timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    [path] = _kept(tmp_path)
    check = ("import _sre, re, sys, importlib\nfrom pathlib import Path\n"
             "from neuron_migrate.kept_code import regexes\n"
             "from neuron_migrate.kept_code.store import KeptFile\n"
             "compiler = getattr(re, '_compiler', None) or importlib.import_module('sre_compile')\n"
             "kept = KeptFile(Path(sys.argv[1]), regexes.salt())\n"
             "assert len(kept.kept) > 100, len(kept.kept)\n"
             "bad = [key for key, found in kept.kept.items()\n"
             "       if _sre.compile(key[0], *found) != compiler.compile(*key)]\n"
             "print(len(kept.kept), bad)\n")
    done = subprocess.run([sys.executable, "-B", "-c", check, str(path)], check=True,
                          capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    count, bad = done.stdout.split(maxsplit=1)
    assert int(count) > 100 and bad.strip() == "[]"


def test_a_file_of_another_engine_is_ignored(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    path = tmp_path / "kept.marshal"
    written = KeptFile(path, "sre 1 4")
    written.add(("a+", 0), "code")
    written.save()
    assert KeptFile(path, "sre 1 4").get(("a+", 0)) == "code"
    assert KeptFile(path, "sre 2 4").get(("a+", 0)) is None
