"""Infrared materials: the database of lidar-wavelength reflectances and the visual → IR mapping.

    db = load_database(905.0, ["my_ir.yaml"])         # built-ins + a user's IR material database, at 905 nm
    ids = resolve_mesh_materials(mesh, street_material_map(), db)   # (F,) int16 IR id per triangle
    class_code, table = db.arrays()                   # (M,) int8, (M, 10) float32 ρ at 0…90°

Built-in values and their sources: ``data/ir_materials.yaml``; ASTER spectra
(JPL) in ``data/spectra/`` (see its NOTICE.md).
"""
from .database import (
    ANGLES_DEG,
    FACE_REFLECTIVITY,
    MATERIAL_CLASSES,
    TABLE_ANGLES_DEG,
    IRMaterial,
    MaterialDatabase,
    MaterialError,
    load_database,
    read_material_file,
    surface_material,
    with_face_reflectivity,
)
from .mapping import (
    DEFAULT_MAP,
    IR_NAME_PREFIX,
    MaterialMap,
    check_map,
    load_material_map,
    packaged_map_path,
    resolve_mesh_materials,
    street_material_map,
)
from .spectra import read_angle_table_csv, read_aster_spectrum, spectrum_reflectance

__all__ = [
    "ANGLES_DEG", "FACE_REFLECTIVITY", "with_face_reflectivity", "MATERIAL_CLASSES", "TABLE_ANGLES_DEG", "IRMaterial",
    "MaterialDatabase", "MaterialError", "load_database", "read_material_file", "DEFAULT_MAP", "IR_NAME_PREFIX",
    "MaterialMap", "check_map", "load_material_map", "packaged_map_path", "resolve_mesh_materials",
    "street_material_map", "read_angle_table_csv", "read_aster_spectrum", "spectrum_reflectance", "surface_material",
]
