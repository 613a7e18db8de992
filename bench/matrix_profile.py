"""Where ConvergentMatrix's CPU time goes in one run of bench/matrix.py's
convergent row (its --profile): rank 0 of the job runs under `perf record
--call-graph dwarf`, the other ranks as usual, and every sample whose stack
is inside update(), commit() or the progress thread is put in a class by
the frames on its stack (adding bins, packing them, grouping indices by
owner, copying the update, page faults, MPI, ...). On-CPU time only: the
difference between a call's wall time (MatrixStats, printed beside) and its
samples is time the thread slept or waited for a core.
"""

from __future__ import annotations

import collections
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

FREQUENCY = 999  # samples per second

# (class, frames any of which puts a sample in it); the first match wins, so
# page faults count as such wherever they happen.
CLASSES: List[Tuple[str, Tuple[str, ...]]] = [
    ("page faults (first touch of memory)", ("exc_page_fault",)),
    ("freeing memory (munmap)", ("munmap",)),
    ("adding bins into the local array (apply_bin)", ("apply_bin",)),
    ("packing bins (encode_bin)", ("encode_bin",)),
    ("grouping indices by owner (UpdateBins)", ("OwnerGroups", "UpdateBins")),
    ("copying the update into the queue", ("QueuedUpdate",)),
    ("receiving a bin (MPI_Recv)", ("PMPI_Recv", "MPI_Recv")),
    ("MPI polling (Iprobe, Test*, progress)", ("Iprobe", "Testsome", "PMPI_Test", "opal_progress")),
    ("sleeping or waking (nanosleep, scheduler)", ("nanosleep", "schedule", "futex")),
]
ROLES = (("application thread, in update()", "Impl::update"), ("application thread, in commit()", "Impl::commit"),
         ("progress thread", "ProgressThread::run"))


def classify(frames: List[str]) -> str:
    for name, keys in CLASSES:
        if any(k in f for f in frames for k in keys):
            return name
    return "other"


def read_samples(data: Path) -> Dict[str, collections.Counter]:
    """Per role, the samples per class."""
    out = subprocess.run(["perf", "script", "-i", str(data), "-F", "tid,ip,sym"], capture_output=True, text=True,
                         check=False).stdout
    roles: Dict[str, collections.Counter] = {role: collections.Counter() for role, _ in ROLES}
    for block in out.split("\n\n"):
        lines = [line.strip() for line in block.strip().splitlines()]
        frames = [line.split(" ", 1)[1] if " " in line else line for line in lines[1:]]
        role = next((name for name, key in ROLES if any(key in f for f in frames)), None)
        if role is not None:
            roles[role][classify(frames)] += 1
    return roles


def profile_job(runner, job) -> Tuple[Optional[Dict[str, collections.Counter]], Optional[dict], str]:
    """Runs `job` with rank 0 under perf; (samples per role and class, the run's line, why it failed)."""
    with tempfile.TemporaryDirectory(prefix="matrix-profile-") as tmp:
        data = Path(tmp) / "perf.data"
        wrapper = Path(tmp) / "rank0-perf.sh"
        wrapper.write_text("#!/bin/sh\n"
                           f'[ "$OMPI_COMM_WORLD_RANK" = 0 ] && exec perf record -q -F {FREQUENCY} '
                           f'--call-graph dwarf,16384 -o {data} -- "$@"\nexec "$@"\n')
        wrapper.chmod(0o755)
        cmd = runner.command(job)
        at = cmd.index(str(runner.binaries[job.row]))
        cmd = cmd[:at] + [str(wrapper)] + cmd[at:]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=runner.args.timeout, check=False)
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{"kind": "run"')]
        if proc.returncode != 0 or not lines or not data.exists():
            return None, None, f"exit status {proc.returncode}: {proc.stderr.strip()[-300:]}"
        return read_samples(data), lines[-1], ""


def profile_section(args, runner, job_type) -> List[str]:
    """The profile of the convergent row with compute at 2 ranks and the largest rank count."""
    if not shutil.which("perf"):
        return ["## Profile", "", "Not measured: `perf` was not found.", ""]
    lines = ["## Profile (rank 0, one run each)", "",
             f"`{Path(__file__).name}`: rank 0 of one convergent job with compute under `perf record -F {FREQUENCY} "
             "--call-graph dwarf` (the other ranks as usual); each sample inside update(), commit() or the "
             "progress thread is put in the first class a frame of its stack matches. On-CPU milliseconds of rank "
             "0 over the whole timed part; beside each call its wall time (MatrixStats) for the difference, time "
             "the thread waited (sleeping between polls, or for a core). perf slows the profiled rank a little.",
             ""]
    several = [p for p in args.ranks if p >= 2]
    for p in sorted({min(several), max(several)}) if several else []:
        roles, run, why = profile_job(runner, job_type("convergent", p, True))
        if roles is None:
            lines += [f"{p} ranks: the profiled job failed ({why}).", ""]
            continue
        walls = {"application thread, in update()": run["stats_update_s"][0],
                 "application thread, in commit()": run["stats_commit_s"][0],
                 "progress thread": None}
        lines += [f"{p} ranks (rank 0: {run['total_s'][0] * 1e3:.1f} ms from the barrier to commit's return):", "",
                  "| thread | class | on CPU |", "|---|---|---:|"]
        for role, counts in roles.items():
            total = sum(counts.values())
            wall = walls[role]
            head = f"**{total * 1e3 / FREQUENCY:.1f} ms**" + (f" (wall {wall * 1e3:.1f} ms)" if wall else "")
            lines.append(f"| {role} | all | {head} |")
            for name, count in counts.most_common():
                if count * 1e3 / FREQUENCY >= 0.5:
                    lines.append(f"| | {name} | {count * 1e3 / FREQUENCY:.1f} ms |")
        lines.append("")
    return lines

