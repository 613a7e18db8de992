"""What `_core.inspect` and `resurgo inspect` show of the device record of
container format 3 (docs/format.md, "Header"; docs/gpu.md, "Managed
memory"): each managed region's device ("device 1"), "host" or "unknown";
nothing for host and device regions nor for a format 1 or 2 file; the
file's format version; and the record, which a delta does not share with
its base, breaks no chain."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import resurgo
from resurgo import _core
from helpers import container_name, run_cli

CORPUS = Path(__file__).resolve().parents[1] / "fuzz" / "corpus" / "container"
# Written by the store's writer (tests/fuzz/make_seeds.cpp): managed regions
# on device 1, on the host and unplaced, then a host region; format 3.
RECORDED = CORPUS / "managed-device-record.rsg"
# A format 1 file with a host, a device and a managed region.
FORMAT_1 = CORPUS / "zstd-3regions-kinds.rsg"
REGION_BYTES = 64


def write_version(path: Path, regions, version=0, base=-1) -> Path:
    """A file of store 'placed' holding `regions`, one chunk each."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = _core.ContainerHeader(store="placed", version=version, base_version=base, chunk_size=4096,
                                   regions=regions)
    chunks = [(index, 0, bytes([version]) * REGION_BYTES) for index in range(len(regions))]
    _core._write_container(str(path), header, chunks)
    return path


def managed(device, region_id=0, label="m"):
    return _core.ContainerRegion(id=region_id, label=label, bytes=REGION_BYTES, kind="managed", device=device)


def test_inspect_gives_each_managed_regions_device():
    info = _core.inspect(str(RECORDED))
    assert info.format_version == 3
    assert [(r.label, r.kind, r.device) for r in info.regions] == [
        ("on-device-1", "managed", 1), ("on-host", "managed", "host"), ("unplaced", "managed", "unknown"),
        ("host", "host", None)]
    assert isinstance(info.regions[0], _core.ContainerRegion)


def test_a_format_1_file_records_no_device():
    info = _core.inspect(str(FORMAT_1))
    assert info.format_version == 1
    assert [(r.kind, r.device) for r in info.regions] == [("host", None), ("device", None), ("managed", None)]


@pytest.mark.parametrize("device", [0, 3, "host", "unknown"])
def test_written_devices_read_back(tmp_path, device):
    # "unknown" alone records nothing: a second region records device 0.
    path = write_version(tmp_path / container_name(0), [managed(device), managed(0, 1, "n")])
    info = _core.inspect(str(path))
    assert info.format_version == 3
    assert [r.device for r in info.regions] == [device, 0]


def test_a_region_description_is_written_recording_no_device(tmp_path):
    plain = _core.RegionDescription(id=0, label="m", bytes=REGION_BYTES, kind="managed")
    path = write_version(tmp_path / container_name(0), [plain, managed(None, 1, "n")])
    info = _core.inspect(str(path))
    assert info.format_version == 2
    assert [(r.kind, r.device) for r in info.regions] == [("managed", None), ("managed", None)]


def test_a_device_that_names_nothing_is_refused():
    with pytest.raises(resurgo.InvalidArgumentError, match="device 'gpu0' names no recorded device"):
        managed("gpu0")


def test_cli_shows_the_devices_and_the_format():
    result = run_cli("inspect", RECORDED)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^format +version 3$", result.stdout, re.MULTILINE), result.stdout
    rows = {line.split()[1]: line.split()[-1] for line in result.stdout.splitlines()
            if re.match(r"^  \d+ ", line)}
    assert rows == {"on-device-1": "1", "on-host": "host", "unplaced": "unknown", "host": "-"}, result.stdout
    assert re.search(r"^  0 +on-device-1 .* device 1$", result.stdout, re.MULTILINE), result.stdout
    assert re.search(r"^  ID +LABEL +KIND +BYTES +DTYPE +SHAPE +DEVICE$", result.stdout, re.MULTILINE)


def test_cli_shows_no_device_column_where_nothing_is_recorded():
    result = run_cli("inspect", FORMAT_1)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^format +version 1$", result.stdout, re.MULTILINE), result.stdout
    assert "DEVICE" not in result.stdout and "unknown" not in result.stdout


def test_cli_json_gives_the_devices_and_the_format():
    result = run_cli("inspect", RECORDED, "--json")
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["format_version"] == 3
    assert [r["device"] for r in info["regions"]] == [1, "host", "unknown", None]
    old = json.loads(run_cli("inspect", FORMAT_1, "--json").stdout)
    assert old["format_version"] == 1
    assert [r["device"] for r in old["regions"]] == [None, None, None]


def test_a_delta_whose_region_moved_keeps_its_chain(tmp_path):
    """The pages of a managed region move between versions: a delta whose
    base recorded another device is no broken chain."""
    store_dir = tmp_path / "placed"
    write_version(store_dir / container_name(0), [managed(0)])
    write_version(store_dir / container_name(1), [managed("host")], version=1, base=0)
    verified = run_cli("verify", store_dir)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "BROKEN CHAIN" not in verified.stdout
    listing = run_cli("ls", store_dir)
    assert listing.returncode == 0, listing.stderr
    states = [line.split()[-1] for line in listing.stdout.strip().splitlines()[1:]]
    assert states == ["ok", "ok"], listing.stdout
