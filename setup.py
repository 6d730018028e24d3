"""Package list for setuptools; everything else is in pyproject.toml.

pyproject.toml cannot add packages to a ``find``: ``lidar_fmu._fmu`` and
``lidar_fmu._fmu.modelDescription`` are the top-level ``fmu/`` and
``modelDescription/`` (see ``package-dir`` there), so a regular install can
build the FMU without a source checkout.
"""
from setuptools import find_namespace_packages, setup

setup(
    packages=find_namespace_packages("src", include=["lidar_fmu", "lidar_fmu.*"])
    + ["lidar_fmu._fmu", "lidar_fmu._fmu.modelDescription"],
)
