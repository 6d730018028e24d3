"""What a return hit, as one small integer: the semantic classes every file carries beside the point record.

One table, :data:`SEMANTIC_TABLE`, in code order: each class's name, the CARLA tag it maps to
(``carla.CityObjectLabel``, LibCarla ``rpc/ObjectLabel.h``), the ASPRS class a LAS file's ``classification``
takes (LAS 1.4 R15, table 17; 1 "unclassified" where none fits) and an RGB colour (the Cityscapes palette CARLA
uses where CARLA has the class, else our own). A mesh labels its triangles (:attr:`~.scene.Mesh.face_semantic`),
a scene its instances (:meth:`~.scene.Scene.add_instance`); a triangle's own class wins over its instance's
(docs/formats.md#semantic-classes).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


class SemanticClass(NamedTuple):
    name: str
    carla_tag: int  # carla.CityObjectLabel value
    asprs: int  # LAS classification
    rgb: tuple[int, int, int]


#: the classes in code order (code = position); docs/formats.md#semantic-classes says what each holds
SEMANTIC_TABLE = (
    SemanticClass("unlabelled", 0, 0, (0, 0, 0)),  # nothing says what it is: a mesh from a file
    SemanticClass("road", 1, 11, (128, 64, 128)),
    SemanticClass("lane_marking", 24, 11, (157, 234, 50)),
    SemanticClass("kerb", 2, 2, (196, 196, 196)),  # CARLA tags kerbs as part of the sidewalk
    SemanticClass("sidewalk", 2, 2, (244, 35, 232)),
    SemanticClass("terrain", 10, 2, (152, 251, 152)),
    SemanticClass("building", 3, 6, (70, 70, 70)),
    SemanticClass("vegetation", 9, 5, (107, 142, 35)),
    SemanticClass("pole", 6, 1, (153, 153, 153)),
    SemanticClass("traffic_sign", 8, 1, (220, 220, 0)),
    SemanticClass("traffic_light", 7, 1, (250, 170, 30)),
    SemanticClass("barrier", 28, 1, (180, 165, 180)),  # guard rails, barriers, walls, fences
    SemanticClass("car", 14, 1, (0, 0, 142)),
    SemanticClass("truck", 15, 1, (0, 0, 70)),
    SemanticClass("bus", 16, 1, (0, 60, 100)),
    SemanticClass("motorcycle", 18, 1, (0, 0, 230)),
    SemanticClass("bicycle", 19, 1, (119, 11, 32)),
    SemanticClass("pedestrian", 12, 1, (220, 20, 60)),
    SemanticClass("animal", 21, 1, (170, 120, 50)),  # CARLA's Dynamic holds animals
    SemanticClass("other", 22, 1, (55, 90, 80)),  # a known object of no class above
    SemanticClass("weather", 0, 18, (200, 200, 255)),  # a rain, snow or fog echo; ASPRS "high noise"
)
SEMANTIC_CLASSES = tuple(c.name for c in SEMANTIC_TABLE)
(UNLABELLED, ROAD, LANE_MARKING, KERB, SIDEWALK, TERRAIN, BUILDING, VEGETATION, POLE, TRAFFIC_SIGN, TRAFFIC_LIGHT,
 BARRIER, CAR, TRUCK, BUS, MOTORCYCLE, BICYCLE, PEDESTRIAN, ANIMAL, OTHER, WEATHER) = range(len(SEMANTIC_TABLE))
#: the code a file writes for each class: uint8
SEMANTIC_DTYPE = np.dtype("u1")


def asprs_classes(semantic: np.ndarray) -> np.ndarray:
    """(M,) uint8 ASPRS LAS class of each code of ``semantic`` (codes past the table: 1, unclassified)."""
    table = np.array([c.asprs for c in SEMANTIC_TABLE] + [1], np.uint8)
    return table[np.minimum(np.asarray(semantic, np.int64), len(SEMANTIC_TABLE))]


__all__ = ["SEMANTIC_CLASSES", "SEMANTIC_DTYPE", "SEMANTIC_TABLE", "SemanticClass", "asprs_classes"]
