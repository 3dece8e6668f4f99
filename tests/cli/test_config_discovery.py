"""Each file is migrated with its own nearest configuration, as ruff resolves its settings:
the order of the paths never matters, relative paths are the configuration's own, and
`--config FILE` replaces discovery for every file."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_migrate import catalogue, config, entry
from neuron_migrate.command import Request
from neuron_migrate.config import ConfigFinder
from tests.conftest import cli

XLA = "import torch_xla.core.xla_model as xm\nxm.mark_step()\n"
IGNORE_NM110 = '[tool.neuron-migrate]\nignore = ["NM110"]\n'
IGNORE_OWN = 'ignore = ["NM110"]\n'


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _rules(*args: str) -> dict[str, set[str]]:
    """Each Python file checked, with the rule ids reported on it."""
    run = cli("check", "--format", "json", *args)
    assert run.exit_code in (0, 1), run.stderr
    report = run.json()
    found: dict[str, set[str]] = {f["path"]: set() for f in report["files"]}
    for finding in report["findings"]:
        found[finding["path"]].add(finding["rule_id"])
    return {path: rules for path, rules in found.items() if path.endswith(".py")}


def test_each_file_gets_its_own_configuration_whatever_the_order(in_tmp: Path) -> None:
    _write(in_tmp, {"a/pyproject.toml": IGNORE_NM110, "a/x.py": XLA, "b/y.py": XLA})
    forward, backward = _rules("a", "b"), _rules("b", "a")
    assert forward == backward
    assert "NM110" not in forward["a/x.py"] and "NM110" in forward["b/y.py"]
    # files named one by one too
    assert _rules("b/y.py", "a/x.py") == _rules("a/x.py", "b/y.py") == forward


def test_a_pyproject_without_the_table_is_passed_over(in_tmp: Path) -> None:
    _write(in_tmp, {"pyproject.toml": IGNORE_NM110, "sub/pyproject.toml": "[tool.ruff]\nx = 1\n",
                    "sub/x.py": XLA})
    assert "NM110" not in _rules("sub")["sub/x.py"]


def test_the_nearest_configuration_alone_applies_and_our_own_file_wins(in_tmp: Path) -> None:
    """No merging with the configuration above (as ruff); in one folder `.neuron-migrate.toml`
    wins over `neuron-migrate.toml`, which wins over pyproject.toml; an empty file of our own
    is a configuration too."""
    _write(in_tmp, {"pyproject.toml": IGNORE_NM110, "x.py": XLA,
                    "own/neuron-migrate.toml": "", "own/x.py": XLA,
                    "both/pyproject.toml": '[tool.neuron-migrate]\nselect = ["NM2"]\n',
                    "both/neuron-migrate.toml": 'ignore = ["NM001"]\n', "both/x.py": XLA,
                    "dot/.neuron-migrate.toml": "", "dot/neuron-migrate.toml": IGNORE_OWN,
                    "dot/x.py": XLA})
    found = _rules(".")
    assert "NM110" not in found["x.py"]
    assert "NM110" in found["own/x.py"]
    assert "NM110" in found["both/x.py"] and "NM001" not in found["both/x.py"]
    assert "NM110" in found["dot/x.py"]


def test_relative_paths_are_the_configurations_own(in_tmp: Path) -> None:
    _write(in_tmp, {
        "sub/pyproject.toml": '[tool.neuron-migrate]\nexclude = ["gen/"]\n'
                              'per-file-ignores = {"tests/*" = ["NM110"]}\n',
        "sub/gen/g.py": XLA, "sub/tests/t.py": XLA, "sub/m.py": XLA,
        "gen/g.py": XLA, "tests/t.py": XLA})
    found = _rules(".")
    assert set(found) == {"sub/tests/t.py", "sub/m.py", "gen/g.py", "tests/t.py"}
    assert "NM110" not in found["sub/tests/t.py"] and "NM110" in found["tests/t.py"]


def test_config_option_replaces_discovery_with_paths_from_the_working_directory(
        in_tmp: Path) -> None:
    _write(in_tmp, {"ci/neuron-migrate.toml": 'ignore = ["NM001"]\nexclude = ["skip/"]\n',
                    "sub/pyproject.toml": IGNORE_NM110, "sub/x.py": XLA, "skip/s.py": XLA})
    found = _rules("--config", "ci/neuron-migrate.toml", ".")
    assert set(found) == {"sub/x.py"}
    assert found["sub/x.py"] == {"NM110"}  # the --config file's rules, not sub's
    run = cli("check", "--config", "nowhere.toml", ".")
    assert run.exit_code == 2 and "nowhere.toml: no such configuration file" in run.stderr


def test_a_broken_configuration_below_the_paths_is_an_error_naming_it(in_tmp: Path) -> None:
    _write(in_tmp, {"x.py": XLA, "deep/er/pyproject.toml": "[tool.neuron-migrate]\nbogus = 1\n",
                    "deep/er/y.py": XLA, "own/neuron-migrate.toml": "select = [\n"})
    run = cli("check", "deep")
    assert run.exit_code == 2
    assert f"{in_tmp / 'deep' / 'er' / 'pyproject.toml'}: unknown key 'bogus'" in run.stderr
    run = cli("check", "own")
    assert run.exit_code == 2 and "neuron-migrate.toml: not valid TOML" in run.stderr


def test_configurations_are_looked_up_once_per_folder(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Path] = []
    real = config.config_in
    monkeypatch.setattr(config, "config_in",
                        lambda folder, *args: asked.append(folder) or real(folder, *args))
    (tmp_path / "pyproject.toml").write_text(IGNORE_NM110)
    finder = ConfigFinder(catalogue.rule_ids())
    for leaf in ("a/b/c", "a/b/d", "a/e", "a/b/c"):
        assert finder.nearest(tmp_path / leaf).ignore == ("NM110",)
    assert sorted(asked) == sorted(tmp_path / p for p in ("a/b/c", "a/b/d", "a/e", "a/b", "a",
                                                           "."))


@pytest.mark.parametrize(("args", "expected"), [
    (["check", "--config", "c.toml", "--extend-exclude", "x/", "--extend-exclude=y", "a.py"],
     {"config": Path("c.toml"), "extend_exclude": ["x/", "y"]}),
    (["apply", "--force-exclude", "--no-respect-gitignore", "--no-default-excludes", "a.py"],
     {"force_exclude": True, "respect_gitignore": False, "default_excludes": False}),
    (["scan", "--no-force-exclude", "--respect-gitignore", "--config=pyproject.toml", "."],
     {"force_exclude": False, "respect_gitignore": True, "config": Path("pyproject.toml")}),
])
def test_the_lean_command_line_takes_the_file_selection_options_as_typer_does(
        args: list[str], expected: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> None:
    import neuron_migrate.cli

    made: list[Request] = []
    monkeypatch.setattr(neuron_migrate.cli, "execute",
                        lambda request, load: made.append(request) or 0)
    assert cli(*args).exit_code == 0
    assert entry.lean_request(args) == made[0]
    assert {name: getattr(made[0], name) for name in expected} == expected


def test_a_config_file_given_is_anchored_at_the_working_directory(in_tmp: Path) -> None:
    """As ruff reads `--config`: its default excludes and patterns start from the working
    directory, not from the file's folder."""
    _write(in_tmp, {"ci/neuron-migrate.toml": 'extend-exclude = ["/gen/"]\n', "build/b.py": XLA,
                    "ci/build/c.py": XLA, "gen/g.py": XLA, "ci/gen/h.py": XLA})
    assert set(_rules("--config", "ci/neuron-migrate.toml", ".")) == {"ci/build/c.py",
                                                                      "ci/gen/h.py"}
