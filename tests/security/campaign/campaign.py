#!/usr/bin/env python3
"""Security campaign (docs/reliability.md, "Security"; issue 26).

Another local user attacks a store's directories and files; each case ends
with the victim's clear refusal, a safe default, or its own data restored,
never with a file written outside the store, a foreign version restored, a
hang or a crash.

Run as root, the driver makes a scratch tree under /tmp and runs the victim
(security_victim) as uid 60001 and the attacker as uid 60002 through
setpriv; both are members of group 60100, the group of the shared project
directories. The attacker's actions run as the attacker (this script,
re-invoked with --attacker-ops), so the campaign plants only what a second
user really can. Some cases run the victim as root. Without root only the
cases that need no second user run; the others are listed as not run.

    python3 tests/security/campaign/campaign.py --victim build/sec-campaign/tests/security/campaign/security_victim
    ctest --test-dir build/sec-campaign -R security --output-on-failure

Exit status 0 when every case passes. Only the standard library is used.
"""

import argparse
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

VICTIM_UID = 60001
ATTACKER_UID = 60002
PROJECT_GID = 60100  # the group of the shared project directories
ROOT_UID = 0

VICTIM_MARKER = 1111
ATTACKER_MARKER = 6666
STORE = "victim"
PLANTED_VERSION = 100
INT_MAX = 2**31 - 1
MiB = 1 << 20

# security_victim's exit codes.
EXIT_CHECKPOINTED = 0
EXIT_RESTORED_OWN = 10
EXIT_RESTORED_FOREIGN = 11
EXIT_NOTHING = 12
EXIT_REFUSED = 20
EXIT_OTHER_EXCEPTION = 21
EXIT_OUT_OF_MEMORY = 22

# Every process runs under a timeout: one that runs out counts as a hang.
PROCESS_TIMEOUT = 30
# RLIMIT_AS for the hostile containers: the victim's own restart (baseline)
# + the file + one default chunk (4 MiB) + this much for what a failed read
# allocates besides (its error text, the names of a quarantine) and glibc's
# rounding. A reader that sized a buffer by a claimed 1 GiB fails under it.
ADDRESS_SPACE_SLACK = 4 * MiB


class SetupError(Exception):
    """A step of the attack itself failed (the case fails: it proved nothing)."""


# --------------------------------------------------------------- processes


@dataclasses.dataclass
class Run:
    who: str
    argv: list
    rc: int = None
    stdout: str = ""
    stderr: str = ""
    hung: bool = False
    signal: int = 0
    seconds: float = 0.0

    @property
    def report(self):
        """The victim's JSON line ({} when it printed none)."""
        for line in reversed(self.stdout.splitlines()):
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except json.JSONDecodeError:
                    return {}
        return {}

    @property
    def error(self):
        return self.report.get("error", "") or self.stderr.strip()[-300:]


def user_prefix(uid, groups):
    """setpriv arguments that run a command as `uid` in `groups`."""
    group_flag = ["--groups=" + ",".join(str(g) for g in groups)] if groups else ["--clear-groups"]
    if uid == os.geteuid():
        return ["setpriv"] + group_flag + ["--"] if os.geteuid() == 0 else []
    return ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid] + group_flag + ["--"]


def start(uid, argv, cwd, env, groups=(), address_space=None, with_input=False):
    """Starts `argv` as `uid` in its own session (so a timeout kills it whole)."""
    def limits():
        if address_space is not None:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    stdin = subprocess.PIPE if with_input else subprocess.DEVNULL
    return subprocess.Popen(user_prefix(uid, groups) + argv, cwd=cwd, env=env, stdin=stdin,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=limits)


def finish(process, run, timeout, input_text=None):
    """Waits for `process`; kills its whole session when it runs out of time."""
    began = time.monotonic()
    try:
        run.stdout, run.stderr = process.communicate(input_text, timeout=timeout)
    except subprocess.TimeoutExpired:
        run.hung = True
        os.killpg(process.pid, signal.SIGKILL)
        run.stdout, run.stderr = process.communicate()
    run.seconds = time.monotonic() - began
    run.rc = process.returncode
    if run.rc is not None and run.rc < 0 and not run.hung:
        run.signal = -run.rc
    return run


def run_process(who, uid, argv, cwd, env, groups=(), timeout=PROCESS_TIMEOUT, address_space=None,
                input_text=None):
    process = start(uid, argv, cwd, env, groups, address_space, with_input=input_text is not None)
    return finish(process, Run(who, argv), timeout, input_text)


# ---------------------------------------------------------------- snapshots


def entry_of(path):
    """What a watched path is: kind, owner, mode, size, mtime, content hash."""
    status = os.lstat(path)
    if stat.S_ISLNK(status.st_mode):
        content = "-> " + os.readlink(path)
    elif stat.S_ISREG(status.st_mode):
        with open(path, "rb") as handle:
            content = hashlib.sha256(handle.read()).hexdigest()
    else:
        content = ""
    # A directory's entries are watched themselves; its size and times change
    # with them.
    regular = stat.S_ISREG(status.st_mode)
    return (stat.S_IFMT(status.st_mode), status.st_uid, stat.S_IMODE(status.st_mode),
            status.st_size if regular else 0, status.st_mtime_ns if regular else 0, content)


def snapshot(roots):
    """Every entry under `roots`, links not followed."""
    entries = {}
    for root in roots:
        if not os.path.lexists(root):
            continue
        entries[root] = entry_of(root)
        for directory, subdirectories, files in os.walk(root):
            for name in subdirectories + files:
                path = os.path.join(directory, name)
                entries[path] = entry_of(path)
    return entries


def inside(path, directory):
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def outside_writes(before, after, stores, attacker_uid):
    """What changed outside the victim's store directories `stores`.

    Inside them the victim may write its files; an entry the attacker
    planted there may be removed or renamed (a quarantine), never changed:
    its content must be among what the attacker's entries held before."""
    problems = []
    planted = {entry[5] for entry in before.values() if entry[1] == attacker_uid}
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        in_store = any(inside(path, store) for store in stores)
        on_the_way = new is not None and old is None and stat.S_ISDIR(new[0]) and \
            any(inside(store, path) for store in stores)
        if new is not None and new[1] == attacker_uid and old != new and new[5] not in planted:
            problems.append("attacker's entry %s changed" % path)
        elif not in_store and not on_the_way:
            what = "created" if old is None else "removed" if new is None else "changed"
            problems.append("%s %s" % (what, path))
    return problems


# -------------------------------------------------------------- the sandbox


class Sandbox:
    """The scratch tree, the copied binaries and the sentinels of one campaign."""

    def __init__(self, victim_binary, as_root):
        self.as_root = as_root
        self.root = tempfile.mkdtemp(prefix="resurgo-security-", dir="/tmp")
        os.chmod(self.root, 0o755)
        bin_dir = self.mkdir("bin", 0o755)
        self.victim = os.path.join(bin_dir, "security_victim")
        shutil.copy(victim_binary, self.victim)
        os.chmod(self.victim, 0o755)
        self.script = os.path.join(bin_dir, "campaign.py")
        shutil.copy(os.path.abspath(__file__), self.script)
        os.chmod(self.script, 0o644)
        self.python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        # A file of the victim's and one only root may write: symlinks point
        # at them (and at names beside them), and they must stay as they are.
        self.victim_uid = VICTIM_UID if as_root else os.geteuid()
        self.precious_dir = self.mkdir("victim-files", 0o700, self.victim_uid)
        self.precious = self.write(os.path.join(self.precious_dir, "precious"), "the victim's own file\n",
                                   self.victim_uid)
        self.root_only_dir = self.mkdir("root-only", 0o700)
        self.root_secret = self.write(os.path.join(self.root_only_dir, "secret"), "only root writes this\n")
        self.cases_dir = self.mkdir("cases", 0o755)

    def mkdir(self, relative, mode, uid=None, gid=None):
        path = os.path.join(self.root, relative)
        os.makedirs(path, exist_ok=True)
        give(path, mode, uid, gid)
        return path

    @staticmethod
    def write(path, text, uid=None, mode=0o600):
        with open(path, "w") as handle:
            handle.write(text)
        give(path, mode, uid)
        return path

    def sentinels(self):
        return [self.precious_dir, self.root_only_dir]

    def remove(self):
        shutil.rmtree(self.root, ignore_errors=True)


def give(path, mode, uid=None, gid=None):
    if uid is not None or gid is not None:
        os.lchown(path, -1 if uid is None else uid, -1 if gid is None else gid)
    os.chmod(path, mode)


# ------------------------------------------------------------------ a case


@dataclasses.dataclass
class Outcome:
    name: str
    attack: str
    did: str = ""
    verdict: str = "PASS"
    problems: list = dataclasses.field(default_factory=list)


class Case:
    """One attack: its directories, its users, and the checks after each run."""

    def __init__(self, sandbox, name, attack):
        self.sandbox = sandbox
        self.outcome = Outcome(name, attack)
        self.root = sandbox.mkdir(os.path.join("cases", name), 0o755)
        # The victim's TMPDIR: sticky and world-writable, as /tmp.
        self.tmp = self.mkdir("tmp", 0o1777)
        self.victim_uid = sandbox.victim_uid
        self.victim_home = self.mkdir("victim", 0o700, self.victim_uid)
        # A root-run job's working directory: root's own (a job run in a
        # user's directory would be refused for the directory's owner).
        self.root_home = self.mkdir("root-job", 0o700, ROOT_UID) if sandbox.as_root else None
        self.attacker_home = self.mkdir("attacker", 0o700, ATTACKER_UID) if sandbox.as_root else None
        self.holders = []

    def mkdir(self, relative, mode, uid=None, gid=None):
        path = os.path.join(self.root, relative)
        os.makedirs(path, exist_ok=True)
        give(path, mode, uid, gid)
        return path

    def project(self, mode, gid=PROJECT_GID):
        """A project directory of root's, shared with group 60100."""
        return self.mkdir("project", mode, ROOT_UID, gid)

    def env(self, tmpdir=None):
        return {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C",
                "TMPDIR": tmpdir or self.tmp, "MALLOC_ARENA_MAX": "1"}

    # ----- the victim

    def victim(self, mode, cwd=None, uid=None, settings=None, args=(), marker=VICTIM_MARKER, name=STORE,
               tmpdir=None, address_space=None, own_dirs=()):
        """Runs the victim and checks what it left: no write outside its store
        (and `own_dirs`, directories of the victim's own it may also write,
        such as its pin token's), no foreign data, no hang, no crash."""
        uid = self.victim_uid if uid is None else uid
        cwd = cwd or (self.root_home if uid == ROOT_UID and self.root_home else self.victim_home)
        settings = dict(settings or {})
        argv = self.victim_argv(mode, cwd, settings, args, marker, name)
        stores = self.store_dirs(uid, cwd, settings, name, tmpdir) + list(own_dirs)
        before = snapshot(self.watched())
        run = run_process("victim", uid, argv, cwd, self.env(tmpdir), self.groups(), address_space=address_space)
        after = snapshot(self.watched())
        for problem in outside_writes(before, after, stores, ATTACKER_UID):
            self.fail("wrote outside its store: " + problem)
        self.check_run(run)
        return run

    def victim_argv(self, mode, cwd, settings, args, marker, name):
        argv = [self.sandbox.victim, mode, "--name", name, "--dir", cwd, "--marker", str(marker)]
        for key, value in sorted(settings.items()):
            argv += ["--set", "%s=%s" % (key, value)]
        return argv + list(args)

    def start_victim(self, mode, cwd, settings, args=(), marker=VICTIM_MARKER):
        argv = self.victim_argv(mode, cwd, settings, args, marker, STORE)
        return start(self.victim_uid, argv, cwd, self.env(), self.groups())

    def groups(self):
        return (PROJECT_GID,) if self.sandbox.as_root else ()

    def store_dirs(self, uid, cwd, settings, name, tmpdir):
        """The directories the victim may write: its L2 and L4 store directories."""
        local = settings.get("local.path") or self.default_local_path(uid, cwd, tmpdir)
        persistent = os.path.join(cwd, settings.get("persistent.path", "checkpoints"))
        return [os.path.join(local, name), os.path.join(persistent, name)]

    def default_local_path(self, uid, cwd, tmpdir=None):
        run = run_process("victim", uid, [self.sandbox.victim, "default-path", "--dir", cwd], cwd,
                          self.env(tmpdir), self.groups())
        if run.rc != 0 or "path" not in run.report:
            raise SetupError("default-path failed: " + run.stderr.strip())
        return run.report["path"]

    def watched(self):
        return [self.root] + self.sandbox.sentinels()

    def check_run(self, run):
        if run.hung:
            self.fail("hang: %s ran past %d s and was killed" % (run.argv[1], PROCESS_TIMEOUT))
        elif run.signal:
            self.fail("crash: %s died of signal %d" % (run.argv[1], run.signal))
        elif run.rc == EXIT_RESTORED_FOREIGN:
            self.fail("restored foreign data: version %s holding marker %s" %
                      (run.report.get("version"), run.report.get("marker_found")))
        elif run.rc == EXIT_OUT_OF_MEMORY:
            self.fail("out of memory (std::bad_alloc)")
        elif run.rc == EXIT_OTHER_EXCEPTION:
            self.fail("an exception that is no Resurgo error: " + run.error[:160])
        elif run.rc not in (EXIT_CHECKPOINTED, EXIT_RESTORED_OWN, EXIT_NOTHING, EXIT_REFUSED):
            self.fail("exit status %s: %s" % (run.rc, run.error[:160]))

    # ----- the attacker

    def attacker(self, *operations, must_succeed=True, uid=ATTACKER_UID):
        """Runs file operations as the attacker (this script, --attacker-ops)."""
        # On stdin: a thousand links are more than an argument list holds.
        argv = [self.sandbox.python, self.sandbox.script, "--attacker-ops"]
        run = run_process("attacker", uid, argv, self.root, self.env(), self.groups(),
                          input_text=json.dumps(operations))
        results = run.report.get("results", [])
        failed = [r for r in results if r != "ok"]
        if run.rc != 0 or len(results) != len(operations) or (must_succeed and failed):
            raise SetupError("attacker operations failed: %s %s" % (failed or results, run.stderr.strip()[-300:]))
        return results

    def hold_lock(self, path, uid=ATTACKER_UID, mode=0o666):
        """A process of `uid` (the attacker's by default) that holds an flock
        on `path` (created with `mode`)."""
        argv = [self.sandbox.python, self.sandbox.script, "--attacker-hold", path, "%o" % mode]
        process = start(uid, argv, self.root, self.env(), self.groups())
        self.holders.append(process)
        if not wait_for_line(process.stdout, "held"):
            raise SetupError("the attacker could not hold %s: %s" % (path, process.stderr.read()))

    def attacker_version(self, version=PLANTED_VERSION, name=STORE, identity=None):
        """A well-formed version made by the attacker in its own directory,
        with the attacker's marker (and a store identity of its choice, by
        writing .store-id first); returns its path."""
        local = os.path.join(self.attacker_home, "l2-%d%s" % (version, "-forged" if identity else ""))
        if identity:
            self.attacker(["makedirs", os.path.join(local, name), 0o700],
                          ["write", os.path.join(local, name, ".store-id"), identity + "\n", 0o600])
        argv = [self.sandbox.victim, "checkpoint", "--name", name, "--dir", self.attacker_home,
                "--marker", str(ATTACKER_MARKER), "--first", str(version), "--versions", "1",
                "--set", "local.path=" + local, "--set", "persistent.every=0"]
        run = run_process("attacker", ATTACKER_UID, argv, self.attacker_home, self.env(), self.groups())
        if run.rc != EXIT_CHECKPOINTED:
            raise SetupError("the attacker's own checkpoint failed: " + run.error)
        return os.path.join(local, name, version_file(version))

    def close(self):
        for process in self.holders:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()

    # ----- verdicts

    def fail(self, problem):
        self.outcome.problems.append(problem)
        self.outcome.verdict = "FAIL"

    def describe(self, run, label=""):
        """What the victim did, in a few words, for the case's line."""
        prefix = label + ": " if label else ""
        text = {EXIT_CHECKPOINTED: "checkpointed",
                EXIT_RESTORED_OWN: "restored own data v%s" % run.report.get("version"),
                EXIT_RESTORED_FOREIGN: "restored FOREIGN data v%s (marker %s)" % (
                    run.report.get("version"), run.report.get("marker_found")),
                EXIT_NOTHING: "nothing to restore (starts fresh)",
                EXIT_REFUSED: "refused: " + self.excerpt(run.error)}.get(run.rc)
        if run.hung:
            text = "hung (killed after %d s)" % PROCESS_TIMEOUT
        elif run.signal:
            text = "crashed (signal %d)" % run.signal
        elif text is None:
            text = "%s (exit %s): %s" % (run.report.get("outcome", "?"), run.rc, self.excerpt(run.error))
        if run.seconds > 2 and not run.hung:
            text += " (after %.1f s)" % run.seconds
        self.outcome.did = (self.outcome.did + "; " if self.outcome.did else "") + prefix + text

    def excerpt(self, text, length=120):
        """`text` with each quoted path cut to its last name, cut to `length`."""
        text = text.replace(self.root, "<case>").replace(self.sandbox.root, "<scratch>")
        return excerpt(re.sub(r"'[^' ]*/([^'/ ]+)'", r"'…/\1'", text), length)

    def expect(self, run, *allowed, mentions=None):
        """The victim's run ended in one of `allowed` exit codes (and its
        error names `mentions`)."""
        self.describe(run)
        if run.hung or run.signal:
            return
        if run.rc not in allowed:
            names = {EXIT_CHECKPOINTED: "checkpointed", EXIT_RESTORED_OWN: "own data", EXIT_NOTHING: "nothing",
                     EXIT_REFUSED: "a refusal"}
            self.fail("expected %s, got exit %s (%s)" % (" or ".join(names[a] for a in allowed), run.rc,
                                                         self.excerpt(run.error)))
        elif mentions and run.rc == EXIT_REFUSED and mentions not in run.error:
            self.fail("refused, but the message does not say '%s': %s" % (mentions, self.excerpt(run.error)))

    def expect_absent(self, *paths):
        for path in paths:
            if os.path.lexists(path):
                self.fail("a file appeared at a link's target: %s" % path)


def excerpt(text, length=90):
    text = " ".join(text.split())
    return text if len(text) <= length else text[:length - 1] + "…"


def version_file(version, rank=0):
    return "v%010d.r%06d.rsg" % (version, rank)


def old_temporary_names(version, first_pid, count):
    """The predictable temporary names before commit 7c6a3a1, for `count` pids."""
    return [".%s.tmp-%d" % (version_file(version), pid) for pid in range(first_pid, first_pid + count)]


def next_pid():
    try:
        with open("/proc/sys/kernel/ns_last_pid") as handle:
            return int(handle.read()) + 1
    except OSError:
        return os.getpid() + 1


L4_EVERY_VERSION = {"persistent.every": "1"}
SHARED_L4 = {"persistent.every": "1", "persistent.shared_group": "true"}


# ---------------------------------------------- 1. pre-created default L2 root


def l2_root_of(case, uid):
    return os.path.join(case.tmp, "resurgo-%d" % uid)


def case_l2_root_world_writable(case):
    case.attacker(["mkdir", l2_root_of(case, case.victim_uid), 0o777])
    case.expect(case.victim("checkpoint"), EXIT_REFUSED, mentions="belongs to user %d" % ATTACKER_UID)


def case_l2_root_attackers_private(case):
    case.attacker(["mkdir", l2_root_of(case, case.victim_uid), 0o755])
    case.expect(case.victim("checkpoint"), EXIT_REFUSED, mentions="belongs to user %d" % ATTACKER_UID)


def case_l2_leaf_with_planted_version(case):
    """The attacker makes the whole default path, the per-directory leaf
    (its hash is no secret) and the store directory, with a version in it."""
    planted = case.attacker_version()
    store_dir = os.path.join(case.default_local_path(case.victim_uid, case.victim_home), STORE)
    case.attacker(["makedirs", store_dir, 0o777],
                  ["copy", planted, os.path.join(store_dir, version_file(PLANTED_VERSION))])
    case.expect(case.victim("checkpoint"), EXIT_REFUSED, mentions="belongs to user %d" % ATTACKER_UID)
    case.expect(case.victim("restart"), EXIT_REFUSED, EXIT_NOTHING)


def case_l2_root_link_to_attacker_dir(case):
    target = case.mkdir("attacker-public", 0o777, ATTACKER_UID)
    case.attacker(["symlink", target, l2_root_of(case, case.victim_uid)])
    case.expect(case.victim("checkpoint"), EXIT_REFUSED, mentions="link made by user %d" % ATTACKER_UID)


def case_l2_root_link_to_victim_dir(case):
    case.attacker(["symlink", case.sandbox.precious_dir, l2_root_of(case, case.victim_uid)])
    case.expect(case.victim("checkpoint"), EXIT_REFUSED, mentions="link made by user %d" % ATTACKER_UID)


def case_l2_root_fifo(case):
    case.attacker(["mkfifo", l2_root_of(case, case.victim_uid)])
    case.expect(case.victim("checkpoint"), EXIT_REFUSED)


def case_l2_root_root_victim(case):
    """A root-run job: the attacker makes /tmp/resurgo-0 and links in it to a
    root-only file and to a name beside it."""
    root_l2 = l2_root_of(case, ROOT_UID)
    leaf = os.path.basename(case.default_local_path(ROOT_UID, case.root_home))
    created = os.path.join(case.sandbox.root_only_dir, "created-through-l2")
    case.attacker(["mkdir", root_l2, 0o777], ["symlink", case.sandbox.root_only_dir, os.path.join(root_l2, leaf)],
                  ["symlink", created, os.path.join(root_l2, "x")])
    case.expect(case.victim("checkpoint", uid=ROOT_UID), EXIT_REFUSED, mentions="belongs to user %d" % ATTACKER_UID)
    case.expect_absent(created)


# ------------------------------------------- 2. planted versions, shared L4


def case_l4_world_writable_project_planted(case):
    """A 0777 project directory: the attacker makes ./checkpoints/victim
    first, with a version in it."""
    project = case.project(0o777)
    planted = case.attacker_version()
    store_dir = os.path.join(project, "checkpoints", STORE)
    case.attacker(["makedirs", store_dir, 0o777],
                  ["copy", planted, os.path.join(store_dir, version_file(PLANTED_VERSION))])
    case.expect(case.victim("checkpoint", cwd=project, settings=L4_EVERY_VERSION), EXIT_REFUSED)
    case.expect(case.victim("restart", cwd=project, settings={"persistent.every": "0"}), EXIT_REFUSED, EXIT_NOTHING)


def case_l4_world_writable_project_victim_first(case):
    project = case.project(0o777)
    case.expect(case.victim("checkpoint", cwd=project, settings=L4_EVERY_VERSION), EXIT_REFUSED,
                mentions="writable by every user")


def case_l4_group_project_not_allowed(case):
    """A 2770 project directory, shared_group not set: refused, with the hint."""
    project = case.project(0o2770)
    case.expect(case.victim("checkpoint", cwd=project, settings=L4_EVERY_VERSION), EXIT_REFUSED,
                mentions="shared with your group")


def case_l4_group_project_checkpoints_link(case):
    """A group member makes ./checkpoints a link to a directory of the victim's."""
    project = case.project(0o2770)
    case.attacker(["symlink", case.sandbox.precious_dir, os.path.join(project, "checkpoints")])
    case.expect(case.victim("checkpoint", cwd=project, settings=SHARED_L4), EXIT_REFUSED,
                mentions="link made by user %d" % ATTACKER_UID)


def shared_store_dir(case, project):
    """./checkpoints/victim made group-writable by the attacker (a group
    member) before the victim's first run: shared_group accepts it."""
    store_dir = os.path.join(project, "checkpoints", STORE)
    case.attacker(["mkdir", os.path.dirname(store_dir), 0o2770], ["mkdir", store_dir, 0o2770])
    return store_dir


def case_l4_group_project_planted_version(case):
    project = case.project(0o2770)
    store_dir = shared_store_dir(case, project)
    case.expect(case.victim("checkpoint", cwd=project, settings=SHARED_L4), EXIT_CHECKPOINTED)
    planted = case.attacker_version()
    # The version as made, and the same file renamed to a higher number.
    case.attacker(["copy", planted, os.path.join(store_dir, version_file(PLANTED_VERSION))],
                  ["copy", planted, os.path.join(store_dir, version_file(2 * PLANTED_VERSION))])
    case.expect(case.victim("restart", cwd=project, settings=SHARED_L4), EXIT_RESTORED_OWN, EXIT_REFUSED)


def case_l4_group_project_store_dir_made_by_victim(case):
    """The store directory the victim made itself (0700): the attacker, in the
    group, cannot plant in it."""
    project = case.project(0o2770)
    case.attacker(["mkdir", os.path.join(project, "checkpoints"), 0o2770])
    case.expect(case.victim("checkpoint", cwd=project, settings=SHARED_L4), EXIT_CHECKPOINTED)
    planted = case.attacker_version()
    results = case.attacker(["copy", planted, os.path.join(project, "checkpoints", STORE,
                                                           version_file(PLANTED_VERSION))], must_succeed=False)
    if results[0] == "ok":
        case.fail("the attacker could plant a version in the victim's own store directory")
    case.expect(case.victim("restart", cwd=project, settings=SHARED_L4), EXIT_RESTORED_OWN)
    case.outcome.did += " (attacker's copy: %s)" % excerpt(results[0], 40)


FORGED_IDENTITY = "ab" * 16


def replace_identity(case, store_dir):
    """The attacker (a group member: the directory is group-writable and not
    sticky) swaps the store directory's .store-id for an identity of its
    choice and plants a version that carries it: the victim's files are 0600,
    so it needs to read nothing."""
    planted = case.attacker_version(identity=FORGED_IDENTITY)
    case.attacker(["remove", os.path.join(store_dir, ".store-id")],
                  ["write", os.path.join(store_dir, ".store-id"), FORGED_IDENTITY + "\n", 0o640],
                  ["copy", planted, os.path.join(store_dir, version_file(PLANTED_VERSION))])


def case_l4_group_project_replaced_identity(case):
    """The victim's private L2 still holds its identity."""
    project = case.project(0o2770)
    store_dir = shared_store_dir(case, project)
    case.expect(case.victim("checkpoint", cwd=project, settings=SHARED_L4), EXIT_CHECKPOINTED)
    replace_identity(case, store_dir)
    case.expect(case.victim("restart", cwd=project, settings=SHARED_L4), EXIT_REFUSED, EXIT_RESTORED_OWN)


def case_l4_group_project_forged_identity_new_node(case):
    """The documented limit: shared_group trusts the group's members, and a
    store identity authenticates nothing. The same swap, but the victim's L2
    is gone (it restarts on a new node): nothing holds its own identity."""
    project = case.project(0o2770)
    store_dir = shared_store_dir(case, project)
    case.expect(case.victim("checkpoint", cwd=project, settings=SHARED_L4), EXIT_CHECKPOINTED)
    replace_identity(case, store_dir)
    new_node_tmp = case.mkdir("tmp-new-node", 0o1777)
    run = case.victim("restart", cwd=project, settings=SHARED_L4, tmpdir=new_node_tmp)
    case.describe(run)
    if run.rc == EXIT_RESTORED_FOREIGN:
        # Expected by the documentation: not a defect of the library, a limit
        # of shared_group without a keyed MAC. Counted apart.
        case.outcome.problems = [p for p in case.outcome.problems if not p.startswith("restored foreign")]
        case.outcome.verdict = "LIMIT" if not case.outcome.problems else "FAIL"


# ------------------------------------------ 3. symlinked temporaries, locks


def plant_links(case, store_dir, target, lock_target=None, store_id_target=None, regular_temporaries=False):
    """Links under the old predictable temporary names (versions 1-3, the next
    300 pids) to `target`; optionally the lock file and .store-id as links,
    and attacker-owned 0666 files under temporary names (a writer that
    opened one would hand the attacker its checkpoint)."""
    operations = []
    first = next_pid()
    for version in (1, 2, 3):
        for name in old_temporary_names(version, first, 300):
            operations.append(["symlink", target, os.path.join(store_dir, name)])
    if lock_target:
        operations.append(["symlink", lock_target, os.path.join(store_dir, ".lock.r000000")])
    if store_id_target:
        operations.append(["symlink", store_id_target, os.path.join(store_dir, ".store-id")])
    if regular_temporaries:
        for name in old_temporary_names(4, first, 50):
            operations.append(["write", os.path.join(store_dir, name), "", 0o666])
    case.attacker(*operations)


def case_links_lock_store_id_temporaries(case):
    project = case.project(0o2770)
    store_dir = shared_store_dir(case, project)
    created = os.path.join(case.sandbox.precious_dir, "created-through-store-id")
    plant_links(case, store_dir, case.sandbox.precious, lock_target=case.sandbox.precious, store_id_target=created)
    case.expect(case.victim("checkpoint", cwd=project, settings=SHARED_L4), EXIT_REFUSED,
                mentions="symbolic link")
    case.expect_absent(created)


def case_links_store_id(case):
    project = case.project(0o2770)
    store_dir = shared_store_dir(case, project)
    plant_links(case, store_dir, case.sandbox.root_secret, store_id_target=case.sandbox.precious)
    case.expect(case.victim("checkpoint", cwd=project, settings=SHARED_L4), EXIT_REFUSED,
                mentions="symbolic link")


def case_links_temporaries_only(case):
    """Only the temporaries: the victim's random names never meet them."""
    project = case.project(0o2770)
    store_dir = shared_store_dir(case, project)
    plant_links(case, store_dir, case.sandbox.precious, regular_temporaries=True)
    case.expect(case.victim("checkpoint", cwd=project, settings=SHARED_L4), EXIT_CHECKPOINTED)
    case.expect(case.victim("restart", cwd=project, settings=SHARED_L4), EXIT_RESTORED_OWN)


def case_links_root_victim(case):
    """A root-run job in the shared project: the lock file links to a new
    name in a root-only directory, .store-id and the temporaries to a
    root-only file."""
    project = case.project(0o2770)
    store_dir = shared_store_dir(case, project)
    created = os.path.join(case.sandbox.root_only_dir, "created-through-lock")
    plant_links(case, store_dir, case.sandbox.root_secret, lock_target=created,
                store_id_target=case.sandbox.root_secret)
    case.expect(case.victim("checkpoint", uid=ROOT_UID, cwd=project, settings=SHARED_L4), EXIT_REFUSED,
                mentions="symbolic link")
    case.expect_absent(created)


def case_links_root_victim_temporaries_only(case):
    """Root's checkpoint must never land in an attacker-owned temporary the
    attacker could read, nor overwrite a root-only file through a link."""
    project = case.project(0o2770)
    store_dir = shared_store_dir(case, project)
    plant_links(case, store_dir, case.sandbox.root_secret, regular_temporaries=True)
    case.expect(case.victim("checkpoint", uid=ROOT_UID, cwd=project, settings=SHARED_L4), EXIT_CHECKPOINTED)
    case.expect(case.victim("restart", uid=ROOT_UID, cwd=project, settings=SHARED_L4), EXIT_RESTORED_OWN)


# -------------------------------------------------------- 4. locks, tokens


def case_lock_held_by_attacker(case):
    project = case.project(0o2770)
    store_dir = shared_store_dir(case, project)
    case.hold_lock(os.path.join(store_dir, ".lock.r000000"))
    case.expect(case.victim("checkpoint", cwd=project, settings=SHARED_L4), EXIT_REFUSED,
                mentions="belongs to user %d" % ATTACKER_UID)


DEVICE = {"device.backend": "host", "buffer.pin": "eager"}


def token_dir(case):
    """buffer.pin_token_dir: sticky and world-writable, as /dev/shm."""
    return case.mkdir("shm", 0o1777)


def pin_settings(case):
    return dict(DEVICE, **{"buffer.pin_token_dir": token_dir(case), "persistent.every": "0"})


def token_paths(case, uid):
    """The eager pin token, where the library keeps it (a directory of the
    user's own, resurgo-<euid>/pin.lock), and its older name
    resurgo-pin-<uid>.lock straight in the shared directory: both attacked,
    so the case holds whichever the library uses."""
    shared = token_dir(case)
    own_dir = os.path.join(shared, "resurgo-%d" % uid)
    return own_dir, os.path.join(own_dir, "pin.lock"), os.path.join(shared, "resurgo-pin-%d.lock" % uid)


def pin_outcome(case, run):
    """Checkpointed (the pin given up, logged) or refused, soon; never a hang."""
    case.expect(run, EXIT_CHECKPOINTED, EXIT_REFUSED)
    logged = [line for line in run.stderr.splitlines() if "pin" in line]
    if run.rc == EXIT_CHECKPOINTED and logged:
        case.outcome.did += "; logged: " + case.excerpt(logged[0].split(": ", 1)[-1], 260)


def case_pin_token_held(case):
    """The attacker makes the victim's token (0666, and its directory 0777)
    and holds its flock."""
    own_dir, token, old_token = token_paths(case, case.victim_uid)
    case.attacker(["mkdir", own_dir, 0o777])
    case.hold_lock(token)
    case.hold_lock(old_token)
    pin_outcome(case, case.victim("checkpoint", settings=pin_settings(case), args=["--device"]))


def case_pin_token_held_by_own_job(case):
    """No other user can hold the token now, but another job of the victim's
    can: the eager pin must give up after buffer.pin_token_timeout (default
    10 s) instead of blocking the checkpoint for ever."""
    own_dir, token, _ = token_paths(case, case.victim_uid)
    case.attacker(["mkdir", own_dir, 0o700], uid=case.victim_uid)
    case.hold_lock(token, uid=case.victim_uid, mode=0o600)
    # The token's queue files (pin.guard, pin.queue, pin.ticket-<n>) go
    # beside pin.lock in the victim's own directory.
    pin_outcome(case, case.victim("checkpoint", settings=pin_settings(case), args=["--device"], own_dirs=[own_dir]))


def case_pin_token_link(case):
    own_dir, _, old_token = token_paths(case, case.victim_uid)
    case.attacker(["symlink", case.sandbox.precious_dir, own_dir], ["symlink", case.sandbox.precious, old_token])
    pin_outcome(case, case.victim("checkpoint", settings=pin_settings(case), args=["--device"]))


def case_pin_token_link_root_victim(case):
    own_dir, _, old_token = token_paths(case, ROOT_UID)
    created = os.path.join(case.sandbox.root_only_dir, "created-through-token")
    case.attacker(["symlink", case.sandbox.root_only_dir, own_dir], ["symlink", created, old_token])
    pin_outcome(case, case.victim("checkpoint", uid=ROOT_UID, settings=pin_settings(case), args=["--device"]))
    case.expect_absent(created, os.path.join(case.sandbox.root_only_dir, "pin.lock"))


def trace_outcome(case, run, target):
    """The trace is written at close: refused there, or the checkpoint went
    on and the trace was not written; never through the link."""
    case.expect(run, EXIT_CHECKPOINTED, EXIT_REFUSED)
    logged = [line for line in run.stderr.splitlines() if "trace" in line]
    if logged:
        case.outcome.did += "; logged: " + case.excerpt(logged[0].split(": ", 1)[-1], 200)
    case.expect_absent(target)


def case_trace_link(case):
    """trace.path in the sticky TMPDIR, where the attacker planted a link of
    that name to a new name in the victim's own directory."""
    target = os.path.join(case.sandbox.precious_dir, "created-through-trace")
    case.attacker(["symlink", target, os.path.join(case.tmp, "trace.json")])
    settings = {"trace.path": os.path.join(case.tmp, "trace.json"), "persistent.every": "0"}
    trace_outcome(case, case.victim("checkpoint", settings=settings), target)


def case_trace_link_root_victim(case):
    target = os.path.join(case.sandbox.root_only_dir, "created-through-trace")
    case.attacker(["symlink", target, os.path.join(case.tmp, "trace.json")])
    settings = {"trace.path": os.path.join(case.tmp, "trace.json"), "persistent.every": "0"}
    trace_outcome(case, case.victim("checkpoint", uid=ROOT_UID, settings=settings), target)


# ------------------------------------------------------------------ 5. FIFOs


def case_fifo_named_like_a_version(case):
    project = case.project(0o2770)
    store_dir = shared_store_dir(case, project)
    case.expect(case.victim("checkpoint", cwd=project, settings=SHARED_L4), EXIT_CHECKPOINTED)
    case.attacker(["mkfifo", os.path.join(store_dir, version_file(PLANTED_VERSION))])
    case.expect(case.victim("restart", cwd=project, settings=SHARED_L4), EXIT_RESTORED_OWN, EXIT_REFUSED)


def case_fifo_named_store_id(case):
    project = case.project(0o2770)
    store_dir = shared_store_dir(case, project)
    case.expect(case.victim("checkpoint", cwd=project, settings=SHARED_L4), EXIT_CHECKPOINTED)
    case.attacker(["remove", os.path.join(store_dir, ".store-id")], ["mkfifo", os.path.join(store_dir, ".store-id")])
    case.expect(case.victim("restart", cwd=project, settings=SHARED_L4), EXIT_REFUSED, mentions="FIFO")


def case_fifo_named_lock(case):
    project = case.project(0o2770)
    store_dir = shared_store_dir(case, project)
    case.attacker(["mkfifo", os.path.join(store_dir, ".lock.r000000")])
    case.expect(case.victim("checkpoint", cwd=project, settings=SHARED_L4), EXIT_REFUSED, mentions="FIFO")


# --------------------------------------- 6, 7. shared directories, one name


def case_shared_workdir_two_users(case):
    """Two users run the same program in one group project directory."""
    project = case.project(0o2770)
    case.attacker(["mkdir", os.path.join(project, "checkpoints"), 0o2770])
    argv = case.victim_argv("checkpoint", project, SHARED_L4, (), ATTACKER_MARKER, STORE)
    first = run_process("attacker", ATTACKER_UID, argv, project, case.env(), case.groups())
    if first.rc != EXIT_CHECKPOINTED:
        raise SetupError("the attacker's run failed: " + first.error)
    case.expect(case.victim("checkpoint", cwd=project, settings=SHARED_L4), EXIT_REFUSED, EXIT_CHECKPOINTED)
    case.expect(case.victim("restart", cwd=project, settings=SHARED_L4), EXIT_REFUSED, EXIT_NOTHING,
                EXIT_RESTORED_OWN)


def case_two_jobs_one_name_concurrent(case):
    """Two jobs of one user, one store name, one L4 directory, two L2s: the
    second must be refused while the first is open."""
    l2_a = os.path.join(case.victim_home, "l2-a")
    l2_b = os.path.join(case.victim_home, "l2-b")
    first = case.start_victim("checkpoint", case.victim_home, dict(L4_EVERY_VERSION, **{"local.path": l2_a}),
                              args=["--hold", "3"])
    if not wait_for_line(first.stderr, "holding"):
        raise SetupError("the first job did not start: " + first.stderr.read())
    second = case.victim("checkpoint", settings=dict(L4_EVERY_VERSION, **{"local.path": l2_b}), marker=2222)
    first_run = finish(first, Run("victim", ["security_victim", "checkpoint"]), PROCESS_TIMEOUT)
    case.check_run(first_run)
    case.expect(second, EXIT_REFUSED, mentions="is locked")
    after = case.victim("restart", settings=dict(L4_EVERY_VERSION, **{"local.path": l2_a}))
    case.describe(after, "first job restarts")
    if after.rc != EXIT_RESTORED_OWN:
        case.fail("the first job did not restore its own data: " + excerpt(after.error))


def wait_for_line(stream, wanted):
    """Reads `stream` up to the line `wanted` (log lines may come first)."""
    for line in stream:
        if line.strip() == wanted:
            return True
    return False


def case_two_workdirs_sequential(case):
    """The same program run in two working directories: the second run must
    not restart from the first's L2 (nor its L4)."""
    first_dir = case.mkdir("victim/run-a", 0o700, case.victim_uid)
    second_dir = case.mkdir("victim/run-b", 0o700, case.victim_uid)
    case.expect(case.victim("checkpoint", cwd=first_dir), EXIT_CHECKPOINTED)
    case.expect(case.victim("restart", cwd=second_dir, marker=2222), EXIT_NOTHING)


# --------------------------------------------------- 8. planted 2^31 - 1


def case_planted_int_max(case):
    project = case.project(0o2770)
    store_dir = shared_store_dir(case, project)
    case.expect(case.victim("checkpoint", cwd=project, settings=SHARED_L4), EXIT_CHECKPOINTED)
    planted = case.attacker_version(INT_MAX)
    case.attacker(["copy", planted, os.path.join(store_dir, version_file(INT_MAX))])
    run = case.victim("restart", cwd=project, settings=SHARED_L4, args=["--then-checkpoint", "2"])
    case.expect(run, EXIT_RESTORED_OWN, EXIT_REFUSED)
    then = run.report.get("then")
    if then == "refused":
        case.outcome.did += "; later checkpoints refused: " + excerpt(run.report.get("then_error", ""), 70)
        if "2147483647" not in run.report.get("then_error", ""):
            case.fail("later checkpoints failed without naming the planted version")
    elif then == "checkpointed":
        case.outcome.did += "; later checkpoints work"


# ------------------------------------------------------------ 9. deep TOML


def case_deep_toml(case):
    config = os.path.join(case.victim_home, "deep.toml")
    Sandbox.write(config, "[" + ".".join(["a"] * 50000) + "]\nx = 1\n", case.victim_uid)
    case.expect(case.victim("checkpoint", args=["--config", config]), EXIT_REFUSED)


# ------------------------------------------------- 10. hostile containers


def hostile_case(case, make_file):
    """The victim restarts, accepting foreign versions, from its own L2 into
    which a hostile file was copied (as a user copies someone's run), under
    RLIMIT_AS = its own baseline + the file + 4 MiB + slack."""
    local = os.path.join(case.victim_home, "l2")
    settings = {"local.path": local, "persistent.every": "0", "restart.accept_foreign": "true"}
    case.expect(case.victim("checkpoint", settings=settings, args=["--versions", "2"]), EXIT_CHECKPOINTED)
    baseline = case.victim("restart", settings=settings)
    peak = baseline.report.get("vm_peak_kib", -1)
    if baseline.rc != EXIT_RESTORED_OWN or peak <= 0:
        raise SetupError("baseline restart failed: " + baseline.error)
    hostile = os.path.join(local, STORE, version_file(PLANTED_VERSION))
    make_file(case, hostile)
    give(hostile, 0o600, case.victim_uid, -1)
    size = os.path.getsize(hostile)
    limit = peak * 1024 + size + 4 * MiB + ADDRESS_SPACE_SLACK
    run = case.victim("restart", settings=settings, address_space=limit)
    case.outcome.did = ""  # the line tells the hostile restart only; the runs before it were checked
    case.expect(run, EXIT_RESTORED_OWN, EXIT_REFUSED)
    case.outcome.did += " (file of %s; RLIMIT_AS %.1f MiB = baseline %.1f + file + 4 + %.0f)" % (
        size_text(size), limit / MiB, peak / 1024, ADDRESS_SPACE_SLACK / MiB)


def size_text(size):
    return "%d B" % size if size < 10 * 1024 else "%.0f KiB" % (size / 1024)


def truncated_file(case, path):
    """A well-formed version of the attacker's, truncated to half."""
    made = case.attacker_version() if case.sandbox.as_root else own_version(case)
    with open(made, "rb") as handle:
        data = handle.read()
    with open(path, "wb") as handle:
        handle.write(data[:len(data) // 2])


def own_version(case):
    """Without a second user: a version of another run of the same user."""
    other = os.path.join(case.root, "other-run")
    os.makedirs(other, exist_ok=True)
    argv = [case.sandbox.victim, "checkpoint", "--dir", other, "--marker", str(ATTACKER_MARKER), "--first",
            str(PLANTED_VERSION), "--versions", "1", "--set", "local.path=" + other, "--set", "persistent.every=0"]
    run = run_process("other", os.geteuid(), argv, other, case.env(), ())
    if run.rc != EXIT_CHECKPOINTED:
        raise SetupError("the other run failed: " + run.error)
    return os.path.join(other, STORE, version_file(PLANTED_VERSION))


def forged_file(kind):
    def make(case, path):
        forge_dir = os.path.join(case.root, "forge")
        os.makedirs(forge_dir, exist_ok=True)
        out = os.path.join(forge_dir, kind)
        argv = [case.sandbox.victim, "forge", "--kind", kind, "--out", out, "--first", str(PLANTED_VERSION)]
        run = run_process("forge", os.geteuid(), argv, forge_dir, case.env(), ())
        if run.rc != 0:
            raise SetupError("forge failed: " + run.error)
        shutil.copy(out, path)
    return make


# ------------------------------------------------------------------- cases

# (name, attack, needs a second user, function)
CASES = [
    ("l2-root-precreated-0777", "attacker makes $TMPDIR/resurgo-60001 (0777) before the victim's first run",
     True, case_l2_root_world_writable),
    ("l2-root-precreated-0755", "the same, mode 0755 (the attacker's own, not writable by others)",
     True, case_l2_root_attackers_private),
    ("l2-leaf-precreated-planted", "attacker makes the whole default L2 path (root, <dir>-<hash> leaf, store) "
     "with its version v100 in it", True, case_l2_leaf_with_planted_version),
    ("l2-root-link-attacker-dir", "$TMPDIR/resurgo-60001 is the attacker's link to its 0777 directory",
     True, case_l2_root_link_to_attacker_dir),
    ("l2-root-link-victim-dir", "$TMPDIR/resurgo-60001 is the attacker's link to a directory of the victim",
     True, case_l2_root_link_to_victim_dir),
    ("l2-root-fifo", "$TMPDIR/resurgo-60001 is the attacker's FIFO", True, case_l2_root_fifo),
    ("l2-root-precreated-root-job", "root-run job: attacker makes $TMPDIR/resurgo-0 (0777) with links to a "
     "root-only directory", True, case_l2_root_root_victim),
    ("l4-0777-project-planted", "0777 project directory: attacker makes ./checkpoints/victim with v100 first",
     True, case_l4_world_writable_project_planted),
    ("l4-0777-project-victim-first", "0777 project directory, the victim first", True,
     case_l4_world_writable_project_victim_first),
    ("l4-2770-project-default", "2770 group project directory, shared_group not set", True,
     case_l4_group_project_not_allowed),
    ("l4-2770-checkpoints-link", "2770 project, shared_group: ./checkpoints is a group member's link to a "
     "directory of the victim", True, case_l4_group_project_checkpoints_link),
    ("l4-2770-planted-version", "2770 project, shared_group: attacker plants its v100 and the same file as "
     "v200 in the store directory it made", True, case_l4_group_project_planted_version),
    ("l4-2770-victims-store-dir", "2770 project, shared_group: the victim made the store directory; the "
     "attacker tries to plant v100", True, case_l4_group_project_store_dir_made_by_victim),
    ("l4-2770-replaced-identity", "2770 project, shared_group: attacker replaces .store-id with an identity "
     "of its choice and plants a v100 carrying it", True, case_l4_group_project_replaced_identity),
    ("l4-2770-forged-identity-new-node", "the same, the victim restarting on a new node (no L2, so nothing "
     "holds its own identity)", True, case_l4_group_project_forged_identity_new_node),
    ("links-lock-store-id-temporaries", "links planted before the first run: .lock.r000000 and the old "
     "temporary names (900) to the victim's file, .store-id to a new name beside it", True,
     case_links_lock_store_id_temporaries),
    ("links-store-id", "links: .store-id to the victim's file, old temporary names to a root-only file",
     True, case_links_store_id),
    ("links-temporaries-only", "links under the 900 old temporary names, 50 attacker-owned 0666 temporaries",
     True, case_links_temporaries_only),
    ("links-root-job", "root-run job: .lock.r000000 links to a new name in a root-only directory, .store-id "
     "and the temporaries to a root-only file", True, case_links_root_victim),
    ("links-root-job-temporaries", "root-run job: links under the old temporary names to a root-only file, "
     "attacker-owned 0666 temporaries", True, case_links_root_victim_temporaries_only),
    ("lock-held-by-attacker", "attacker creates .lock.r000000 (0666) in the shared store directory and holds "
     "its flock", True, case_lock_held_by_attacker),
    ("pin-token-held", "eager pin: attacker makes the victim's token directory resurgo-60001 (0777) in the "
     "sticky token directory, creates pin.lock (0666) there and the old resurgo-pin-60001.lock, and holds both",
     True, case_pin_token_held),
    ("pin-token-held-own-job", "eager pin: another job of the victim's own holds its token", False,
     case_pin_token_held_by_own_job),
    ("pin-token-link", "eager pin: the token directory is the attacker's link to a directory of the victim, the "
     "old token name a link to the victim's file", True, case_pin_token_link),
    ("pin-token-link-root-job", "root-run job, eager pin: resurgo-0 links to a root-only directory, "
     "resurgo-pin-0.lock to a new name in it", True, case_pin_token_link_root_victim),
    ("trace-link", "trace.path in the sticky TMPDIR, where the attacker's link of that name points to a new "
     "name in the victim's directory", True, case_trace_link),
    ("trace-link-root-job", "root-run job: the same link to a new name in a root-only directory", True,
     case_trace_link_root_victim),
    ("fifo-version", "attacker's FIFO named v0000000100.r000000.rsg in the shared store directory", True,
     case_fifo_named_like_a_version),
    ("fifo-store-id", "attacker replaces .store-id with a FIFO", True, case_fifo_named_store_id),
    ("fifo-lock", "attacker's FIFO named .lock.r000000", True, case_fifo_named_lock),
    ("shared-workdir-two-users", "two users, one 2770 project directory, one program and store name; the "
     "attacker runs first", True, case_shared_workdir_two_users),
    ("two-jobs-one-name", "one user, two concurrent jobs, same name and L4 directory, different L2", False,
     case_two_jobs_one_name_concurrent),
    ("two-workdirs-sequential", "one user, the same program in two working directories, one after the other",
     False, case_two_workdirs_sequential),
    ("planted-int-max", "attacker plants version 2^31-1 in the shared store directory; the victim restarts "
     "and checkpoints on", True, case_planted_int_max),
    ("deep-toml", "a configuration file with a 50,000-level dotted table header", False, case_deep_toml),
    ("hostile-truncated", "restart (accept_foreign) with a version truncated to half copied in", False,
     lambda case: hostile_case(case, truncated_file)),
    ("hostile-chunk-raw-1gib", "restart (accept_foreign) with a version whose chunk record claims 1 GiB (zstd)",
     False, lambda case: hostile_case(case, forged_file("chunk-raw-1gib"))),
    ("hostile-frame-1gib", "restart (accept_foreign) with a 64 KiB chunk whose zstd frame announces 1 GiB",
     False, lambda case: hostile_case(case, forged_file("frame-1gib"))),
    ("hostile-region-1gib", "restart (accept_foreign) with a version of one 1 GiB region in one 1 GiB chunk",
     False, lambda case: hostile_case(case, forged_file("region-1gib"))),
]


def run_case(sandbox, name, attack, function):
    case = Case(sandbox, name, attack)
    try:
        function(case)
    except SetupError as error:
        case.fail("the attack could not be set up: " + str(error))
    finally:
        case.close()
    return case.outcome


def print_line(outcome):
    print("%-34s %-5s %s" % (outcome.name, outcome.verdict, outcome.did), flush=True)
    for problem in outcome.problems:
        print("%34s       ! %s" % ("", problem), flush=True)


def markdown_table(outcomes):
    lines = ["| case | attack | what the victim did | result |", "|---|---|---|---|"]
    for outcome in outcomes:
        did = outcome.did + ("; " + "; ".join(outcome.problems) if outcome.problems else "")
        lines.append("| `%s` | %s | %s | %s |" % (outcome.name, outcome.attack, did.replace("|", "\\|"),
                                                  outcome.verdict))
    return "\n".join(lines)


def campaign(arguments):
    as_root = os.geteuid() == 0 and shutil.which("setpriv") is not None
    sandbox = Sandbox(arguments.victim, as_root)
    outcomes, not_run = [], []
    began = time.monotonic()
    try:
        for name, attack, second_user, function in CASES:
            if arguments.only and name not in arguments.only:
                continue
            if second_user and not as_root:
                not_run.append(name)
                continue
            outcome = run_case(sandbox, name, attack, function)
            outcomes.append(outcome)
            print_line(outcome)
    finally:
        if not arguments.keep:
            sandbox.remove()
    seconds = time.monotonic() - began
    print()
    print(markdown_table(outcomes))
    print()
    if not_run:
        print("not run (%d): %s -- they need a second user: run the campaign as root (setpriv to uids %d and %d)"
              % (len(not_run), ", ".join(not_run), VICTIM_UID, ATTACKER_UID))
    counts = {v: sum(1 for o in outcomes if o.verdict == v) for v in ("PASS", "FAIL", "LIMIT")}
    print("%d cases in %.1f s: %d passed, %d failed, %d at a documented limit%s" %
          (len(outcomes), seconds, counts["PASS"], counts["FAIL"], counts["LIMIT"],
           "" if not arguments.keep else "; scratch tree kept in " + sandbox.root))
    return 1 if counts["FAIL"] else 0


# ------------------------------------------------ the attacker's own side


def attacker_operation(operation):
    kind, *arguments = operation
    if kind == "mkdir":
        path, mode = arguments
        os.mkdir(path)
        os.chmod(path, mode)
    elif kind == "makedirs":
        path, mode = arguments
        missing = []
        while not os.path.lexists(path):
            missing.append(path)
            path = os.path.dirname(path)
        for directory in reversed(missing):
            os.mkdir(directory)
            os.chmod(directory, mode)
    elif kind == "symlink":
        target, path = arguments
        os.symlink(target, path)
    elif kind == "copy":
        source, path = arguments
        with open(source, "rb") as handle:
            data = handle.read()
        with open(path, "xb") as handle:
            handle.write(data)
    elif kind == "write":
        path, text, mode = arguments
        with open(path, "x") as handle:
            handle.write(text)
        os.chmod(path, mode)
    elif kind == "mkfifo":
        os.mkfifo(arguments[0])
        os.chmod(arguments[0], 0o666)  # the victim can open it: it must not block
    elif kind == "remove":
        os.unlink(arguments[0])
    else:
        raise ValueError("unknown operation " + kind)


def attacker_main(operations):
    results = []
    for operation in operations:
        try:
            attacker_operation(operation)
            results.append("ok")
        except OSError as error:
            results.append("%s: %s" % (operation[0], error.strerror or error))
    print(json.dumps({"results": results}))
    return 0


def attacker_hold(path, mode):
    """Holds an flock on `path` (created with `mode`) until killed."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, mode)
    os.fchmod(fd, mode)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("held", flush=True)
    time.sleep(3600)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--victim", help="the security_victim binary")
    parser.add_argument("--only", nargs="*", help="run only these cases")
    parser.add_argument("--keep", action="store_true", help="keep the scratch tree")
    parser.add_argument("--attacker-ops", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--attacker-hold", nargs=2, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.attacker_ops:
        return attacker_main(json.loads(sys.stdin.read()))
    if arguments.attacker_hold is not None:
        return attacker_hold(arguments.attacker_hold[0], int(arguments.attacker_hold[1], 8))
    if not arguments.victim:
        parser.error("--victim is required")
    return campaign(arguments)


if __name__ == "__main__":
    sys.exit(main())
