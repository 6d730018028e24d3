"""lidar-fmu: a physically grounded lidar sensor model for OSI/FMI co-simulation.

Data flows one way: SensorView → scene update → rays → hits → physics →
returns → SensorData / point-cloud files. The entry point for scripting is
:class:`Lidar`.
"""
from .lidar import Lidar
from .pointcloud import POINT_DTYPE, PointCloud
from .scene import Mesh, MeshError, Scene, box_mesh, load_mesh
from .sensors import Sensor, SensorSpecError, load_sensor

__version__ = "0.1.0"  # the one version source: pyproject.toml and the FMU's model description read it
__all__ = [
    "Lidar", "PointCloud", "POINT_DTYPE", "Mesh", "MeshError", "Scene", "box_mesh", "load_mesh",
    "Sensor", "SensorSpecError", "load_sensor",
]
