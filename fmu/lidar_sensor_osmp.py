"""The OSMP side of the FMU's model description: its binary variables and the annotations OSMP asks for.

The annotation templates are ``modelDescription/*.xml``; :func:`annotate` puts them into the model description
pythonfmu generates. Kept apart from the slave's FMI callbacks (``LidarSensor.py``).
"""
import os
import xml.etree.ElementTree as ET

from pythonfmu.enums import Fmi2Causality, Fmi2Initial, Fmi2Variability

OSMP_NS = "http://xsd.pmsf.net/OSISensorModelPackaging"
OSMP_VERSION = "1.6.0"
BINARY_VARIABLES = {  # prefix → (OSI type, causality, variability, initial)
    "OSMPSensorViewIn": ("SensorView", Fmi2Causality.input, Fmi2Variability.discrete, None),
    "OSMPSensorDataOut": ("SensorData", Fmi2Causality.output, Fmi2Variability.discrete, Fmi2Initial.exact),
    "OSMPSensorViewInConfigRequest": (
        "SensorViewConfiguration", Fmi2Causality.calculatedParameter, Fmi2Variability.fixed, Fmi2Initial.calculated),
    "OSMPSensorViewInConfig": ("SensorViewConfiguration", Fmi2Causality.parameter, Fmi2Variability.fixed, None),
}
ROLES = ("base.lo", "base.hi", "size")


def _template(resources, template, **values):
    here = os.path.dirname(os.path.abspath(__file__))
    # the FMU's resources/, else next to this script (installed package), else the source checkout's
    candidates = [os.path.join(resources or "", "modelDescription"), os.path.join(here, "modelDescription"),
                  os.path.join(here, os.pardir, "modelDescription")]
    folder = next((c for c in candidates if os.path.isdir(c)), candidates[-1])
    with open(os.path.join(folder, template), encoding="utf-8") as f:
        element = ET.fromstring(f.read().format(**values))
    for node in element.iter():  # template indentation would otherwise leak into the XML
        node.text = node.text.strip() or None if node.text else None
        node.tail = None
    return element


def annotate(root: ET.Element, resources: str, osi_version: str, binary_variables=None) -> ET.Element:
    """Put the OSMP annotations into ``root`` (pythonfmu's model description): the model's vendor annotation,
    one per binary variable (``binary_variables``: prefix → (OSI type, …) as :data:`BINARY_VARIABLES`, the
    lidar's), and the ``InitialUnknowns`` its calculated parameters need. → ``root``."""
    binary_variables = BINARY_VARIABLES if binary_variables is None else binary_variables
    ET.register_namespace("osmp", OSMP_NS)
    vendor = _template(resources, "osmp_model.xml", osmp_version=OSMP_VERSION, osi_version=osi_version)
    variables = root.find("ModelVariables")
    root.insert(list(root).index(variables), vendor)
    initial_unknowns = []
    for index, element in enumerate(variables, start=1):
        name = element.get("name")
        prefix, _, role = name.partition(".")
        if prefix in binary_variables and role in ROLES:
            element.append(_template(resources, "osmp_binary_variable.xml", name=prefix, role=role,
                                     type=binary_variables[prefix][0], osi_version=osi_version))
        if element.get("causality") == "calculatedParameter":
            initial_unknowns.append(index)
    if initial_unknowns:
        unknowns = ET.SubElement(root.find("ModelStructure"), "InitialUnknowns")
        for index in initial_unknowns:
            ET.SubElement(unknowns, "Unknown", index=str(index))
    return root
