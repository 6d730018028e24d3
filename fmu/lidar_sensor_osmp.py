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
import importlib.util
import os
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_osmp_variables():
    """OSMP's vocabulary, ``lidar_fmu/cosim/osmp_variables.py``, loaded from its file: importing ``lidar_fmu`` here
    would pin it to resources/ before the slave picks its per-user copy (``lidar_sensor_package``), and fail in a
    Python without lidar-fmu's dependencies, which the slave must survive to say so."""
    # the FMU's resources/ (lidar_fmu/ beside this file), an installed package (this file in lidar_fmu/_fmu/), the
    # source checkout (fmu/ beside src/)
    candidates = [os.path.join(HERE, "lidar_fmu"), os.path.join(HERE, os.pardir),
                  os.path.join(HERE, os.pardir, "src", "lidar_fmu")]
    package = next((c for c in candidates if os.path.isfile(os.path.join(c, "cosim", "osmp_variables.py"))),
                   candidates[-1])
    spec = importlib.util.spec_from_file_location("_lidar_fmu_osmp_variables",
                                                  os.path.join(package, "cosim", "osmp_variables.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


osmp = _load_osmp_variables()


def _template(resources, template, **values):
    # the FMU's resources/, else next to this script (installed package), else the source checkout's
    candidates = [os.path.join(resources or "", "modelDescription"), os.path.join(HERE, "modelDescription"),
                  os.path.join(HERE, os.pardir, "modelDescription")]
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
    :data:`osmp.BINARY_VARIABLES`, the lidar's; the SSP system's trace player and writer have their own), and the
    ``InitialUnknowns`` its calculated parameters need. → ``root``."""
    binary_variables = osmp.BINARY_VARIABLES if binary_variables is None else binary_variables
    ET.register_namespace("osmp", osmp.OSMP_NS)
    vendor = _template(resources, "osmp_model.xml", osmp_version=osmp.OSMP_VERSION, osi_version=osi_version)
    variables = root.find("ModelVariables")
    root.insert(list(root).index(variables), vendor)
    initial_unknowns = []
    for index, element in enumerate(variables, start=1):
        prefix, _, role = element.get("name").partition(".")
        if prefix in binary_variables and role in osmp.ROLES:
            element.append(_template(resources, "osmp_binary_variable.xml", name=prefix, role=role,
                                     mime_type=osmp.mime_type(binary_variables[prefix][0], osi_version)))
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
    osi_type, causality, variability, initial = osmp.BINARY_VARIABLES[prefix]
    mime = osmp.mime_type(osi_type, osi_version)
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
    ET.register_namespace("osmp", osmp.OSMP_NS)
    variables = root.find("ModelVariables")
    for prefix, vr in sorted(binaries.items(), key=lambda item: item[1]):
        after = [k for k, v in enumerate(variables) if int(v.get("valueReference")) < vr]
        variables.insert(after[-1] + 1 if after else 0, binary_element_fmi3(prefix, vr, resources, osi_version))
    structure = root.find("ModelStructure")
    for prefix, vr in binaries.items():
        causality = osmp.BINARY_VARIABLES[prefix][1]
        kinds = {"output": ("Output", "InitialUnknown"), "calculatedParameter": ("InitialUnknown",)}.get(causality, ())
        for kind in kinds:
            if kind == "InitialUnknown" and osmp.BINARY_VARIABLES[prefix][3] == "exact":
                continue  # an output with initial exact is known from the start
            _insert_unknown(structure, kind, vr)
    annotations = ET.SubElement(root, "Annotations")
    annotations.append(_template(resources, "osmp_model_fmi3.xml", osmp_version=osmp.OSMP_VERSION,
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
