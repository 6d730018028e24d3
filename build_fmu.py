#!/usr/bin/env python3
"""Build dist/LidarSensor.fmu (OSMP FMI 2.0 co-simulation) and validate it: ``lidar-fmu build`` by another name.

    python3 build_fmu.py [-o PATH]
"""
import sys

from lidar_fmu.tools.cli import main

if __name__ == "__main__":
    sys.exit(main(["build", *sys.argv[1:]]))
