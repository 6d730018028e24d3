"""lidar-fmu: a physically grounded lidar sensor model for OSI/FMI co-simulation.

Data flows one way: SensorView → scene update → rays → hits → physics →
returns → SensorData / point-cloud files. The entry point for scripting is
:class:`Lidar`.
"""
from ._version import __version__
from .geometry.scene import Mesh, MeshError, Scene, box_mesh, load_mesh
from .pointcloud import POINT_DTYPE, PointCloud
from .scan.lidar import Lidar
from .sensors import Sensor, SensorSpecError, load_sensor

__all__ = [
    "__version__",
    "Lidar", "PointCloud", "POINT_DTYPE", "Mesh", "MeshError", "Scene", "box_mesh", "load_mesh",
    "Sensor", "SensorSpecError", "load_sensor",
]
