"""Helpers shared by the test modules (``from helpers.osi_views import sensor_view``); fixtures live in conftest.py.

- ``osi_views``: small OSI SensorViews (plain osi3 classes)
- ``mirror_scenes``: flat-quad mirror scenes and an OBJ writer (mirror tests: API, CLI, FMU, CUDA)
- ``fmu_inputs``: the shared OSI trace and the small sensor spec (FMU, replay, sweep and CLI tests)
- ``meshes``: ``to_mesh``, a trimesh as a one-material ``Mesh``
- ``openmcx``: the OpenMCx binary where found and a run of an SSP package in it (SSP tests)

No test module imports another test module or conftest: what two of them share lives here.
"""
