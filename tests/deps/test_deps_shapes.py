"""The install-line shapes real repositories use, one line
each: what is found, and what the line becomes."""

from __future__ import annotations

import pytest

from neuron_migrate.deps import scan_source
from neuron_migrate.registry import Registry
from neuron_migrate.rules.dependencies import RULES

REGISTRY = Registry([rule() for rule in RULES])
INDEXES = ("--extra-index-url https://pip.repos.neuron.amazonaws.com "
           "--extra-index-url https://download.pytorch.org/whl/cpu")
NATIVE = 'torch-neuronx==2.14.* "neuronx-cc==2.*" nki'


@pytest.mark.parametrize(("line", "fixed"), [
    (f"pip install {INDEXES} torch-neuronx neuronx-cc==2.* nki",
     f'pip install {INDEXES} "torch-neuronx==2.14.*" neuronx-cc==2.* nki'),
    (f"pip3 install -U --no-deps {INDEXES} torch_neuronx==2.9.* nki neuronx-cc==2.*",
     f'pip3 install -U --no-deps {INDEXES} "torch_neuronx==2.14.*" nki neuronx-cc==2.*'),
    (f"python -m pip install --force-reinstall {INDEXES} 'torch-neuronx==2.1.*' nki "
     "neuronx-cc==2.*",
     f"python -m pip install --force-reinstall {INDEXES} 'torch-neuronx==2.14.*' nki "
     "neuronx-cc==2.*"),
    (f"${{PIP}} install --no-cache-dir {INDEXES} torch-neuronx==2.9.* torch-xla nki "
     "neuronx-cc==2.*",
     f'${{PIP}} install --no-cache-dir {INDEXES} "torch-neuronx==2.14.*" nki neuronx-cc==2.*'),
    (f"sudo uv pip install {INDEXES} torch-neuronx==2.9.0.2.15.32035",
     f'sudo uv pip install {INDEXES} "torch-neuronx==2.14.*" "neuronx-cc==2.*" nki'),
    (f"cd /src && pip install {INDEXES} torch-neuronx==2.9.0.2.15.32035 && cd -",
     f'cd /src && pip install {INDEXES} "torch-neuronx==2.14.*" "neuronx-cc==2.*" nki && cd -'),
])
def test_pip_line_shapes(line: str, fixed: str) -> None:
    result = scan_source("install.sh", f"{line}\n".encode(), REGISTRY, fix=True)
    assert (result.new_source or b"").decode() == f"{fixed}\n"


def test_a_computed_index_url_is_judged_by_its_value() -> None:
    data = (b"NEURON_INDEX=https://pip.repos.neuron.amazonaws.com\n"
            b'pip install --extra-index-url "$NEURON_INDEX" ' + NATIVE.encode() + b"\n")
    (finding,) = scan_source("install.sh", data, REGISTRY, fix=True).findings
    assert (finding.rule_id, finding.line) == ("NM810", 2)


def test_a_version_variable_used_elsewhere_is_not_moved() -> None:
    data = (b"ARG VER=2.9.0.2.15.32035\nFROM ubuntu:24.04\nARG VER\n"
            b"RUN pip install torch-neuronx==${VER} nki neuronx-cc==2.*\n"
            b"LABEL neuronx=${VER}\n")
    result = scan_source("Dockerfile", data, REGISTRY, fix=True)
    assert result.new_source is None
    assert [(f.rule_id, f.line, f.kind.value) for f in result.findings] == \
        [("NM801", 4, "review")]


def test_a_pip_install_of_only_xla_packages_is_reported_not_emptied() -> None:
    data = b"FROM ubuntu:24.04\nRUN pip install torch-xla libneuronxla\n"
    result = scan_source("Dockerfile", data, REGISTRY, fix=True)
    assert result.new_source is None
    assert {f.rule_id for f in result.findings} == {"NM806"}


def test_run_mount_flags_and_comment_lines_inside_a_continuation() -> None:
    data = (b"FROM ubuntu:24.04\nRUN --mount=type=cache,target=/root/.cache \\\n"
            b"    # the Neuron stack\n    pip install torch-neuronx==2.9.0.2.15.32035 nki \\\n"
            b"      neuronx-cc==2.*\n")
    result = scan_source("Dockerfile", data, REGISTRY, fix=True)
    assert [(f.rule_id, f.line) for f in result.findings] == [("NM801", 4)]
    assert b'"torch-neuronx==2.14.*" nki' in (result.new_source or b"")
