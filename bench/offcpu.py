"""Where a process's main thread is off the CPU, for adjoint.py --offcpu
(issue 27, part 1: where the time of a small checkpoint goes).

A CPU profile sees only the time a thread runs. A store call that wakes one
of the store's threads (a condition variable's signal) can lose the CPU to
it on the spot, and the caller's wait then shows in no profile. This
records every context switch of the machine (`perf record -a -e
sched:sched_switch` with call graphs, so that the moment the main thread is
switched back in is seen too, whoever ran meanwhile), and charges each
interval from the main thread's switch out to its switch back in to the
innermost user-space frame of its stack at the switch out (and its
caller), with the
switch's kind: "preempted" (the thread could have run on) or "waits" (it
blocked: a lock, a condition, I/O).
"""

from __future__ import annotations

import re
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

RECORD = ["perf", "record", "-q", "-a", "-e", "sched:sched_switch", "--call-graph", "dwarf,8192"]
SCRIPT = ["perf", "script", "-F", "tid,time,trace,ip,sym"]
TOP = 8  # frames in the report
# "<tid> <time>: prev_comm=... prev_pid=P ... prev_state=S ==> next_comm=... next_pid=N ..."
SWITCH = re.compile(r"^\s*\d+\s+([\d.]+):\s+prev_comm=.*?prev_pid=(\d+) .*?prev_state=(\S+) ==> next_comm=.*?next_pid=(\d+)")
# The kernel's part of a stack, down to where user space called or was interrupted.
KERNEL = re.compile(r"^(__schedule|schedule|preempt_schedule|irqentry_|asm_|exit_to_user|entry_SYSCALL|do_syscall"
                    r"|__x64_sys|do_futex|futex|__futex|syscall_exit|__cond_resched|_cond_resched)")


def record(command: List[str], data: Path) -> subprocess.CompletedProcess:
    """Runs `command` under RECORD into `data`; its output is captured."""
    return subprocess.run(RECORD + ["-o", str(data), "--"] + command, capture_output=True, text=True)


def switches(data: Path) -> Iterable[Tuple[float, int, str, int, List[str]]]:
    """(time, prev pid, prev state, next pid, the switched-out thread's frames)
    of every switch in `data`, in order."""
    script = subprocess.Popen(SCRIPT + ["-i", str(data)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, errors="replace")
    current: Optional[Tuple[float, int, str, int, List[str]]] = None
    assert script.stdout is not None
    for line in script.stdout:
        match = SWITCH.match(line)
        if match:
            if current is not None:
                yield current
            current = (float(match.group(1)), int(match.group(2)), match.group(3), int(match.group(4)), [])
        elif current is not None and line.strip():
            current[4].append(line.split(None, 1)[-1].strip())
    if current is not None:
        yield current
    script.wait()


def where(frames: List[str]) -> str:
    """The innermost user-space frame and its caller ("f ← caller"): the
    innermost is often a C library function (a condition's signal), its
    caller says whose. Frames perf could not name are left out."""
    user = [frame for frame in frames if not KERNEL.match(frame) and frame != "[unknown]"]
    return " ← ".join(user[:2]) or "[no user frame]"


def summary(data: Path, pid: int) -> Dict[str, Any]:
    """The main thread's (tid `pid`) off-CPU intervals, summed per innermost
    user frame and kind: {"seconds", "intervals", "by_frame": [(frame,
    kind, intervals, seconds)] largest first}."""
    totals: Dict[Tuple[str, str], List[float]] = defaultdict(lambda: [0, 0.0])
    out: Optional[Tuple[float, Tuple[str, str]]] = None
    for time, prev, state, following, frames in switches(data):
        if prev == pid:
            out = (time, (where(frames), "preempted" if state.startswith("R") else "waits"))
        if following == pid and out is not None:
            totals[out[1]][0] += 1
            totals[out[1]][1] += time - out[0]
            out = None
    by_frame = sorted(((frame, kind, int(n), seconds) for (frame, kind), (n, seconds) in totals.items()),
                      key=lambda entry: entry[3], reverse=True)
    return {"seconds": sum(entry[3] for entry in by_frame), "intervals": sum(entry[2] for entry in by_frame),
            "by_frame": by_frame}


def report_lines(title: str, result: Dict[str, Any], wall: float, calls: int,
                 fmt_time: Callable[[float], str]) -> List[str]:
    """The table of one summary; `calls` are the run's saves and loads."""
    if "failure" in result:
        return [title, "", f"failed: {result['failure']}", ""]
    lines = [title, "",
             f"`{' '.join(RECORD)}` of a `--worker` run (bench/offcpu.py): its main thread was off the CPU "
             f"{fmt_time(result['seconds'])} of the row's wall {fmt_time(wall)}, in {result['intervals']} "
             f"intervals, with {calls} saves and loads. Each interval is charged to the innermost "
             "user-space frame (and its caller) at the switch out: preempted (it could have run on: another thread took "
             "its CPU, often one it had just woken) or waits (it blocked).", "",
             "| innermost frame ← its caller, at the switch out | kind | intervals | off the CPU | per interval | per save or load |",
             "|---|---|---:|---:|---:|---:|"]
    for frame, kind, n, seconds in result["by_frame"][:TOP]:
        lines.append(f"| `{frame[:140]}` | {kind} | {n} | {fmt_time(seconds)} | {fmt_time(seconds / n)} | "
                     f"{fmt_time(seconds / calls) if calls else '—'} |")
    return lines + [""]
