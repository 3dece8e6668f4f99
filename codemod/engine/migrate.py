"""The per-file runner: bytes in, `FileResult` out. No printing, no writing."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import io
import signal
import threading
import tokenize
import warnings
from collections.abc import Callable, Iterator

import libcst as cst

from neuron_migrate.analysis.analyse import Analysis, analyse
from neuron_migrate.engine.codegen import module_bytes
from neuron_migrate.engine.compile_check import compile_check
from neuron_migrate.files.diff import carry_over, confined
from neuron_migrate.engine.failsafe import never_raise
from neuron_migrate.engine.imports import ImportNote
from neuron_migrate.analysis.locate import Locator
from neuron_migrate.engine.mask import Masked, mask
from neuron_migrate.model import BY_POSITION, FileResult, Finding, Kind, Options, parsed
from neuron_migrate.engine.nameguard import LostName, lost_names, original_line
from neuron_migrate.analysis.readiness import Readiness, check_tree, mentions_torch
from neuron_migrate.registry import UNUSED_SUPPRESSION, Registry
from neuron_migrate.engine.suppress import Suppressions, read_suppressions, unused_finding
from neuron_migrate.engine.context import FileContext, Pending
from neuron_migrate.engine import review_only
from neuron_migrate.engine.rewrite import ModuleRewriter
from neuron_migrate.engine.shared_helpers import import_name, refusal
from neuron_migrate.analysis.watch import flag_watched


def migrate_source(path: str, data: bytes, registry: Registry,
                   options: Options | None = None, generate: bool = True) -> FileResult:
    """Migrate one file's bytes. Never raises for bad input: problems become `error`.

    Without `generate` (what `check` reports), a file that would not change is not generated:
    its findings are known from the plan. One that would change is generated and verified as
    `apply` does, since verifying can change the report (an import the name guard keeps, a
    rewrite that does not compile); only its diff is left out."""
    return never_raise(path, data, lambda: _migrate(path, data, registry,
                                                    options or registry.options, generate))


def _migrate(path: str, data: bytes, registry: Registry, options: Options,
             generate: bool) -> FileResult:
    if not registry.prefilter(data):
        return FileResult(path, original=data)
    suppressions = read_suppressions(data)
    if suppressions.whole_file:
        return FileResult(path, original=data)
    tree = parsed(path, data)
    if isinstance(tree, FileResult):
        return tree
    ready = check_tree(path, data, tree, registry.readiness if mentions_torch(data) else (),
                       suppressions, engine=True)
    result = _migrate_tree(path, data, tree, registry, options, generate, suppressions, ready)
    # `reviewed` markers acknowledge review items whichever stage reported them; only then
    # is it known which markers (of every kind) silenced nothing
    findings = suppressions.acknowledge((*result.findings, *ready.findings), tree)
    if result.error is None:
        findings += _unused(path, suppressions, registry)
    if list(result.findings) == findings:
        return result
    return dataclasses.replace(result, findings=tuple(sorted(findings, key=BY_POSITION)))


def _migrate_tree(path: str, data: bytes, tree: ast.Module, registry: Registry,
                  options: Options, generate: bool, suppressions: Suppressions,
                  ready: Readiness) -> FileResult:
    analysis = analyse(tree, registry.interesting_string, registry.star_names,
                       registry.watched_roots, registry.device_calls, bool(registry.entry))
    demoted = review_only.demote(analysis, registry, options)
    flag_watched(analysis, registry, data)
    for rule in registry.planned if analysis.needs_rewrite else ():
        for statement in rule.edits(tree, analysis.calls):
            analysis.flagged.add(id(statement))
            analysis.edited.add(id(statement))
            analysis.mark_path(statement)
    ready.flag(analysis.flagged, analysis.on_path)  # what a readiness fix rewrites (NM920)
    if not analysis.needs_rewrite and not demoted:
        return FileResult(path, original=data)
    text = data.removeprefix(b"\xef\xbb\xbf").decode(_encoding(data), errors="replace")
    locator = Locator(text)
    reviewed = review_only.findings(path, demoted, analysis.flagged, suppressions,
                                    locator) if demoted else []
    if not analysis.needs_rewrite and analysis.entry is None:
        return FileResult(path, original=data, findings=tuple(sorted(reviewed,
                                                                     key=BY_POSITION)))
    # --annotate changes files that have nothing to apply (unless their notes are there
    # already), which only the generated file tells
    rewrite = functools.partial(_rewrite, path, data, analysis=analysis, registry=registry,
                                context=lambda: FileContext(path, text, options, suppressions),
                                generate=generate or options.annotate)
    masked = mask(data, tree, analysis.on_path, analysis.flagged)
    done = _generate(rewrite, masked)
    problem = None
    if not isinstance(done, str) and done[0] is not None and done[0] != data:
        problem = _guard(path, data, done[0])
        lost = _lost(path, tree, data, done[0]) if problem is None else []
        keep = _keepable(lost, done[1], data, done[0])
        if keep:  # imports removed while something the rewrite did not read uses them
            done = _generate(functools.partial(rewrite, keep=keep), masked)
            lost = [] if isinstance(done, str) or done[0] in (None, data) else \
                _lost(path, tree, data, done[0])
        if lost:
            more = f" (and {len(lost) - 1} more)" if len(lost) > 1 else ""
            line = original_line(data, done[0], lost[0].line)  # type: ignore[index]
            problem = lost[0].message(path, line) + more
    if isinstance(done, str):
        return FileResult(path, original=data, error=done)
    new, rewriter, encoding = done
    if new and data.endswith(b"\r") and not new.endswith((b"\r", b"\n")):
        new += b"\r"  # LibCST drops a last line ending that is a lone "\r" (old Mac files)
    findings = tuple(sorted((*_findings(path, rewriter, locator), *reviewed),
                            key=BY_POSITION))
    if new is None:
        return FileResult(path, findings=findings, original=data, encoding=encoding,
                          modified=any(f.applied for f in findings))
    if new == data:
        return FileResult(path, findings=findings, original=data, encoding=encoding)
    if problem is not None:
        rules = sorted({f.rule_id for f in findings if f.applied})
        findings = tuple(dataclasses.replace(f, applied=False) for f in findings)
        return FileResult(path, findings=findings, original=data, encoding=encoding,
                          error=f"{problem}; the rewrite by {', '.join(rules)} was not written "
                                "(please report this)")
    shared = rewriter.shared is not None
    return FileResult(path, findings=findings, original=data, new_source=new,
                      encoding=encoding, helpers=tuple(rewriter.context.helpers) if shared else (),
                      helpers_module=options.helpers_module if shared else None)


def _generate(rewrite: Callable[..., Rewritten | str | None],
              masked: Masked | None) -> Rewritten | str:
    """The rewrite of the file with its untouched statements masked, else of the whole
    file."""
    done = rewrite(masked) if masked is not None else None
    return rewrite(None) if done is None else done  # type: ignore[return-value]


def _encoding(data: bytes) -> str:
    """The encoding LibCST will use: the coding cookie's, else UTF-8 (ast already accepted
    the cookie)."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return "utf-8" if encoding == "utf-8-sig" else encoding


Rewritten = tuple[bytes | None, ModuleRewriter, str]


def _rewrite(path: str, data: bytes, masked: Masked | None, analysis: Analysis,
             registry: Registry, context: Callable[[], FileContext],
             generate: bool = True, keep: dict[str, str] | None = None
             ) -> Rewritten | str | None:
    """Rewrite the file, or the file with its untouched statements masked: the new bytes, the
    rewriter (for its findings) and the encoding, or an error message.

    With a mask, None sends the caller to the whole file: a parse error there is reported
    with the file's own line numbers, and a placeholder that did not survive means the
    rewrite moved code it was not meant to touch."""
    source = masked.data if masked is not None else data
    restore = masked.restore if masked is not None else (lambda generated: generated)
    try:
        module = parse_module(source)
    except cst.ParserSyntaxError as error:
        return None if masked is not None else (
            f"{path}:{error.raw_line}: LibCST cannot parse this file: {error.message}")
    rewriter = ModuleRewriter(analysis, registry, context(), keep)
    rewriter.plan(module)
    shared = rewriter.context.options.helpers_module
    if shared is not None and rewriter.context.helpers:
        rewriter.shared = import_name(path, shared)
        if rewriter.shared is None:
            return refusal(path, shared)
    if not generate and not rewriter.applies:
        return None, rewriter, module.encoding
    generated = module_bytes(rewriter.build(module))
    new = restore(generated)
    if new is None:
        return None
    if new != data and not confined(data, new, rewriter.touched):
        # Lines changed outside the rewritten statements: LibCST may not reproduce this file
        # byte for byte. Generating the untouched module tells (it costs a code generation,
        # so only here); if so, the edits are replayed onto the original lines.
        reproduced = module_bytes(module)
        if reproduced != source:
            replayed = carry_over(source, reproduced, generated)
            new = restore(replayed) if replayed is not None else None
            if new is None:
                return None if masked is not None else (
                    f"{path}: LibCST cannot reproduce this file exactly; not rewritten "
                    "(please report this)")
    return new, rewriter, module.encoding


def parse_module(source: bytes) -> cst.Module:
    """LibCST's parse, without validating each node it builds: every node's constructor
    checks its own fields (about a tenth of a parse), which the parser's output passes by
    construction. Nodes the rules build are still checked."""
    check = cst.CSTNode.__post_init__
    cst.CSTNode.__post_init__ = _unchecked  # type: ignore[method-assign]
    try:
        with _stoppable_in_native_code():
            return cst.parse_module(source)
    finally:
        cst.CSTNode.__post_init__ = check  # type: ignore[method-assign]


@contextlib.contextmanager
def _stoppable_in_native_code() -> Iterator[None]:
    """LibCST's native parser holds the interpreter for seconds on a large file, and no
    Python signal handler runs until it returns: a run's SIGTERM handler (one marked
    `ends_in_native_code`) gives way to the default action for the call, so SIGTERM ends the
    process at once. No file is half written then: files are written elsewhere, through a
    temporary file and a rename, and the next run removes a temporary file left behind."""
    handler = signal.getsignal(signal.SIGTERM)
    if threading.current_thread() is not threading.main_thread() or \
            not getattr(handler, "ends_in_native_code", False):
        yield
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, handler)


def _unchecked(node: cst.CSTNode) -> None:
    pass


def _guard(path: str, original: bytes, new: bytes) -> str | None:
    """The re-parse guard: output that does not compile is never written."""
    try:
        compile_check(new, path)
    except SyntaxError as error:
        if _compiles(original, path) or not _parses(new):
            return f"{path}:{error.lineno}: the rewritten code does not compile ({error.msg})"
    return None


def _lost(path: str, original: ast.Module, data: bytes, new: bytes) -> list[LostName]:
    """The name guard: names the output uses (or lists in `__all__`) whose binding in the
    original it lost. Output with any is never written."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return lost_names(original, new, path, data)


def _keepable(lost: list[LostName], rewriter: ModuleRewriter, original: bytes,
              new: bytes) -> dict[str, str] | None:
    """When every lost name is an XLA import the rewrite removed (a use it did not read, such
    as a string annotation), the imports to keep, each with the reason to report."""
    if not lost:
        return None
    removed = {b.name for b in rewriter.analysis.xla_imports
               if b.alias_index in rewriter.removals.get(id(b.statement), ())}
    if any(n.name not in removed for n in lost):
        return None
    keep: dict[str, str] = {}
    for name in lost:
        if name.name not in keep:
            line = original_line(original, new, name.line)
            keep[name.name] = (f"`{name.name}` is still used at line {line}, where the rewrite "
                               "does not follow it (a string annotation, for example); "
                               "migrate that use by hand")
    return keep


def _compiles(source: bytes, path: str) -> bool:
    try:
        compile_check(source, path)
    except SyntaxError:
        return False
    return True


def _parses(source: bytes) -> bool:
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


def _findings(path: str, rewriter: ModuleRewriter, locator: Locator) -> tuple[Finding, ...]:
    findings: list[Finding] = []
    for item, unit in rewriter.findings:
        line, column = locator.position(unit, item.signature, item.rank)
        if isinstance(item, Pending):
            findings.append(Finding(path, line, column, item.rule_id, item.kind, item.message,
                                    item.applied, item.suggestion))
        else:
            findings.append(Finding(path, line, column, item.rule_id, Kind.REVIEW, item.message))
    for note in rewriter.import_notes:
        findings.append(_import_finding(path, note, locator))
    findings.sort(key=BY_POSITION)
    return tuple(findings)


def _unused(path: str, suppressions: Suppressions, registry: Registry) -> tuple[Finding, ...]:
    rule = registry.by_id.get(UNUSED_SUPPRESSION)
    if rule is None or not registry.enabled(rule):
        return ()
    return tuple(unused_finding(path, line, suppressions.written.get(line, ""))
                 for line in suppressions.unused())


def _import_finding(path: str, note: ImportNote, locator: Locator) -> Finding:
    line, column = locator.position(note.statement, None, 0)
    kind = Kind.FIX if note.applied else Kind.REVIEW
    return Finding(path, line, column, note.rule_id, kind, note.message, note.applied)
