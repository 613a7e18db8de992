"""The `resurgo` tool against hostile files and paths: control characters
that come from a file or a path (store names, labels, dtypes, metadata,
paths, error messages) are printed escaped, never passed to the terminal;
names that are not UTF-8 are reported, not fatal; and `verify` goes on past
every failure."""

from __future__ import annotations

import json
import os
import re

from resurgo import _core
from helpers import container_name, flip_chunk_byte
from test_cli import run_cli

# ESC sequences (colour, clear screen, window title), BEL, DEL, a C1 CSI and
# a newline that would forge an output line.
HOSTILE = "\x1b[31mred\x1b[2J\x1b]0;title\x07\x7f\x9b\nDAMAGED forged"
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def write_hostile(path, store="s" + HOSTILE, label="u" + HOSTILE, dtype="uint8" + HOSTILE,
                  metadata=b"\x1b[2J"):
    path.parent.mkdir(parents=True, exist_ok=True)
    region = _core.RegionDescription(id=0, label=label, bytes=64, dtype=dtype, shape=[64])
    header = _core.ContainerHeader(store=store, version=1, chunk_size=64, regions=[region], metadata=metadata)
    _core._write_container(str(path), header, [(0, 0, bytes(64))])
    return path


def assert_escaped(text):
    """No control character but the newlines between lines; the hostile
    text's newline printed as \\x0a, not starting a line of its own."""
    assert not RAW_CONTROL.search(text), repr(text)
    assert not any(line.startswith("DAMAGED forged") for line in text.splitlines()), text


def test_inspect_escapes_what_the_file_holds(tmp_path):
    path = write_hostile(tmp_path / ("dir" + HOSTILE) / container_name(1))
    result = run_cli("inspect", path)
    assert result.returncode == 0, result.stderr
    assert_escaped(result.stdout)
    assert "s\\x1b[31mred\\x1b[2J\\x1b]0;title\\x07\\x7f\\x9b\\x0aDAMAGED forged" in result.stdout
    assert "u\\x1b[31mred" in result.stdout and "uint8\\x1b[31mred" in result.stdout
    assert "dir\\x1b[31mred" in result.stdout


def test_inspect_json_escapes_every_control_character(tmp_path):
    path = write_hostile(tmp_path / container_name(1))
    result = run_cli("inspect", path, "--json")
    assert result.returncode == 0, result.stderr
    assert not RAW_CONTROL.search(result.stdout), result.stdout
    assert json.loads(result.stdout)["regions"][0]["label"] == "u" + HOSTILE


def test_ls_escapes_store_directories_and_undecodable_names(tmp_path):
    tier = tmp_path / "tier"
    write_hostile(tier / ("st" + HOSTILE) / container_name(1))
    # A name that is not UTF-8: byte 0x9b, C1 CSI on a Latin-1 terminal
    # (renamed there: the library takes only UTF-8 paths from Python).
    write_hostile(tier / "plain" / container_name(1))
    os.rename(tier / "plain", tier / os.fsdecode(b"raw\x9bname"))
    result = run_cli("ls", tier)
    assert result.returncode == 0, result.stderr
    assert_escaped(result.stdout)
    assert "st\\x1b[31mred" in result.stdout
    (raw,) = [line for line in result.stdout.splitlines() if line.startswith("raw\\x9bname ")]
    assert "unreadable: " in raw and "not UTF-8" in raw  # the library cannot open it; ls goes on

    result = run_cli("verify", tier)
    assert result.returncode == 1
    assert_escaped(result.stdout)
    assert "UNREADABLE " in result.stdout and "raw\\x9bname" in result.stdout
    assert "verified 2 files, 0 damaged, 0 broken chains, 1 unreadable" in result.stdout


def test_errors_are_escaped(tmp_path):
    path = write_hostile(tmp_path / ("dir" + HOSTILE) / container_name(1))
    flip_chunk_byte(path)
    result = run_cli("verify", path.parent)
    assert result.returncode == 1
    assert_escaped(result.stdout)
    (damaged,) = [line for line in result.stdout.splitlines() if line.startswith("DAMAGED ")]
    assert "dir\\x1b[31mred" in damaged and "u\\x1b[31mred" in damaged  # the path and the region label

    result = run_cli("inspect", tmp_path / ("absent" + HOSTILE + ".rsg"))
    assert result.returncode == 2
    assert_escaped(result.stderr)
    assert "absent\\x1b[31mred" in result.stderr


def test_verify_goes_on_past_each_failure(tmp_path):
    good = write_hostile(tmp_path / "a" / container_name(1), store="a", label="u", dtype="uint8")
    damaged = write_hostile(tmp_path / "b" / container_name(1), store="b", label="u", dtype="uint8")
    flip_chunk_byte(damaged)
    foreign = tmp_path / "c" / "notes.rsg"
    foreign.parent.mkdir()
    foreign.write_text("[local]\npath = '/tmp'\n")
    other = write_hostile(tmp_path / "d" / container_name(1), store="d", label="u", dtype="uint8")

    result = run_cli("verify", good, damaged, foreign, other)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines if line.startswith("DAMAGED")] == [
        f"DAMAGED {damaged}", f"DAMAGED {foreign}"]
    assert "verified 4 files, 2 damaged, 0 broken chains" in result.stdout

    # A missing path is a usage error, after every other path was verified.
    result = run_cli("verify", good, tmp_path / "missing", other)
    assert result.returncode == 2
    assert "missing: no such file or directory" in result.stderr
    assert "verified 2 files, 0 damaged" in result.stdout

    result = run_cli("verify", good, other)
    assert result.returncode == 0, result.stdout
