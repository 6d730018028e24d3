"""The OSMP side of the FMU's model description: its binary variables and the annotations OSMP asks for.

OSMP 1.6.0 (osi-sensor-model-packaging, doc/spec/basic_conventions.adoc and binary_variables.adoc): FMI 2.0 carries
each binary variable as three Integers (``.base.lo``, ``.base.hi``, ``.size``), each annotated under
``<Annotations><Tool name="net.pmsf.osmp">``, and the model's annotation under ``<VendorAnnotations>``; FMI 3.0 (OSMP
since 1.5.0) carries each as one Binary variable whose ``mimeType`` equals its annotation's ``mime-type``, annotated
(role ``full``) under ``<Annotations><Annotation type="net.pmsf.osmp">``, and the model's annotation under the
model description's own ``<Annotations>``. The templates are ``modelDescription/*.xml``; :func:`annotate_fmi2` and
:func:`annotate_fmi3` put them into the model description the slave's library generates. Kept apart from the
slaves' FMI callbacks, and free of pythonfmu and pythonfmu3 (both FMUs carry it).
"""
import os
import xml.etree.ElementTree as ET

OSMP_NS = "http://xsd.pmsf.net/OSISensorModelPackaging"
OSMP_VERSION = "1.6.0"
BINARY_VARIABLES = {  # prefix → (OSI type, causality, variability, initial)
    "OSMPSensorViewIn": ("SensorView", "input", "discrete", None),
    "OSMPSensorDataOut": ("SensorData", "output", "discrete", "exact"),
    "OSMPSensorViewInConfigRequest": ("SensorViewConfiguration", "calculatedParameter", "fixed", "calculated"),
    "OSMPSensorViewInConfig": ("SensorViewConfiguration", "parameter", "fixed", None),
}
ROLES = ("base.lo", "base.hi", "size")  # FMI 2.0; FMI 3.0's one variable is role "full"


def mime_type(osi_type: str, osi_version: str) -> str:
    """OSMP's MIME type of a binary variable carrying OSI message ``osi_type`` (SensorView, …)."""
    return f"application/x-open-simulation-interface; type={osi_type}; version={osi_version}"


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


def annotate_fmi2(root: ET.Element, resources: str, osi_version: str, binary_variables=None) -> ET.Element:
    """Put the OSMP annotations into ``root`` (pythonfmu's FMI 2.0 model description): the model's vendor
    annotation, one per Integer of a binary variable (``binary_variables``: prefix → (OSI type, …) as
    :data:`BINARY_VARIABLES`, the lidar's; the SSP system's trace player and writer have their own), and the
    ``InitialUnknowns`` its calculated parameters need. → ``root``."""
    binary_variables = BINARY_VARIABLES if binary_variables is None else binary_variables
    ET.register_namespace("osmp", OSMP_NS)
    vendor = _template(resources, "osmp_model.xml", osmp_version=OSMP_VERSION, osi_version=osi_version)
    variables = root.find("ModelVariables")
    root.insert(list(root).index(variables), vendor)
    initial_unknowns = []
    for index, element in enumerate(variables, start=1):
        prefix, _, role = element.get("name").partition(".")
        if prefix in binary_variables and role in ROLES:
            element.append(_template(resources, "osmp_binary_variable.xml", name=prefix, role=role,
                                     mime_type=mime_type(binary_variables[prefix][0], osi_version)))
        if element.get("causality") == "calculatedParameter":
            initial_unknowns.append(index)
    if initial_unknowns:
        unknowns = ET.SubElement(root.find("ModelStructure"), "InitialUnknowns")
        for index in initial_unknowns:
            ET.SubElement(unknowns, "Unknown", index=str(index))
    return root


def binary_element_fmi3(prefix: str, value_reference: int, resources: str, osi_version: str) -> ET.Element:
    """The FMI 3.0 ``<Binary>`` of OSMP binary variable ``prefix``: its causality, variability and initial, its
    MIME type, OSMP's annotation, and the empty start value OSMP asks for where FMI 3.0 allows one."""
    osi_type, causality, variability, initial = BINARY_VARIABLES[prefix]
    mime = mime_type(osi_type, osi_version)
    attributes = dict(name=prefix, valueReference=str(value_reference), causality=causality,
                      variability=variability, mimeType=mime)
    if initial:
        attributes["initial"] = initial
    element = ET.Element("Binary", attributes)
    element.append(_template(resources, "osmp_binary_variable_fmi3.xml", name=prefix, mime_type=mime))
    if initial != "calculated":  # FMI 3.0: a calculated variable has no start value; the others start empty
        ET.SubElement(element, "Start", value="")
    return element


def annotate_fmi3(root: ET.Element, binaries: dict, resources: str, osi_version: str) -> ET.Element:
    """Put the OSMP binary variables ``binaries`` (prefix → value reference) and annotations into ``root``
    (pythonfmu3's FMI 3.0 model description, written without them): each Binary among the variables in value
    reference order, outputs and calculated parameters in the ``ModelStructure``, the model's annotation last.
    → ``root``."""
    ET.register_namespace("osmp", OSMP_NS)
    variables = root.find("ModelVariables")
    for prefix, vr in sorted(binaries.items(), key=lambda item: item[1]):
        after = [k for k, v in enumerate(variables) if int(v.get("valueReference")) < vr]
        variables.insert(after[-1] + 1 if after else 0, binary_element_fmi3(prefix, vr, resources, osi_version))
    structure = root.find("ModelStructure")
    for prefix, vr in binaries.items():
        causality = BINARY_VARIABLES[prefix][1]
        kinds = {"output": ("Output", "InitialUnknown"), "calculatedParameter": ("InitialUnknown",)}.get(causality, ())
        for kind in kinds:
            if kind == "InitialUnknown" and BINARY_VARIABLES[prefix][3] == "exact":
                continue  # an output with initial exact is known from the start
            _insert_unknown(structure, kind, vr)
    annotations = ET.SubElement(root, "Annotations")
    annotations.append(_template(resources, "osmp_model_fmi3.xml", osmp_version=OSMP_VERSION,
                                 osi_version=osi_version))
    return root


#: FMI 3.0's order of the ModelStructure's elements (fmi3ModelDescription.xsd)
_STRUCTURE_ORDER = ("Output", "ContinuousStateDerivative", "ClockedState", "InitialUnknown", "EventIndicator")


def _insert_unknown(structure: ET.Element, kind: str, vr: int) -> None:
    """An ``<Output>``/``<InitialUnknown>`` of ``vr`` in ``structure``, among its kind in value reference order."""
    rank = _STRUCTURE_ORDER.index(kind)
    children = list(structure)
    position = sum(1 for c in children if _STRUCTURE_ORDER.index(c.tag) < rank or
                   (c.tag == kind and int(c.get("valueReference")) < vr))
    structure.insert(position, ET.Element(kind, valueReference=str(vr)))
