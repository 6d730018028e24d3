"""The FMU's SRMD (SSP Traceability's Simulation Resource Meta Data), in both FMI versions, against the standard's
schema (tests/data/schemas/srmd: SRMD.xsd and what it imports, copied by scripts/copy_schemas.py; the W3C xlink
schema it imports from the web is xmlschema's bundled copy, so nothing is fetched)."""
import pathlib
import posixpath
import xml.etree.ElementTree as ET
import zipfile

import pytest

from lidar_fmu.cosim.srmd import SRMD_ENTRY, STC_NS, XLINK_NS

SCHEMAS = pathlib.Path(__file__).parent / "data" / "schemas" / "srmd"
XLINK_ONLINE = "https://www.w3.org/XML/2008/06/xlink.xsd"


@pytest.fixture(scope="module")
def schema():
    """SRMD.xsd (XSD 1.1, as the schema declares: vc:minVersion="1.1"), as openMSL's srmd-validator reads it."""
    import xmlschema

    xlink = pathlib.Path(xmlschema.__file__).parent / "schemas" / "XLINK" / "xlink.xsd"
    return xmlschema.XMLSchema11(str(SCHEMAS / "SRMD.xsd"), uri_mapper={XLINK_ONLINE: xlink.as_uri()})


def entries(srmd: bytes) -> dict:
    """{(classification type, keyword): [(text, href)]}."""
    out: dict = {}
    for classification in ET.fromstring(srmd).iter(f"{{{STC_NS}}}Classification"):
        for entry in classification.iter(f"{{{STC_NS}}}ClassificationEntry"):
            key = (classification.get("type"), entry.get("keyword"))
            out.setdefault(key, []).append((entry.text, entry.get(f"{{{XLINK_NS}}}href")))
    return out


@pytest.mark.parametrize("version", [2, 3])
def test_each_fmu_carries_an_srmd_valid_against_the_schema(fmus, schema, version):
    with zipfile.ZipFile(fmus[version]) as fmu:
        srmd = fmu.read(SRMD_ENTRY)
        names = set(fmu.namelist())
    schema.validate(srmd.decode())
    root = ET.fromstring(srmd)
    assert root.get("version") == "1.0.0" and root.get("license") == "MPL-2.0"
    assert root.get("name") == f"LidarSensor (lidar-fmu, FMI {version}.0)"
    found = entries(srmd)
    model = "de.setlevel.srmd.model-meta-data"
    assert found[(model, "model.type")] == [("sensor", None)] and found[(model, "sensor.type")] == [("Lidar", None)]
    assert found[(model, "model.implementation.format")][0][0].endswith(f"/FMI {version}.0")
    assert found[(model, "model.implementation.format")][0][0].startswith("OSMP 1.6.0/OSI 3.")
    # the validation it passed, linked to the documents the FMU carries
    report = found[(model, "model.validation.report")][0][1]
    assert report == "../../documentation/validation.md"
    for (_, _), values in found.items():
        for _, href in values:
            if href:
                target = posixpath.normpath(posixpath.join(posixpath.dirname(SRMD_ENTRY), href.split("#")[0]))
                assert target in names, href
    interface = {text for (kind, _), values in found.items() if kind == "lidar-fmu.interface" for text, _ in values}
    assert "OSMPSensorViewIn: application/x-open-simulation-interface; type=SensorView; version=3.8.0" in interface
    assert "OSMPSensorDataOut: application/x-open-simulation-interface; type=SensorData; version=3.8.0" in interface
    assert found[("lidar-fmu.interface", "input")] == [(next(t for t in interface if t.startswith("OSMPSensorViewIn:")),
                                                       None)]
    assert any(t.startswith("sensor: String") for t in interface)


def test_the_schema_refuses_what_is_no_srmd(fmus, schema):
    """The check can fail: without its required name, or with an element SRMD does not have."""
    with zipfile.ZipFile(fmus[3]) as fmu:
        srmd = fmu.read(SRMD_ENTRY).decode()
    assert schema.is_valid(srmd)
    assert not schema.is_valid(srmd.replace(' name="LidarSensor (lidar-fmu, FMI 3.0)"', ""))
    assert not schema.is_valid(srmd.replace("<stc:Classification ", "<stc:Classifications ", 1)
                               .replace("</stc:Classification>", "</stc:Classifications>", 1))
