"""What the benchmark scripts' command lines share (bench_suite.py, bench_real.py,
bench_train.py): the subset option, the timing options, and writing the results."""

import argparse
from pathlib import Path

from glcnn.commands.bench import write_json


def parser(doc: str, subset: str, choices, quick: str, runs: int, warmup: int,
           budget: float, unit: str = "runs") -> argparse.ArgumentParser:
    """An ArgumentParser with --SUBSET (comma-separated names from `choices`), --quick,
    --runs, --warmup, --budget, --json and --markdown; the script adds its own options."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument(f"--{subset}", default=",".join(choices),
                   help=f"comma-separated subset of: {', '.join(choices)}")
    p.add_argument("--quick", action="store_true", help=quick)
    p.add_argument("--runs", type=int, default=runs, help=f"timed {unit} per measurement (max)")
    p.add_argument("--warmup", type=int, default=warmup, help=f"untimed {unit} before them")
    p.add_argument("--budget", type=float, default=budget,
                   help=f"seconds after which a measurement stops (at least 3 {unit})")
    p.add_argument("--json", type=Path, help="write every raw number here")
    p.add_argument("--markdown", type=Path, help="write the markdown here")
    return p


def parse(p: argparse.ArgumentParser, argv, subset: str, choices) -> argparse.Namespace:
    """Parse `argv`, the subset option as a list of known names (an unknown one: p.error)."""
    args = p.parse_args(argv)
    names = [n.strip() for n in getattr(args, subset).split(",") if n.strip()]
    unknown = [n for n in names if n not in choices]
    if unknown:
        p.error(f"unknown {subset} {unknown}; choose from {', '.join(choices)}")
    setattr(args, subset, names)
    return args


def write_results(args, text: str, raw: dict) -> None:
    """The markdown on stdout and in --markdown, the raw numbers in --json."""
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.json:
        write_json(args.json, raw)
