"""Messages in Python: the same text as the C API (and so the Fortran
wrapper) for the same failure, configuration errors that name the file, the
line and the key a typo away, control characters escaped, RESURGO_
variables that are not keys left alone, and log_level="debug" saying more
than info (docs/config.md)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

import resurgo

REPO = Path(__file__).resolve().parents[2]
C_LIBRARY = REPO / "build/cpp/src/libresurgo.so.0"


@pytest.fixture
def c_api():
    """The C API of the library the C++ build made (its own copy beside the
    extension's): what C and Fortran programs see."""
    if not C_LIBRARY.exists():
        pytest.skip(f"{C_LIBRARY} is not built (cmake --build build/cpp)")
    lib = ctypes.CDLL(str(C_LIBRARY))
    lib.rsg_last_error.restype = ctypes.c_char_p
    lib.rsg_open.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.rsg_protect.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    lib.rsg_checkpoint.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rsg_close.argtypes = [ctypes.c_void_p]
    return lib


def c_open_error(lib, config: str | None, name: str) -> str:
    store = ctypes.c_void_p()
    assert lib.rsg_open(None if config is None else config.encode(), name.encode(), ctypes.byref(store)) != 0
    return lib.rsg_last_error().decode()


def python_error(call) -> resurgo.Error:
    with pytest.raises(resurgo.Error) as info:
        call()
    return info.value


def test_open_failures_read_as_in_c(c_api, tmp_path, monkeypatch):
    monkeypatch.setenv("RESURGO_LOCAL_PATH", str(tmp_path / "l2"))
    typo = tmp_path / "typo.toml"
    typo.write_text("[local]\n\nkep = 1\n")
    error = python_error(lambda: resurgo.Store("same", config=typo))
    assert isinstance(error, resurgo.ConfigError)
    assert str(error).startswith(
        f"configuration file '{typo}' line 3: unknown configuration key 'local.kep'; did you mean local.keep?")
    assert str(error) == c_open_error(c_api, str(typo), "same")

    monkeypatch.setenv("RESURGO_LOCAL_KEPP", "1")
    error = python_error(lambda: resurgo.Store("same"))
    assert str(error).startswith("environment variable RESURGO_LOCAL_KEPP: unknown configuration key 'local.kepp'; "
                                 "did you mean RESURGO_LOCAL_KEEP?")
    assert str(error) == c_open_error(c_api, None, "same")
    monkeypatch.delenv("RESURGO_LOCAL_KEPP")

    error = python_error(lambda: resurgo.Store("bad\nname\x1b[2J"))
    assert isinstance(error, resurgo.InvalidArgumentError)
    assert "'bad\\x0aname\\x1b[2J'" in str(error) and "\n" not in str(error) and "\x1b" not in str(error)
    assert str(error) == c_open_error(c_api, None, "bad\nname\x1b[2J")


def test_call_failures_read_as_in_c(c_api, dirs, monkeypatch):
    u = np.ones(16)
    monkeypatch.setenv("RESURGO_LOCAL_PATH", str(dirs.l2 / "c"))
    monkeypatch.setenv("RESURGO_PERSISTENT_PATH", str(dirs.l4 / "c"))
    store = ctypes.c_void_p()
    assert c_api.rsg_open(None, b"calls", ctypes.byref(store)) == 0, c_api.rsg_last_error()
    assert c_api.rsg_protect(store, 0, u.ctypes.data, u.nbytes, b"u\x1b") != 0
    c_label = c_api.rsg_last_error().decode()
    assert c_api.rsg_protect(store, 0, u.ctypes.data, u.nbytes, b"u") == 0
    assert c_api.rsg_checkpoint(store, 5) == 0
    assert c_api.rsg_checkpoint(store, 5) != 0
    c_version = c_api.rsg_last_error().decode()
    assert c_api.rsg_close(store) == 0

    monkeypatch.setenv("RESURGO_LOCAL_PATH", str(dirs.l2 / "py"))
    monkeypatch.setenv("RESURGO_PERSISTENT_PATH", str(dirs.l4 / "py"))
    with resurgo.Store("calls") as py:
        error = python_error(lambda: py.protect("u\x1b", u))
        assert isinstance(error, resurgo.InvalidArgumentError)
        assert "'u\\x1b'" in str(error) and "\x1b" not in str(error)
        assert str(error) == c_label
        py.protect("u", u)
        py.checkpoint(5)
        error = python_error(lambda: py.checkpoint(5))
        assert isinstance(error, resurgo.InvalidArgumentError)
        assert str(error) == c_version


def test_the_projects_own_and_unrelated_variables_leave_the_open_alone(dirs, monkeypatch):
    for name in ("RESURGO_SKIP_SYSTEM_CHECK", "RESURGO_BENCH_PACKAGES", "RESURGO_IO_FAULT_SEED", "RESURGO_HOME"):
        monkeypatch.setenv(name, "1")
    with resurgo.Store("beside", **dirs.kw()) as store:
        store.protect("u", np.ones(8))
        store.checkpoint(1)


def test_config_variable_names_a_file(dirs, tmp_path, monkeypatch):
    missing = tmp_path / "missing.toml"
    monkeypatch.setenv("RESURGO_CONFIG", str(missing))
    error = python_error(lambda: resurgo.Store("site", **dirs.kw()))
    assert isinstance(error, resurgo.ConfigError)
    assert str(error) == (f"environment variable RESURGO_CONFIG: configuration file '{missing}' cannot be opened "
                          "for reading: No such file or directory")
    site = tmp_path / "site.toml"
    site.write_text("[log]\nlevel = \"verbose\"\n")
    monkeypatch.setenv("RESURGO_CONFIG", str(site))
    error = python_error(lambda: resurgo.Store("site", **dirs.kw()))
    assert str(error).startswith(f"environment variable RESURGO_CONFIG: configuration file '{site}' line 2: "
                                 "configuration key 'log.level': unknown value 'verbose'; use off, error, warn")
    site.write_text("[persistent]\nevery = 0\n")  # under the keywords: they win
    with resurgo.Store("site", **dirs.kw()) as store:
        store.protect("u", np.ones(8))
        store.checkpoint(1)
        store.wait(1, 4)


def test_debug_logs_more_than_info(dirs, capfd):
    def run(level: str) -> str:
        with resurgo.Store(f"log-{level}", log_level=level, **dirs.kw()) as store:
            store.protect("u", np.ones(64))
            store.checkpoint(1)
            store.wait()
            store.restart()
        return capfd.readouterr().err

    info, debug = run("info"), run("debug")
    assert " debug: " not in info
    assert "resurgo[log-debug] debug: configuration: capture copy" in debug
    assert "resurgo[log-debug] debug: version 1 goes to L2, L4\n" in debug
    assert "resurgo[log-debug] debug: restart of the newest version: version 1 read from L2 (chain 1)\n" in debug


def test_the_python_layers_own_checks_read_as_the_core_does(tmp_path):
    """Checks made in Python before the core is called use the same form."""
    store = resurgo.Store("msgs", local_path=str(tmp_path / "l2"), persistent_every=0)
    u = np.zeros(4)
    store.protect("u", u)
    with pytest.raises(resurgo.InvalidArgumentError, match=r"^protect on store 'msgs': label 'u' is already"):
        store.protect("u", np.zeros(4))
    with pytest.raises(resurgo.NotFoundError, match=r"^unprotect on store 'msgs': no region labelled 'a\\x0ab'"):
        store.unprotect("a\nb")
    with pytest.raises(resurgo.InvalidArgumentError, match=r"^checkpoint on store 'msgs': version -?\d+ is out of"):
        store.checkpoint(2**40)
    store.close()
