"""`[tool.neuron-migrate]` is found in every spelling TOML allows, and every key and rule id in
it is checked, with the file and the key named."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_migrate import catalogue
from neuron_migrate.config import ConfigError, load_config
from tests.conftest import cli

RULE_IDS = catalogue.rule_ids()

# the same configuration, `ignore = ["NM110"]` and `per-file-ignores = {"tests/*" = ["NM101"]}`,
# spelt every way TOML allows
SPELLINGS = {
    "header": '[tool.neuron-migrate]\nignore = ["NM110"]\n'
              'per-file-ignores = {"tests/*" = ["NM101"]}\n',
    "spaces in the header": '[ tool . neuron-migrate ]\nignore = ["NM110"]\n'
                            'per-file-ignores = { "tests/*" = [ "NM101" ] }\n',
    "quoted key in the header": '[tool."neuron-migrate"]\nignore = ["NM110"]\n'
                                "per-file-ignores = {'tests/*' = ['NM101']}\n",
    "literal-quoted keys": "['tool'.'neuron-migrate']\nignore = ['NM110']\n"
                           "per-file-ignores = {'tests/*' = ['NM101']}\n",
    "escaped quoted key": '[tool."neuron\\u002Dmigrate"]\nignore = ["NM110"]\n'
                          'per-file-ignores = {"tests/*" = ["NM101"]}\n',
    "inline table under [tool]": '[tool]\nneuron-migrate = {ignore = ["NM110"], '
                                 'per-file-ignores = {"tests/*" = ["NM101"]}}\n',
    "dotted keys under [tool]": '[tool]\nneuron-migrate.ignore = ["NM110"]\n'
                                'neuron-migrate.per-file-ignores."tests/*" = ["NM101"]\n',
    "dotted keys at the top": 'tool.neuron-migrate.ignore = ["NM110"]\n'
                              'tool.neuron-migrate.per-file-ignores = {"tests/*" = ["NM101"]}\n',
    "per-file-ignores as a sub-table": '[tool.neuron-migrate]\nignore = ["NM110"]\n\n'
                                       '[tool.neuron-migrate.per-file-ignores]\n'
                                       '"tests/*" = ["NM101"]\n',
    "sub-tables only": '[project]\nname = "x"\n\n[tool.neuron-migrate.per-file-ignores]\n'
                       '"tests/*" = ["NM101"]\n\n[tool.ruff]\nline-length = 99\n\n'
                       '[tool.neuron-migrate]\nignore = ["NM110"]\n',
    "after an array of tables": '[[tool.other]]\nx = 1\n\n'
                                                   '[tool.neuron-migrate]\nignore = ["NM110"]\n'
                                                   '[tool.neuron-migrate.per-file-ignores]\n'
                                                   '"tests/*" = ["NM101"]\n',
}


@pytest.mark.parametrize("text", SPELLINGS.values(), ids=SPELLINGS.keys())
def test_every_spelling_of_the_table_is_read(tmp_path: Path, text: str) -> None:
    (tmp_path / "pyproject.toml").write_text(text)
    config = load_config([tmp_path], RULE_IDS)
    assert config.path == tmp_path / "pyproject.toml"
    assert config.ignore == ("NM110",)
    assert config.per_file_ignores == (("tests/*", ("NM101",)),)


@pytest.mark.parametrize("text", SPELLINGS.values(), ids=SPELLINGS.keys())
def test_every_spelling_has_its_rule_ids_checked(tmp_path: Path, text: str) -> None:
    for wrong in ({"NM110": "NM998"}, {"NM101": "NM997"}):
        (old, new), = wrong.items()
        (tmp_path / "pyproject.toml").write_text(text.replace(old, new))
        with pytest.raises(ConfigError, match=f"unknown rule id or prefix '{new}'") as raised:
            load_config([tmp_path], RULE_IDS)
        key = "ignore" if old == "NM110" else "per-file-ignores 'tests/*'"
        assert f"{tmp_path / 'pyproject.toml'}: [tool.neuron-migrate] {key}:" in str(raised.value)


def test_only_a_sub_table_is_still_the_configuration(in_tmp: Path) -> None:
    (in_tmp / "pyproject.toml").write_text('[tool.neuron-migrate.per-file-ignores]\n'
                                           '"tests/*" = ["NM110"]\n')
    (in_tmp / "tests").mkdir()
    (in_tmp / "tests" / "t.py").write_text("import torch_xla\ntorch_xla.sync()\n")
    (in_tmp / "main.py").write_text("import torch_xla\ntorch_xla.sync()\n")
    report = cli("check", ".", "--format", "json").json()
    found = {(f["path"], f["rule_id"]) for f in report["findings"]}
    assert ("main.py", "NM110") in found and ("tests/t.py", "NM110") not in found


def test_inline_table_under_tool_takes_effect(in_tmp: Path) -> None:
    (in_tmp / "pyproject.toml").write_text('[tool]\nneuron-migrate = {ignore = ["NM110"]}\n')
    (in_tmp / "main.py").write_text("import torch_xla\ntorch_xla.sync()\n")
    report = cli("check", ".", "--format", "json").json()
    assert "NM110" not in {f["rule_id"] for f in report["findings"]}


@pytest.mark.parametrize("table,message", [
    ('per-file-ignores = {"tests/*" = ["NM999"]}',
     "per-file-ignores 'tests/*': unknown rule id or prefix 'NM999'"),
    ('[tool.neuron-migrate.per-file-ignores]\n"tests/*" = ["NM999"]',
     "per-file-ignores 'tests/*': unknown rule id or prefix 'NM999'"),
    ('per-file-ignores = {"tests/*" = "NM110"}', "per-file-ignores 'tests/*' must be a list"),
    ('per-file-ignores = ["NM110"]', "per-file-ignores must map globs to lists of rule ids"),
    ('select = ["NM1", "XX"]', "[tool.neuron-migrate] select: unknown rule id or prefix 'XX'"),
    ('ignore = [""]', "[tool.neuron-migrate] ignore: unknown rule id or prefix ''"),
    ('exclude = "build"', "exclude must be a list of strings"),
    ('annotate = 1', "annotate must be true or false"),
    ('unknown = 1', "unknown key 'unknown'"),
])
def test_every_key_is_checked_and_named(in_tmp: Path, table: str, message: str) -> None:
    header = "" if table.startswith("[") else "[tool.neuron-migrate]\n"
    (in_tmp / "pyproject.toml").write_text(f"{header}{table}\n")
    (in_tmp / "main.py").write_text("x = 1\n")
    run = cli("check", "main.py")
    assert run.exit_code == 2
    assert f"{in_tmp / 'pyproject.toml'}: " in run.stderr and message in run.stderr


def test_table_that_is_not_a_table_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool]\nneuron-migrate = ["NM110"]\n')
    with pytest.raises(ConfigError, match=r"\[tool.neuron-migrate\] must be a table"):
        load_config([tmp_path], RULE_IDS)


def test_nearest_file_with_the_table_wins_and_others_are_passed_over(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool]\nneuron-migrate.ignore = ["NM110"]\n')
    inner = tmp_path / "pkg"
    inner.mkdir()
    # no table here (a mention in a value is not one), and a `tool` that is not a table
    (inner / "pyproject.toml").write_text('description = "uses neuron-migrate"\ntool = 1\n')
    config = load_config([inner / "main.py"], RULE_IDS)
    assert config.path == tmp_path / "pyproject.toml" and config.ignore == ("NM110",)


@pytest.mark.parametrize("text", ["[project\nname = \n",
                                  '[project]\nname = "C:\\\\users"\nversion = \n'])
def test_unrelated_broken_pyproject_files_are_passed_over(tmp_path: Path, text: str) -> None:
    # broken TOML that does not name the table: someone else's problem, never an error
    (tmp_path / "pyproject.toml").write_text(text)
    assert load_config([tmp_path], RULE_IDS).path is None


def test_broken_toml_that_may_hold_the_table_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.neuron-migrate]\nignore = [\n")
    with pytest.raises(ConfigError, match=r"cannot read \[tool.neuron-migrate\]: not valid"):
        load_config([tmp_path], RULE_IDS)
