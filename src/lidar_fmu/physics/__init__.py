"""Physics: what a lidar makes of its hits.

:mod:`.hit_rules` holds the per-hit rules that every caster compiles in (the only part
:mod:`lidar_fmu.raycast` imports); :mod:`.returns` turns a batch's hits into returns under a
:class:`~.returns.ReturnModel`; the other modules are the signal's stages (materials, range limits,
echoes, weather, detection and noise, ToF folding, ground truth). See ``docs/physics.md``.
"""
