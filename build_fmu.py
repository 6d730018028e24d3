#!/usr/bin/env python3
"""Build dist/LidarSensor.fmu (OSMP FMI 2.0 co-simulation) and validate it with FMPy."""
import argparse
import sys

from lidar_fmu.fmu_build import DEFAULT_FMU, build_fmu, validate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-o", "--output", default=str(DEFAULT_FMU), help="FMU path (default: dist/LidarSensor.fmu)")
    args = parser.parse_args()
    path = build_fmu(args.output)
    problems = validate(path)
    for problem in problems:
        print(f"validation: {problem}", file=sys.stderr)
    print(f"built {path} ({'valid' if not problems else f'{len(problems)} validation problem(s)'})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
