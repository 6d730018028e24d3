"""The figures of docs/world.md: the demo street from its meshes and from its ground truth alone, and real tools'
ground-truth traces (run by hand in a checkout).

    .venv/bin/python scripts/world_figures.py [OUT_DIR]     # default docs/

* ``ground_truth_street.png``: the same frame of the demo (the host's OS1-128), the street from its meshes against
  the street built from the OSI ground truth its SensorViews carry (lanes, markings, signs, classified objects);
* ``ground_truth_traces.png``: a frame each of esmini's ``acc-test`` (GroundTruth, host 0, a roof mounting), PMSF
  OSI3Test's lane-boundary trace and the ASAM OpenMATERIAL scenario example (``tests/data/osi``), road from ground
  truth.

Coloured by reflectivity, as the other bird's-eye figures (``lidar-fmu figures``).
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "docs")
DATA = os.path.join(HERE, "..", "tests", "data", "osi")

from lidar_fmu.cosim.sensor_model import OsiSensorModel  # noqa: E402
from lidar_fmu.geometry.transforms import pose_matrix  # noqa: E402
from lidar_fmu.osi.ground_truth import ground_truth_view  # noqa: E402
from lidar_fmu.osi.trace import read_trace  # noqa: E402
from lidar_fmu.tools.demo import make_demo_scenario  # noqa: E402
from lidar_fmu.tools.figures import plot_reflectivity_bev  # noqa: E402
from lidar_fmu.tools.replay import fmu_parameters, load_scenario, model_of, roof_mounting  # noqa: E402

FRAME = 12  # the demo host has driven to x ≈ −58 m: the zebra crossing ahead, parked cars both sides


def demo_cloud(folder: str, ground_truth_only: bool):
    make_demo_scenario(folder, frames=FRAME + 1, ground_truth_only=ground_truth_only)
    scenario = load_scenario(folder)
    model = model_of(fmu_parameters(scenario, folder), warn=lambda message: None)
    for k, view in enumerate(read_trace(scenario["trace"])):
        result = model.step(view, 0.1 * (k + 1))
    assert result.valid, result.message
    return model.last_cloud.points


def trace_cloud(path: str, message_type: str, frame: int, host=None):
    """The whole sweep the lidar fired up to view ``frame`` (0.1 s after the first: the trace's first view, then
    that one — a 30, 50 or 100 Hz trace stepped at every view publishes slices of the sweep)."""
    views = list(read_trace(path, message_type))[: frame + 1]
    if message_type == "GroundTruth":
        views = [ground_truth_view(v, host) for v in views]
    mounting = roof_mounting(views[0], host if host is not None else _host(views[0]))
    model = OsiSensorModel(sensor="ouster_os1_128", warn=lambda message: None,
                           default_mounting_pose=pose_matrix(mounting["position_m"], mounting["orientation_rad"]))
    for view in (views[0], views[frame]):
        result = model.step(view, 0.0)
    assert result.valid, result.message
    return model.last_cloud.points


def _host(view: bytes) -> int:
    from lidar_fmu.osi.decode import decode_sensor_view

    return decode_sensor_view(view).host_vehicle_id


os.makedirs(OUT, exist_ok=True)
with tempfile.TemporaryDirectory() as work:
    meshes = demo_cloud(os.path.join(work, "meshes"), False)
    truth = demo_cloud(os.path.join(work, "truth"), True)
plot_reflectivity_bev(os.path.join(OUT, "ground_truth_street.png"),
                      [("demo street from its meshes", meshes),
                       ("the same street from its OSI ground truth alone", truth)], extent_m=45.0)
panels = [("esmini acc-test (GroundTruth, host 0)",
           trace_cloud(os.path.join(DATA, "esmini_acc_test_gt_31.osi"), "GroundTruth", 3, host=0)),
          ("PMSF OSI3Test lane boundaries", trace_cloud(os.path.join(DATA, "osi3test_lane_boundaries_sv_6.osi"),
                                                         "SensorView", 5)),
          ("ASAM OpenMATERIAL scenario example", trace_cloud(os.path.join(DATA, "openmaterial_two_vehicles_sv_11.osi"),
                                                              "SensorView", 10))]
plot_reflectivity_bev(os.path.join(OUT, "ground_truth_traces.png"), panels, extent_m=35.0)
print("wrote", ", ".join(os.path.join(OUT, n) for n in ("ground_truth_street.png", "ground_truth_traces.png")),
      "; returns:", len(meshes), len(truth), *(len(p) for _, p in panels))

