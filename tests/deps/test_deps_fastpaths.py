"""The dependency scanner's shortcuts give the answers of the work they skip: the heredoc
check splits only lines that hold `<<`, YAML is composed once per text and walked for its
mappings only, and the token prefilter searches fewer tokens in another order."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from yaml.nodes import MappingNode, Node, SequenceNode

from neuron_migrate.deps import commands, cuda, scan_source, shell, signals, yaml_nodes
from neuron_migrate.deps.entries import Unparsable
from neuron_migrate.deps.lines import logical_lines
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from neuron_migrate.rules.dependencies import RULES

REGISTRY = Registry([rule() for rule in RULES])
LAUNCHING = Registry(all_rules())


def _every_line_split(text: str) -> None:
    """The heredoc check as it was: every logical line split into words."""
    for line in logical_lines(text):
        shell.check_heredoc_line(text, line)


def _verdict(check, text: str) -> tuple[int, str] | None:
    try:
        check(text)
    except Unparsable as problem:
        return problem.line, str(problem)
    return None


PIECES = ["cat <<EOF", "cat <<-EOF", "cat << 'EOF'", "cat <<<word", "EOF", "\tEOF", "echo '<<EOF'",
          'echo "a <<EOF"', "# <<EOF", "x=1 \\", "python train.py", "cmd<<END", "END",
          "a && b <<X", "X", "echo \\<<EOF", "cat <<\\", "EOF2", ""]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=8))
def test_heredoc_check_as_when_every_line_was_split(pieces: list[str]) -> None:
    text = "\n".join(pieces) + "\n"
    lines = list(logical_lines(text))
    assert _verdict(lambda t: shell._check_heredocs(t, lines), text) == \
        _verdict(_every_line_split, text)


def test_an_unended_heredoc_is_still_refused_and_a_quoted_one_is_not_a_heredoc() -> None:
    script = "pip install torch-neuronx\ncat <<EOF > x\nnever ended\n"
    assert "never ended" in (scan_source("a.sh", script.encode(), REGISTRY, True).error or "")
    quoted = "pip install torch-neuronx\necho '<<EOF'\n"
    assert scan_source("a.sh", quoted.encode(), REGISTRY, True).error is None


YAML = """\
a: {b: [1, {c: d}], e: f}
? {complex: key}
: value
list:
  - name: PJRT_DEVICE
    value: NEURON
---
second: [x, {y: z}]
"""


def _walk(node: Node) -> list[Node]:
    """Every node, keys and values alike, in document order (pre-order)."""
    children = [n for pair in node.value for n in pair] if isinstance(node, MappingNode) else \
        node.value if isinstance(node, SequenceNode) else []
    return [node, *(n for child in children for n in _walk(child))]


def test_mappings_are_every_mapping_node_in_document_order() -> None:
    for document in yaml_nodes.compose(YAML):
        assert list(yaml_nodes.mappings(document)) == \
            [n for n in _walk(document) if isinstance(n, MappingNode)]


def test_a_text_composed_again_gives_the_same_nodes_and_errors() -> None:
    first = yaml_nodes.compose(YAML)
    first.clear()  # the caller's list only: the remembered nodes stay whole
    again = yaml_nodes.compose(YAML)
    assert [n.start_mark.index for n in again] == [0, YAML.index("second")]
    assert yaml_nodes.compose("k: v\n")[0].value[0][1].value == "v"
    for _ in range(2):
        with pytest.raises(Unparsable):
            yaml_nodes.compose("a: [\n")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([b"xla", b"XLA", b"neuronx", b"Neuron", b"NEURON", b"pjrt",
                                 b"trn1", b"inf", b"2", b"BUCKET", b"_", b" ", b"x", b"la"]),
                max_size=6).map(b"".join))
def test_prefilter_as_any_token(data: bytes) -> None:
    assert REGISTRY.prefilter(data) == any(token in data for token in REGISTRY.tokens)


class _Counted(bytes):
    searches = 0

    def __contains__(self, token: object) -> bool:
        type(self).searches += 1
        return super().__contains__(token)  # type: ignore[operator]


def test_prefilter_searches_the_same_bytes_once_and_new_bytes_again() -> None:
    """A run asks about a file's bytes twice (where to migrate it, whether to parse it): the
    second answer is the first, but only for that very object."""
    clean = _Counted(b"import os\n" * 100)
    assert not REGISTRY.prefilter(clean) and not REGISTRY.prefilter(clean)
    assert _Counted.searches == len(REGISTRY._search)
    assert REGISTRY.prefilter(bytes(b"import torch_xla\n"))
    assert not REGISTRY.prefilter(bytes(b"import os\n"))
    assert REGISTRY.prefilter(bytes(b"import torch_xla\n"))



SPAWNS = ("import torch_xla.distributed.xla_multiprocessing as xmp\n\n"
          "def _mp_fn(index):\n    pass\n\n"
          "if __name__ == '__main__':\n    xmp.spawn(_mp_fn, nprocs={n})\n")
WORDS = ["pip", "p'i'p", "install", "inst\\all", "torch-neuronx==2.9", "torch_xla", "python",
         'py"th"on', "train.py", "src/train.py", "-m", "src", "torch.distributed.launch", "cd",
         "c'd'", "sub", "pushd", "popd", "X=1", "XLA_USE_BF16=1", "export", "PJRT_DEVICE=NEURON",
         "$PY", "${PIP}", "PY=python3", "neuron_parallel_compile", "config", "set",
         "global.index-url", "https://pip.repos.neuron.amazonaws.com", "&&", ";", "|", "echo",
         "#", "xla_dist", "srun", "sudo", "env", "'", '"', "\\", "trn1.32xlarge", "mkdir"]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Scripts that spawn their own workers, for launch lines (NM816) to find."""
    root = tmp_path_factory.mktemp("launch")
    for folder, count in (("src", 8), ("sub", 2), (".", 4)):
        (root / folder).mkdir(exist_ok=True)
        (root / folder / "train.py").write_text(SPAWNS.format(n=count))
    (root / "src" / "__main__.py").write_text(SPAWNS.format(n=8))
    return root


def _findings(path: str, script: str) -> tuple:
    result = scan_source(path, script.encode(), LAUNCHING, fix=True)
    return result.findings, result.new_source, result.error


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.lists(st.sampled_from(WORDS), max_size=6).map(" ".join), max_size=6))
@example(lines=["python train.py"])
@example(lines=["PY=python3", "$PY train.py"])
@example(lines=["cd src", "python3 train.py"])
@example(lines=["pushd sub", "python3 train.py", "popd", "python3 train.py"])
@example(lines=["pip install torch_xla"])
@example(lines=["pip config set global.index-url https://pip.repos.neuron.amazonaws.com",
                "pip install torch_neuronx"])
@example(lines=["xla_dist x"])
@example(lines=["p'y'thon train.py", "c\"d\" src", "p\\ython3 train.py"])
@example(lines=["neuron_parallel_compile x"])
def test_lines_left_unsplit_change_nothing(tree: Path, lines: list[str]) -> None:
    script = "neuron\n" + "\n".join(lines) + "\n"  # the file names Neuron: it is read
    path = str(tree / "run.sh")
    fast = _findings(path, script)
    original = shell._may_act
    shell._may_act = lambda line: True
    try:
        assert fast == _findings(path, script)
    finally:
        shell._may_act = original


GUARDED = {"INSTANCE": signals.INSTANCE, **{name: getattr(cuda, name) for name in (
    "GPU_RESOURCE", "GPU_LABEL", "COMPOSE_NVIDIA", "GPUS_OPTION", "SLURM_GPUS", "GPU_TOOL",
    "CONDA_CUDA")}}
FRAGMENTS = ["inf2.xlarge", "ml.trn1.32xlarge", "trn1n.32xlarge", "inf2", "nvidia.com/gpu",
             "nvidia.com/gpu.product", "runtime: nvidia", "driver: 'nvidia'", "--gpus all",
             "--runtime=nvidia", "--gres=gpu:4", "--gres gpu", "--gpus-per-node=8", "nvidia-smi",
             "/usr/local/cuda-12/bin/nvcc", "pytorch-cuda=12.1", "cudatoolkit", "cuda-toolkit",
             " ", "\n", "-", ".", "x", "nvidia", "gpu", "large", "trn", "--g"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=8).map("".join))
def test_guarded_expressions_find_what_a_full_scan_finds(text: str) -> None:
    for name, guarded in GUARDED.items():
        assert [m.span() for m in guarded.finditer(text)] == \
            [m.span() for m in guarded.pattern.finditer(text)], name


SHELL_TEXT = st.lists(st.sampled_from(
    ["a", "b=1", "#", "x#y", " ", "\t", "\u00a0", "\u2028", "'", '"', "\\", "&&", "|", ";", "(",
     ")", "&", "$V", "${V:-d}", "pip", "é", "\\\n", "\n"]), max_size=12).map("".join)


@settings(max_examples=500, deadline=None)
@given(SHELL_TEXT)
def test_lines_without_quotes_or_separators_split_as_the_full_reading_splits_them(
        text: str) -> None:
    for line in logical_lines(text):
        assert commands.split_words(line) == commands._quoted_words(line), line
