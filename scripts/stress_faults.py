"""Repeat the fault matrix's kinds of failure (labkit/fault_matrix.py) and count the rounds that failed.

    python scripts/stress_faults.py --rounds 20            # every kind, 20 rounds each
    python scripts/stress_faults.py --rounds 5 --kinds ps worker-then-ps
    python scripts/stress_faults.py --json runs/stress.json   # also write the counts (make measurements)
"""
import argparse
import json
from pathlib import Path

from labkit import fault_matrix


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="rounds of each kind")
    parser.add_argument("--kinds", nargs="+", choices=sorted(fault_matrix.ROUNDS), default=list(fault_matrix.ROUNDS))
    parser.add_argument("--json", type=Path, help="write the rounds and failures of each kind to this file")
    args = parser.parse_args(argv)
    failures = {kind: fault_matrix.stress(kind, args.rounds) for kind in args.kinds}
    print("\nfailed rounds per kind:")
    for kind, failed in failures.items():
        print(f"  {kind:<29} {failed} of {args.rounds}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rounds": args.rounds, "failed": failures}, indent=1))
    return 1 if sum(failures.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
