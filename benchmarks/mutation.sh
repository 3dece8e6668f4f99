#!/usr/bin/env bash
# Mutation testing of the code whose mistakes cost users most, each part against only the tests
# that cover it (docs/development.md, "Test suite strength"). Needs `pip install -e ".[test,bench]"`.
#
#   benchmarks/mutation.sh [versions|guards|exits|writer]...   (all four by default)
#
# mutmut 3 mutates a copy, never this checkout: each part gets a folder under
# ${MUTATION_DIR:-/tmp/neuron-migrate-mutation} holding the committed tree in the layout the
# installed package has (codemod/ as neuron_migrate/, rules/ and emulator/ inside it), where
# `mutmut results` and `mutmut show NAME` can be run afterwards. One process, nice'd.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BASE=${MUTATION_DIR:-/tmp/neuron-migrate-mutation}
MUTMUT=${MUTMUT:-mutmut}

part() {  # part NAME "GLOBS" "MUTANT NAME PATTERNS" TEST...
    local name=$1 globs=$2 names=$3 dir=$BASE/$1
    shift 3
    rm -rf "$dir" && mkdir -p "$dir"
    git -C "$ROOT" archive HEAD | tar -x -C "$dir"
    (
        cd "$dir"
        mv codemod neuron_migrate && mv rules neuron_migrate/rules && mv emulator neuron_migrate/emulator
        ln -s neuron_migrate codemod  # tests read data files by their repository path
        # one process, and no test that needs torch or the installed console script
        sed -i 's/addopts = \["-n", "auto", "-m", "not slow"\]/addopts = ["-p", "no:xdist", "-m", "not slow and not torch"]/' pyproject.toml
        {
            echo "[mutmut]"
            echo "source_paths=neuron_migrate"
            echo "only_mutate="; for g in $globs; do echo "    $g"; done
            echo "pytest_add_cli_args_test_selection="; for t in "$@"; do echo "    $t"; done
            echo "track_dependencies=false"; echo "use_git_change_detection=false"
            echo "also_copy="  # the rest of the tree, which tests read by its path
            ls -A | grep -vxE 'neuron_migrate|tests|setup.cfg|pyproject.toml|mutants' | sed 's/^/    /'
        } > setup.cfg
        # shellcheck disable=SC2086  # the patterns are words
        nice -n 10 "$MUTMUT" run --max-children 1 $names > run.log 2>&1 || true
        "$MUTMUT" results --all true > results.txt 2>&1 || true
        printf '%s: %s killed of %s\n' "$name" "$(grep -c ': killed' results.txt || true)" \
            "$(grep -c ': ' results.txt || true)"
    )
}

for name in "${@:-versions guards exits writer}"; do
  for one in $name; do
    case $one in
    versions) part versions "neuron_migrate/deps/versions.py" "" \
        tests/deps/test_deps_versions.py tests/deps/test_deps_rules.py tests/deps/test_deps_cuda.py ;;
    guards) part guards "neuron_migrate/engine/kept_calls.py neuron_migrate/engine/nameguard.py
        neuron_migrate/engine/failsafe.py" "" \
        tests/engine/test_nameguard.py tests/engine/test_catching.py tests/engine/test_review_pairs.py tests/engine/test_failsafe.py ;;
    exits) part exits "neuron_migrate/run_result.py neuron_migrate/gate/outcome.py
        neuron_migrate/report/readiness.py" "neuron_migrate.run_result.xǁRunResultǁexit_code*
        neuron_migrate.run_result.xǁRunResultǁneeds_attention* neuron_migrate.gate.outcome.x_exit_status*
        neuron_migrate.gate.outcome.x__errors_only* neuron_migrate.report.readiness.x_audit_exit*" \
        tests/deps/test_scan_cli.py tests/gate/test_gate_baseline.py tests/rules/test_readiness.py \
        tests/run/test_exit_codes.py ;;
    writer) part writer "neuron_migrate/files/fileio.py" "" \
        tests/files/test_fileio.py ;;
    *) echo "unknown part: $one (versions, guards, exits, writer)" >&2; exit 2 ;;
    esac
  done
done
