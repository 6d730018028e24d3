"""Inputs shared by the FMU, replay, sweep and CLI tests: an OSI trace and a small, fast sensor."""
import pathlib

#: a 20-frame OSI SensorView trace (scenarios/osi_validation_minimal)
SHARED_TRACE = pathlib.Path(__file__).parent.parent.parent / "scenarios" / "osi_validation_minimal" / (
    "20240618T122540Z_sv_370_244_20_minimal_valid_example.osi")
# one pose per frame: these tests place objects by jumps and check every point lies on them (tests/test_motion.py
# moves them)
SMALL_SENSOR = {"vertical_fov_deg": [-15, 15], "channels": 16, "horizontal_samples": 360,
                "horizontal_fov_deg": [180, -180], "max_range_m": 100, "motion_distortion": False}
#: OSMP's binary variables as the FMU declares them: prefix → (causality, variability, initial, OSI type)
OSMP_VARIABLES = {
    "OSMPSensorViewIn": ("input", "discrete", None, "SensorView"),
    "OSMPSensorDataOut": ("output", "discrete", "exact", "SensorData"),
    "OSMPSensorViewInConfigRequest": ("calculatedParameter", "fixed", "calculated", "SensorViewConfiguration"),
    "OSMPSensorViewInConfig": ("parameter", "fixed", None, "SensorViewConfiguration"),
}
