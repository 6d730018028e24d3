"""The FMU's Simulation Resource Meta Data (SRMD): what the model is, its interface and the validation it passed.

SRMD is the SSP Traceability standard's meta-data file for a simulation resource (Modelica Association Project
SSP, SSP Traceability 1.0, github.com/modelica/ssp-ls-traceability: ``SRMD.xsd``, and the specification's section
"SSP Traceability Packaging": "For FMUs the SRMD file CAN be embedded by placing the SRMD data into a file named
``extra/org.ssp-standard.ssp-traceability.srmd/resourceMetaData.srmd``"). openMSL's credibility process keeps one
per sensor model, with the SET Level classification ``de.setlevel.srmd.model-meta-data`` and its keywords
(``model.type``, ``sensor.type``, ``model.validation.report``, …; e.g. openMSL/sl-1-2-reflection-based-lidar-object-
model's ``.srmd``); we use the same classification and keywords. The interface (each input, output and parameter
with its type, OSMP's MIME type for the binary variables) is a classification of ours, ``lidar-fmu.interface``:
lidar-fmu has no domain for the reverse-domain name the standard recommends.

:func:`resource_meta_data` writes it from the FMU's own model description (name, version, licence, FMI version,
OSMP and OSI versions, variables), so it describes exactly the FMU it is packed into; its links point at the FMU's
``documentation/`` folder (``validation.md``, ``fmu.md``), which the build fills.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

from .osmp_variables import OSMP_NS

SRMD_ENTRY = "extra/org.ssp-standard.ssp-traceability.srmd/resourceMetaData.srmd"
SRMD_NS = "http://ssp-standard.org/SSPTraceability1/SimulationResourceMetaData"
STC_NS = "http://ssp-standard.org/SSPTraceability1/SSPTraceabilityCommon"
XLINK_NS = "http://www.w3.org/1999/xlink"
#: the SRMD format version this file follows (SRMD.xsd: "1.0.0 for this release")
SRMD_VERSION = "1.0.0"
#: from the SRMD file to the FMU's documentation folder (relative URIs resolve against the SRMD's own)
DOCUMENTATION = "../../documentation/"
#: the documents the FMU carries in documentation/ (from docs/), and what they are
DOCUMENTS = {"fmu.md": "the FMU: variables, OSMP, the configuration handshake, FMI 2.0 and 3.0",
             "validation.md": "validation against real Ouster units and ouster-sdk"}

#: SET Level's keywords for a simulation model (openMSL's sensor models), ours: (keyword, value, link or None)
DESCRIPTION = (
    ("model.type", "sensor", None),
    ("sensor.type", "Lidar", None),
    ("sensor.technology", "Lidar", None),
    ("sensor.technology.variant", "time of flight, spinning and solid-state patterns from presets or a unit's "
                                  "calibration (Ouster, Velodyne, Livox, AirSim, Ibeo)", None),
    ("model.manufacturer", "lidar-fmu", None),
    ("model.family", "Perception sensor models", None),
    ("model.purpose", "A physically grounded lidar point cloud (one OSI LidarDetection per return) from an OSI "
                      "SensorView, for co-simulation of automated driving functions", None),
    ("model.modelling-approach", "Ray casting of the unit's beams (its firing pattern and times) against meshes "
                                 "of the SensorView's objects and of the road built from its ground truth (Embree, "
                                 "or CUDA); infrared materials, range-reflectivity limits, noise, detection "
                                 "probability, weather, beam divergence and echoes, mirrors and glass; motion "
                                 "within the frame", None),
    ("model.validity-range", "Ouster OS1 units, against real recordings; other presets from their datasheets and "
                             "calibration files", None),
    ("model.verification.status", "true", None),
    ("model.verification.report", "the test suite's physical checks", "validation.md#checks-inside-the-test-suite"),
    ("model.validation.concept", "lidar-fmu validate: a real Ouster recording against our simulation of its unit "
                                 "(range error, returns found and missed, per-beam valid fraction, noise, range "
                                 "limits, intensity, second echoes), and rays against ouster-sdk", None),
    ("model.validation.status", "true", None),
    ("model.validation.platform", "lidar-fmu validate and calibrate (Python), ouster-sdk as the reference", None),
    ("model.validation.report", "validation.md: every figure and what is off", "validation.md"),
    ("model.limitations", "Returns only (no object list); OSI LidarDetection carries no surface normal; rosettes "
                          "and other patterns that never repeat keep their full field of view under the "
                          "configuration handshake; see the documents", "fmu.md"),
    ("model.integration.requirements", "A Python >= 3.10 with lidar-fmu's dependencies runs the FMU "
                                       "(pip install lidar-fmu); a C master preloads libpython", "fmu.md"),
)


def resource_meta_data(model_description: bytes) -> bytes:
    """The SRMD of the FMU whose ``modelDescription.xml`` is ``model_description`` (module doc), UTF-8 XML."""
    md = ET.fromstring(model_description)
    fmi = md.get("fmiVersion", "2.0")
    osmp = md.find(f".//{{{OSMP_NS}}}osmp")
    osmp_version = osmp.get("version") if osmp is not None else "?"
    osi_version = osmp.get("osi-version") if osmp is not None else "?"
    for prefix, uri in (("srmd", SRMD_NS), ("stc", STC_NS), ("xlink", XLINK_NS)):
        ET.register_namespace(prefix, uri)
    name = md.get("modelName", "LidarSensor")
    attributes = {"version": SRMD_VERSION, "name": f"{name} (lidar-fmu, FMI {fmi})",
                  "description": md.get("description", ""), "author": md.get("author", "lidar-fmu"),
                  "fileversion": md.get("version", ""), "license": md.get("license", ""),
                  "generationTool": f"lidar-fmu {md.get('version', '')}"}
    generated = md.get("generationDateAndTime")
    if generated:
        attributes["generationDateAndTime"] = generated
    root = ET.Element(f"{{{SRMD_NS}}}SimulationResourceMetaData", {k: v for k, v in attributes.items() if v})
    model = _classification(root, "de.setlevel.srmd.model-meta-data")
    entries = [*DESCRIPTION[:5],
               ("model.name", name, None), ("model.version", md.get("version", ""), None),
               ("model.guid", md.get("guid") or md.get("instantiationToken") or "", None),
               *DESCRIPTION[5:],
               ("model.implementation.format", f"OSMP {osmp_version}/OSI {osi_version}/FMI {fmi}", None),
               ("model.use-restrictions", f"Licence {md.get('license', '')}", None)]
    for keyword, value, link in entries:
        _entry(model, keyword, value, link)
    interface = _classification(root, "lidar-fmu.interface")
    for keyword, value in _interface(md):
        _entry(interface, keyword, value, None)
    documents = _classification(root, "lidar-fmu.documents")
    for document, what in DOCUMENTS.items():
        _entry(documents, "document", what, document, linked_type="text/markdown")
    ET.indent(root)
    return ET.tostring(root, encoding="UTF-8", xml_declaration=True) + b"\n"


def _classification(root: ET.Element, kind: str) -> ET.Element:
    return ET.SubElement(root, f"{{{STC_NS}}}Classification", type=kind)


def _entry(classification: ET.Element, keyword: str, value: str, link: str | None, linked_type: str = "") -> None:
    entry = ET.SubElement(classification, f"{{{STC_NS}}}ClassificationEntry", keyword=keyword)
    entry.text = value
    if link:
        entry.set(f"{{{XLINK_NS}}}type", "simple")
        entry.set(f"{{{XLINK_NS}}}href", DOCUMENTATION + link)
        if linked_type or link.endswith(".md") or ".md#" in link:
            entry.set("linkedType", linked_type or "text/markdown")


def _interface(md: ET.Element):
    """(keyword, value) per variable a master sets or reads: keyword its causality, value its name and type (OSMP's
    MIME type for a binary variable, its three Integers as one under FMI 2.0)."""
    seen = set()
    for variable in md.findall("ModelVariables/*"):
        causality = variable.get("causality", "local")
        if causality == "local":
            continue
        name = variable.get("name")
        note = variable.find(f".//{{{OSMP_NS}}}osmp-binary-variable")
        if note is not None:  # an OSMP binary variable: FMI 3.0's Binary, or FMI 2.0's three Integers
            name = note.get("name")
            if name in seen:
                continue
            seen.add(name)
            kind = note.get("mime-type")
        else:
            kind = variable.tag if variable.tag != "ScalarVariable" else variable[0].tag
        yield causality, f"{name}: {kind}"
