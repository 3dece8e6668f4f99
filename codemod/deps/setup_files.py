"""setup.py (parsed with `ast`, never executed or imported) and setup.cfg. Both are reported,
not edited: setup.py is code, and a setup.cfg pin is usually echoed in a lockfile or image."""

from __future__ import annotations

import ast
import re
import warnings

from neuron_migrate.deps import check
from neuron_migrate.deps.emit import Emitter
from neuron_migrate.deps.entries import Manifest, Unparsable, entry_from, parse_requirement

SETUP_PY = "setup.py is code and is not edited: change this string by hand"
SETUP_CFG = "setup.cfg is not edited: change this line by hand"
CFG_KEYS = frozenset({"install_requires", "setup_requires", "tests_require"})
SECTION = re.compile(r"^\[([^\]]+)\]")
KEY = re.compile(r"^([\w.-]+)\s*[=:]\s*(.*)$")


def scan_setup_py(text: str, emitter: Emitter, path: str = "") -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences are the author's business
            tree = ast.parse(text.encode("utf-8", "surrogateescape"), filename=path)
    except SyntaxError as error:
        raise Unparsable(error.lineno or 0, f"not valid Python ({error.msg})") from None
    except ValueError as error:  # null bytes, on some Python versions
        raise Unparsable(0, f"not valid Python ({error})") from None
    manifest = Manifest(not_edited=SETUP_PY)
    own_name = {id(k.value) for k in ast.walk(tree) if isinstance(k, ast.keyword)
                and k.arg == "name"}  # `setup(name="apex")` names the project, not a need
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and "\n" not in node.value and id(node) not in own_name:
            requirement = parse_requirement(node.value)
            if requirement is not None:
                offset = emitter.starts[node.lineno - 1] + len(
                    text[emitter.starts[node.lineno - 1]:].encode()[:node.col_offset].decode(
                        errors="ignore"))
                manifest.entries.append(entry_from(requirement, node.value, offset))
    manifest.entries.sort(key=lambda e: e.offset)
    check.emit(manifest, emitter)


def scan_setup_cfg(text: str, emitter: Emitter, path: str = "") -> None:
    manifest = Manifest(not_edited=SETUP_CFG)
    section, key, offset = "", "", 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        header = SECTION.match(body)
        if header:
            section, key = header[1].strip(), ""
        elif body[:1] not in (" ", "\t") and (match := KEY.match(body)):
            key = match[1]
            _cfg_value(match[2], offset + match.start(2), section, key, manifest)
        elif body.strip() and body[:1] in (" ", "\t"):
            _cfg_value(body.strip(), offset + len(body) - len(body.lstrip()), section, key,
                       manifest)
        offset += len(line)
    check.emit(manifest, emitter)


def _cfg_value(value: str, offset: int, section: str, key: str, manifest: Manifest) -> None:
    wanted = (section == "options" and key in CFG_KEYS) or section == "options.extras_require"
    value = value.split(" #", 1)[0].strip()
    requirement = parse_requirement(value) if wanted and value and value[0] not in "#;" else None
    if requirement is not None:
        manifest.entries.append(entry_from(requirement, value, offset))
