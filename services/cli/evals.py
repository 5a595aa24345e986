"""`teaspill eval run/compare`: an eval file's cases through the running stack, graded."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import secrets
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from schemas.spec import AgentSpec
from services.cli.gateway import Doors, offer_of, spec_file
from services.cli.talk import published_kind
from services.client import AsyncClient
from services.evals.report import (
    EvalReport,
    compare,
    failed_lines,
    read_report,
    render,
    summary,
    write_report,
)
from services.evals.runner import Planned, address_for, judge_spec, run_suite
from services.evals.suite import MAX_CONCURRENCY, EvalFileError, Suite, load_suite
from services.settings import Settings
from services.specs import check_spec
from services.stack.gateway import local_url

RUN_HELP = (
    "Run every case of an eval file (TOML) through the running stack: each case in an agent "
    "of its own, its messages sent through the gateway as any client's are, then graded on "
    "the timeline its turns recorded. Prints a table, writes the results as JSON (--out) and "
    "exits 1 when the share of passing cases is below the threshold, so CI can gate a change "
    "to a spec. docs/evals.md describes the file."
)
COMPARE_HELP = (
    "Compare two results files of `teaspill eval run` case by case: which cases were fixed, "
    "which broke, and their tokens and rounds. Exits 1 when a case that passed in A fails "
    "in B."
)


def commands(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = verbs.add_parser("eval", help="run eval files against the stack, compare runs")
    each = group.add_subparsers(required=True, metavar="VERB")
    run = each.add_parser(
        "run", help="run an eval file's cases and grade them", description=RUN_HELP
    )
    run.add_argument("eval_file", type=Path, metavar="FILE")
    run.add_argument(
        "--spec", type=Path, help="run every case with this spec file instead of the file's"
    )
    run.add_argument(
        "--out",
        type=Path,
        help="where to write the results (default: FILE's name with .results.json, here)",
    )
    run.add_argument("--threshold", type=float, help="share of cases that must pass, 0 to 1")
    run.add_argument("--concurrency", type=int, help="cases run at once (default: the file's)")
    run.set_defaults(run=_run)
    versus = each.add_parser(
        "compare", help="compare two runs of an eval file", description=COMPARE_HELP
    )
    versus.add_argument("a", type=Path, help="the earlier results file")
    versus.add_argument("b", type=Path, help="the later results file")
    versus.set_defaults(run=lambda a, s, d: _compare(a.a, a.b))


def _overridden(suite: Suite, args: argparse.Namespace) -> Suite:
    """The file as the command line changes it."""
    changes: dict[str, Any] = {}
    if args.threshold is not None:
        if not 0 <= args.threshold <= 1:
            raise EvalFileError(f"--threshold is {args.threshold:g}; it must be from 0 to 1.")
        changes["threshold"] = args.threshold
    if args.concurrency is not None:
        if not 1 <= args.concurrency <= MAX_CONCURRENCY:
            raise EvalFileError(
                f"--concurrency is {args.concurrency}; it must be from 1 to {MAX_CONCURRENCY}."
            )
        changes["concurrency"] = args.concurrency
    if args.spec is not None:
        changes["spec"] = args.spec
        changes["cases"] = tuple(dataclasses.replace(c, spec=None) for c in suite.cases)
    return dataclasses.replace(suite, **changes)


def _run(args: argparse.Namespace, settings: Settings, doors: Doors) -> int:
    suite = _overridden(load_suite(args.eval_file), args)
    planned = _plan(suite, doors)
    client = AsyncClient(local_url(settings), doors.key(suite.tenant), timeout=600)
    report = asyncio.run(_graded(client, suite, planned))
    out = args.out or Path(f"{args.eval_file.stem}.results.json")
    write_report(report, out)
    print(render(report))
    for line in failed_lines(report):
        print(line, file=sys.stderr)
    print(summary(report))
    print(f"Results written to {out}.")
    return 0 if report.gated else 1


async def _graded(client: AsyncClient, suite: Suite, planned: list[Planned]) -> EvalReport:
    try:
        started = datetime.now(UTC).isoformat(timespec="seconds")
        return await run_suite(client, suite, planned, started)
    finally:
        await client.aclose()


def label_of(spec: AgentSpec) -> str:
    digest = hashlib.sha256(msgspec.json.encode(spec)).hexdigest()
    return f"{spec.kind}@{digest[:12]}"


def _plan(suite: Suite, doors: Doors) -> list[Planned]:
    """Each case's spec, checked against the deployment and published in the file's tenant
    (once per kind), and a fresh address for it."""
    client = doors.tenant(suite.tenant)
    specs: dict[Path, AgentSpec] = {}
    kinds: dict[str, AgentSpec] = {}
    run_id = secrets.token_hex(4)
    planned = []
    for index, case in enumerate(suite.cases):
        path = case.spec or suite.spec
        assert path is not None
        if path not in specs:
            specs[path] = spec_file(path, doors, suite.tenant)
        spec = specs[path]
        if kinds.setdefault(spec.kind, spec) != spec:
            raise EvalFileError(
                f"The eval file {suite.path}: two different specs are of kind {spec.kind!r}; "
                "give each spec a kind of its own (a kind's newest version is what runs)."
            )
        address = address_for(suite.tenant, run_id, index, case.name)
        planned.append(Planned(case, address, spec.kind, label_of(spec)))
    for spec in kinds.values():
        published_kind(client, spec)
    if suite.judge_model:
        judge = judge_spec(suite.judge_model)
        check_spec(judge, f"The eval file {suite.path}'s [judge]", offer_of(doors, suite.tenant))
        published_kind(client, judge)
    return planned


def _compare(a: Path, b: Path) -> int:
    shown, broke = compare(read_report(a), read_report(b))
    print(shown)
    return 1 if broke else 0
