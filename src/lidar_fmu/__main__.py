"""``python -m lidar_fmu``: the ``lidar-fmu`` command line."""
import sys

from .tools.cli import main

sys.exit(main())
