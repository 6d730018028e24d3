"""Package list for setuptools; everything else is in pyproject.toml.

pyproject.toml cannot add packages to a ``find``: ``lidar_fmu._fmu``,
``lidar_fmu._fmu.modelDescription`` and ``lidar_fmu._fmu.documentation`` are
the top-level ``fmu/``, ``modelDescription/`` and (two documents of) ``docs/``
(see ``package-dir`` there), so a regular install can build the FMU without a
source checkout.
"""
from setuptools import find_namespace_packages, setup

setup(
    packages=find_namespace_packages("src", include=["lidar_fmu", "lidar_fmu.*"])
    + ["lidar_fmu._fmu", "lidar_fmu._fmu.modelDescription", "lidar_fmu._fmu.documentation"],
)
