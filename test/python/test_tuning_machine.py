"""Tuning records carry the machine they were measured on (tuning_log.machine_fingerprint):
a compile applies only this machine's records, the tuner resumes only from them, and the
warm-compile key of a compile with a tuning log names the machine."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import numpy as np
import pytest
from test_schedule import MATMUL

import dlpc
from dlpc import api
from dlpc.diagnostics import DlpcError
from dlpc.dialects.loop import kernels
from dlpc.passes import pipeline
from dlpc.passes.pipeline import parse_module
from dlpc.passes.schedule import tuning_log
from dlpc.passes.schedule.default import apply_tuned_or_default, default_scripts
from dlpc.passes.schedule.tuning_log import (
    Record,
    TuningLog,
    kernel_signature,
    machine_fingerprint,
    schedule_digest,
)
from dlpc.tune.measure import Result
from dlpc.tune.search import Tuner

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCRIPT = "split linear_0/i1 by 2 -> tuned_o, tuned_i\nunroll linear_0/tuned_i\n"
TUNED = {"tuned_o", "tuned_i"}  # loop names only SCRIPT makes


@pytest.fixture
def system(monkeypatch):
    """No override: the fingerprint read from this system (its cache emptied after)."""
    monkeypatch.delenv("DLPC_TUNING_MACHINE", raising=False)
    yield
    tuning_log.cpu_fingerprint.cache_clear()


def test_fingerprint_is_stable_readable_and_not_empty(system):
    first = machine_fingerprint()
    assert first and first == machine_fingerprint()
    assert first == first.strip() and "\n" not in first and len(first) < 80
    if platform.machine():
        assert first.startswith(platform.machine())
    if Path("/proc/cpuinfo").is_file() and "vendor_id" in Path("/proc/cpuinfo").read_text():
        assert " family " in first and " model " in first


def test_fingerprint_honours_the_environment(system, monkeypatch):
    mine = machine_fingerprint()
    monkeypatch.setenv("DLPC_TUNING_MACHINE", "  lab box 3 ")
    assert machine_fingerprint() == "lab box 3"
    monkeypatch.setenv("DLPC_TUNING_MACHINE", "")
    assert machine_fingerprint() == mine


X86 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 26
model\t\t: 2
model name\t: AMD EPYC
flags\t\t: fpu sse sse2 sse4_1 sse4_2 avx avx2 fma avx512f avx512bw
power management:

processor\t: 1
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 85
flags\t\t: fpu sse4_2
"""

ARM = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32
CPU implementer\t: 0x41
CPU part\t: 0xd0c
"""


def test_fingerprint_reads_the_first_processor_of_cpuinfo(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(X86)
    assert tuning_log._cpuinfo_fingerprint(str(path)) == "AuthenticAMD family 26 model 2 avx512f"
    path.write_text(X86.replace(" avx512f avx512bw", ""))
    assert tuning_log._cpuinfo_fingerprint(str(path)).endswith("model 2 avx2")
    path.write_text(X86.split("\n\n")[1].replace(" sse4_2", ""))
    assert tuning_log._cpuinfo_fingerprint(str(path)) == "GenuineIntel family 6 model 85"
    path.write_text(ARM)  # no vendor, family or model: the platform's names instead
    assert tuning_log._cpuinfo_fingerprint(str(path)) is None
    assert tuning_log._cpuinfo_fingerprint(str(tmp_path / "none")) is None


def test_an_unreadable_cpuinfo_falls_back_to_the_platform(system, monkeypatch):
    def unreadable(path="/proc/cpuinfo"):
        raise PermissionError(path)

    monkeypatch.setattr(tuning_log, "_cpuinfo_fingerprint", unreadable)
    monkeypatch.setattr(platform, "machine", lambda: "riscv64")
    monkeypatch.setattr(platform, "processor", lambda: "")
    tuning_log.cpu_fingerprint.cache_clear()
    assert machine_fingerprint() == "riscv64"
    monkeypatch.setattr(platform, "machine", lambda: "")
    tuning_log.cpu_fingerprint.cache_clear()
    assert machine_fingerprint() == "unknown"  # never empty: "" is a record of no machine


# ------------------------------------------------------------------------- the log


def test_append_stamps_the_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("DLPC_TUNING_MACHINE", "box-a")
    path = tmp_path / "t.jsonl"
    log = TuningLog(path)
    log.append(Record("s", "k", "c", "a", 1.0, True))
    log.append(Record("s", "k", "c", "b", 1.0, True, machine="box-b"))  # kept as given
    assert [r.machine for r in log.records] == ["box-a", "box-b"]
    assert [json.loads(line)["machine"] for line in path.read_text().splitlines()] == [
        "box-a",
        "box-b",
    ]
    assert [r.machine for r in TuningLog(path).records] == ["box-a", "box-b"]


def test_a_machine_of_the_wrong_type_is_not_a_record(tmp_path):
    path = tmp_path / "t.jsonl"
    line = {"sig": "s", "kernel": "k", "target": "c", "script": "a", "time": 1.0, "ok": True}
    path.write_text(json.dumps({**line, "machine": 3}) + "\n")
    with pytest.raises(DlpcError, match="line 1: not a tuning record"):
        TuningLog(path)


def test_best_and_seen_count_only_the_machine_asked_for(tmp_path):
    log = TuningLog(None)
    log.records = [
        Record("s", "k", "c", "fast-on-a", 1.0, True, machine="a"),
        Record("s", "k", "c", "slow-on-a", 3.0, True, machine="a"),
        Record("s", "k", "c", "fast-on-b", 2.0, True, machine="b"),
        Record("s", "k", "c", "unknown", 0.5, True),  # written before records said where
    ]
    assert log.best("s", "c").script == "unknown"  # no machine given: every record
    assert log.best("s", "c", machine="a").script == "fast-on-a"
    assert log.best("s", "c", machine="b").script == "fast-on-b"
    assert log.best("s", "c", machine="c") is None
    assert log.best("s", "c", machine="") is None  # a record without machine matches none
    assert log.seen("s", "c", machine="a") == {"fast-on-a", "slow-on-a"}
    assert log.seen("s", "c", machine="") == set()
    assert log.seen("s", "c") == {"fast-on-a", "slow-on-a", "fast-on-b", "unknown"}
    assert [r.script for r in log.for_kernel("s", "c", "b")] == ["fast-on-b"]


# ---------------------------------------------------------------- applying a log


def _mlp_log(tmp_path, machine: str | None, default: str | None = None) -> tuple:
    """examples/mlp.dlpc and a log of one record for its linear_0 at -O0 (a split the
    default does not make), measured on `machine` (None: a record without the field)."""
    model = dlpc.load(EXAMPLES / "mlp.dlpc", batch=1)
    raw = model.module.clone()
    pipeline.lower(raw, "loop", pipeline.PipelineOptions(opt_level=0))
    (linear,) = [k for k in kernels(raw) if k.sym == "linear_0"]
    record = Record(kernel_signature(linear), "linear_0", "c", SCRIPT, 1e-6, True)
    record.default = default or schedule_digest(default_scripts(raw, "linear_0"), "linear_0")
    fields = dict(record.__dict__)
    if machine is not None:
        fields["machine"] = machine
    else:
        del fields["machine"]
    path = tmp_path / "tune.jsonl"
    path.write_text(json.dumps(fields) + "\n")
    return model, path


def _loop_names(module) -> set[str]:
    return {op.attributes["name"].data for op in module.walk() if op.name == "loop.for"}


def _lower(model, log):
    module = model.module.clone()
    pipeline.lower(module, "loop", pipeline.PipelineOptions(opt_level=0))
    return module, apply_tuned_or_default(module, str(log))


def test_compile_applies_only_this_machines_records(tmp_path, monkeypatch, capsys):
    """The same log, compiled on the machine that measured it (tuned) and on another
    (the default, one warning line naming the kernel; not the first compile's cached
    artifact: the warm-compile key names the machine)."""
    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path / "cache"))
    model, log = _mlp_log(tmp_path, "box-a")
    x = api.random_inputs(model)
    (ref,) = api.reference(model, x)

    monkeypatch.setenv("DLPC_TUNING_MACHINE", "box-a")
    here = api.compile(model, target="c", opt_level=0, tuning_log=str(log))
    assert TUNED <= _loop_names(here.lowered)
    np.testing.assert_allclose(here(*x)[0], ref, rtol=1e-4, atol=1e-5)
    assert "warning" not in capsys.readouterr().err
    assert api.compile(model, target="c", opt_level=0, tuning_log=str(log)).cached

    monkeypatch.setenv("DLPC_TUNING_MACHINE", "box-b")
    there = api.compile(model, target="c", opt_level=0, tuning_log=str(log))
    assert not there.cached
    assert not TUNED & _loop_names(there.lowered)
    np.testing.assert_allclose(there(*x)[0], ref, rtol=1e-4, atol=1e-5)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"dlpc: warning: tuning log {log}: ")
    assert "1 kernel(s) (linear_0) have only records measured on other machines" in err
    assert "re-tune with dlpc-tune on this machine, 'box-b'" in err
    assert "older default" not in err


def test_the_tuned_and_default_choice_per_machine(tmp_path, monkeypatch, capsys):
    model, log = _mlp_log(tmp_path, "box-a")
    monkeypatch.setenv("DLPC_TUNING_MACHINE", "box-a")
    module, how = _lower(model, log)
    assert how["linear_0"] == "tuned" and TUNED <= _loop_names(module)
    monkeypatch.setenv("DLPC_TUNING_MACHINE", "box-b")
    module, how = _lower(model, log)
    assert how["linear_0"] == "default" and not TUNED & _loop_names(module)
    assert "tuned" not in how.values()
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert str(module) == str(_lower(model, empty)[0])  # exactly the default schedules
    assert capsys.readouterr().err.count("other machines") == 1


def test_a_record_without_a_machine_is_not_applied(tmp_path, capsys):
    """A log written before records named their machine: measured on an unknown machine,
    applied on none (this one included)."""
    model, log = _mlp_log(tmp_path, None)
    assert "machine" not in log.read_text()
    module, how = _lower(model, log)
    assert how["linear_0"] == "default" and not TUNED & _loop_names(module)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "1 kernel(s) (linear_0) have only records measured" in err


@pytest.mark.parametrize("machine", ["box-b", None])
def test_foreign_and_stale_records_are_reported_once_as_foreign(
    tmp_path, monkeypatch, capsys, machine
):
    monkeypatch.setenv("DLPC_TUNING_MACHINE", "box-a")
    model, log = _mlp_log(tmp_path, machine, default="0123456789abcdef")
    _, how = _lower(model, log)
    assert how["linear_0"] == "default"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "other machines" in err and "older default" not in err


def test_stale_records_of_this_machine_are_reported_as_stale(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DLPC_TUNING_MACHINE", "box-a")
    model, log = _mlp_log(tmp_path, "box-a", default="0123456789abcdef")
    _, how = _lower(model, log)
    assert how["linear_0"] == "default"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "1 kernel(s) (linear_0)" in err and "older default" in err


def test_the_warm_compile_key_names_the_machine_with_a_tuning_log(tmp_path, monkeypatch):
    from dlpc.backends.runtime import artifact

    log = tmp_path / "tune.jsonl"
    log.write_text("")
    weights = {"w": np.zeros(3, np.float32)}

    def keys(machine: str) -> tuple[str, str]:
        monkeypatch.setenv("DLPC_TUNING_MACHINE", machine)
        return (
            artifact.artifact_key("ir", weights, "c", {"tuning_log": str(log)}),
            artifact.artifact_key("ir", weights, "c", {"tuning_log": None}),
        )

    (tuned_a, plain_a), (tuned_b, plain_b) = keys("box-a"), keys("box-b")
    assert tuned_a != tuned_b  # the same log compiles other schedules on another machine
    assert plain_a == plain_b  # without a log the machine does not enter the key
    assert keys("box-a") == (tuned_a, plain_a)


# ----------------------------------------------------------------------- the tuner


def _fake_measure(time: float):
    def measure(ir, script, **kw):
        return Result(True, time)

    return measure


def test_the_tuner_measures_again_on_another_machine(tmp_path, monkeypatch):
    """A log from another machine neither makes the tuner skip its schedules nor gives
    its (here absurdly fast) times as this machine's best; the new records name this
    machine, and dlpc-tune's resume note says the others were not replayed."""
    from dlpc.tools import dlpc_tune

    log = tmp_path / "tune.jsonl"
    monkeypatch.setenv("DLPC_TUNING_MACHINE", "box-a")
    tuner = Tuner(parse_module(MATMUL), log=str(log), seed=1, measure_fn=_fake_measure(1e-9))
    first = list(tuner.run(trials=2))
    assert len(first) == 2
    resumed = Tuner(parse_module(MATMUL), log=str(log), seed=1, measure_fn=_fake_measure(1e-9))
    assert list(resumed.run(trials=2))[0].script not in {e.script for e in first}

    monkeypatch.setenv("DLPC_TUNING_MACHINE", "box-b")
    tuner = Tuner(parse_module(MATMUL), log=str(log), seed=1, measure_fn=_fake_measure(1e-3))
    note = dlpc_tune.replay_note(tuner.log, tuner.tasks, str(log))
    assert note is not None and "replayed" not in note.splitlines()[0]
    assert "4 logged measurements were made on other machines: not replayed" in note
    assert "mm: best so far none yet (its records were measured on other machines)" in note
    again = list(tuner.run(trials=2))
    assert again[0].script == first[0].script  # the default, measured again
    assert all(e.best == 1e-3 for e in again)  # box-a's 1e-9 is not this machine's best
    records = TuningLog(log).records
    assert [r.machine for r in records] == ["box-a"] * 4 + ["box-b"] * 2
    task = tuner.tasks[0]
    assert TuningLog(log).best(task.sig, "c", task.default, "box-b").time == 1e-3
    history = dlpc_tune.history_of(TuningLog(log), tuner.tasks)
    assert [t for t, _, _ in history] == [1, 2] and {b for _, _, b in history} == {1e-3}


def test_the_library_and_artifact_keys_name_the_cpu(monkeypatch, tmp_path):
    """A library built with -march=native is this CPU's: cbuild's cache key and the
    compiled model's key change with `cpu_fingerprint` (a cache directory shared by
    machines of other CPUs must not hand one the other's code), not with the tuning
    override."""
    import numpy as np

    from dlpc.backends.runtime import artifact, cbuild

    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path))
    source = "int dlpc_main(void **args) { (void)args; return 0; }\n"
    names = set()
    keys = set()
    for cpu in ("cpu one", "cpu two"):
        monkeypatch.setattr(tuning_log, "cpu_fingerprint", lambda cpu=cpu: cpu)
        library = cbuild.build(source, name="cpukey")
        names.add(library.path.name)
        keys.add(artifact.artifact_key("ir", {"w": np.zeros(2, np.float32)}, "c", {}))
    assert len(names) == 2 or "-march=native" not in cbuild.flags(cbuild.compiler())
    assert len(keys) == 2
    monkeypatch.setenv("DLPC_TUNING_MACHINE", "override")
    assert artifact.artifact_key("ir", {"w": np.zeros(2, np.float32)}, "c", {}) in keys
