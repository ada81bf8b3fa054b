"""One measured run of one tool: wall time, CPU, peak RSS, exit status, SHA-256 of the output.

The tool is started with subprocess.Popen and reaped with os.wait4(pid, 0). Its rusage gives
ru_utime + ru_stime (CPU seconds) and ru_maxrss (KiB) -- but a process exec'd straight from a fork
of this Python keeps, in ru_maxrss, the high-water mark of the Python image it replaced (the kernel
carries it across execve), so every tool would show at least the harness's own 15-30 MiB. So the
Popen runs the tool through `rusage-exec` (benchlib/rusage_exec.c, compiled once with cc), a ~1 MiB
launcher that forks the tool, reaps it with wait4 and writes the tool's own rusage and wall time to
a file. Without a C compiler the harness falls back to os.wait4 on the tool and says so.

A pidfd enforces the timeout without racing the reaper. After the tool exits, the harness fsyncs
the output (timed separately as sync_s: Swoop fsyncs before it exits, the peers do not), hashes it
and deletes it. `run_once_files` does the same for a tool that downloads a set of files into a
directory (every file is checked; the directory, or a file system made for the run, is fresh for
each run and deleted after it).
"""

import json
import ctypes
import os
import select
import shutil
import signal
import subprocess
import time

from .util import BIN_DIR, LOG_DIR, log, sha256_file

_LAUNCHER_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rusage_exec.c")
_launcher = None


def launcher():
    """Path of the compiled rusage-exec launcher, or "" when it cannot be built."""
    global _launcher
    if _launcher is not None:
        return _launcher
    path = os.path.join(BIN_DIR, "rusage-exec")
    if os.access(path, os.X_OK) and os.path.getmtime(path) >= os.path.getmtime(_LAUNCHER_SRC):
        _launcher = path
        return path
    os.makedirs(BIN_DIR, exist_ok=True)
    for cc in ("cc", "gcc", "clang"):
        try:
            r = subprocess.run([cc, "-O2", "-Wall", "-o", path + ".tmp", _LAUNCHER_SRC], capture_output=True, text=True)
        except OSError:
            continue
        if r.returncode == 0:
            os.replace(path + ".tmp", path)
            _launcher = path
            return path
        log("compiling rusage-exec with %s failed: %s" % (cc, r.stderr.strip()[-300:]))
    log("WARNING: no C compiler; peak RSS will include the harness's own resident size (a floor of ~15-30 MiB)")
    _launcher = ""
    return ""

# Files a tool may leave beside its output.
_SIDECARS = ("", ".st", ".aria2", ".part", ".swoop", ".swoop.tmp", ".part.swoop")


def _remove_outputs(path):
    for suffix in _SIDECARS:
        try:
            os.unlink(path + suffix)
        except FileNotFoundError:
            pass
    directory, base = os.path.split(path)
    try:
        for name in os.listdir(directory):
            if name.startswith(base + ".") or name.startswith("." + base):
                try:
                    os.unlink(os.path.join(directory, name))
                except (IsADirectoryError, FileNotFoundError):
                    pass
    except FileNotFoundError:
        pass


def _tail(path, limit=1500):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode(errors="replace").strip()
    except OSError:
        return ""


def _stop(pidfd):
    """SIGTERM to the launcher (it passes it on, escalates to SIGKILL after 3 s and reaps the tool);
    SIGKILL if it has not exited 10 s later (the tool then gets SIGKILL from PR_SET_PDEATHSIG)."""
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGTERM if launcher() else signal.SIGKILL)
        ready, _, _ = select.select([pidfd], [], [], 10)
        if not ready:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:
        pass


_CLK_TCK = os.sysconf("SC_CLK_TCK")


def machine_busy_seconds():
    """CPU seconds the whole machine has spent busy since boot, all cores (/proc/stat's first line:
    user + nice + system + irq + softirq + steal; idle and iowait left out), or None."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    v = [int(x) for x in fields[1:9]] + [0] * max(0, 9 - len(fields))
    user, nice, system, _idle, _iowait, irq, softirq, steal = v[:8]
    return (user + nice + system + irq + softirq + steal) / _CLK_TCK


def _measure(cmd, timeout, log_stem, cleanup):
    """Runs `cmd` through the launcher and measures it; returns (record, out_log, err_log). Never
    raises for a tool failure; on Ctrl-C or SIGTERM it stops and reaps the tool, calls `cleanup`
    and re-raises."""
    out_log = os.path.join(LOG_DIR, log_stem + ".out")
    err_log = os.path.join(LOG_DIR, log_stem + ".err")
    record = {"ok": False, "error": None}
    report = os.path.join(LOG_DIR, log_stem + ".rusage")
    try:
        os.unlink(report)
    except FileNotFoundError:
        pass
    spawn = [launcher(), report] + list(cmd) if launcher() else list(cmd)
    with open(out_log, "wb") as out, open(err_log, "wb") as err:
        busy_start = machine_busy_seconds()
        start = time.perf_counter()
        proc = subprocess.Popen(spawn, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
        pidfd = os.pidfd_open(proc.pid)
        timed_out = False
        try:
            ready, _, _ = select.select([pidfd], [], [], timeout)
            if not ready:
                timed_out = True
                _stop(pidfd)
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            # Ctrl-C or SIGTERM while the tool runs: stop it (by pid) and reap it, then re-raise.
            _stop(pidfd)
            try:
                os.wait4(proc.pid, 0)
            except ChildProcessError:
                pass
            os.close(pidfd)
            cleanup()
            raise
        wall = time.perf_counter() - start
        busy_end = machine_busy_seconds()
        os.close(pidfd)
    proc.returncode = os.waitstatus_to_exitcode(status)
    record.update({
        "wall_s": round(wall, 4),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 4),
        "user_s": round(usage.ru_utime, 4),
        "sys_s": round(usage.ru_stime, 4),
        "maxrss_kib": usage.ru_maxrss,
        "exit": proc.returncode,
        "measured_by": "os.wait4 on the tool (RSS includes the harness's image)",
    })
    if busy_start is not None and busy_end is not None:
        # The whole machine's busy CPU over the run: the tool, its servers, the delay line, anything else.
        record["machine_cpu_s"] = round(busy_end - busy_start, 3)
    if launcher():
        try:
            with open(report) as f:
                code, wall_ns, user_us, sys_us, maxrss = f.read().split()
            os.unlink(report)
            record.update({
                "wall_s": round(int(wall_ns) / 1e9, 4),
                "wall_outer_s": round(wall, 4),
                "cpu_s": round((int(user_us) + int(sys_us)) / 1e6, 4),
                "user_s": round(int(user_us) / 1e6, 4),
                "sys_s": round(int(sys_us) / 1e6, 4),
                "maxrss_kib": int(maxrss),
                "exit": int(code),
                "measured_by": "rusage-exec (wait4 on the tool, launched from a 1 MiB image)",
            })
        except (OSError, ValueError):
            record["measured_by"] = "os.wait4 on the launcher (its report is missing)"
    if timed_out:
        record["error"] = "timed out after %.0f s (killed)" % timeout
    elif record["exit"] != 0:
        record["error"] = "exit status %d" % record["exit"]
    return record, out_log, err_log


# Keys kept from Swoop's --json summary: a single download's, then a list's (`swoop get -i`).
_SWOOP_KEYS = ("bytes", "seconds", "bytesPerSecond", "connections", "requests", "retries", "error", "errorKind",
               "ok", "files", "succeeded", "alreadyComplete", "failed", "bytesReceived", "sources", "comparedBytes",
               "receivedBytes", "settledConnections")


def _parse_swoop_json(record, out_log):
    with open(out_log, errors="replace") as f:
        lines = [line for line in f.read().splitlines() if line.strip().startswith("{")]
    if lines:
        try:
            summary = json.loads(lines[-1])
            record["swoop"] = {k: summary[k] for k in _SWOOP_KEYS if k in summary}
            if summary.get("failures"):
                record["swoop"]["failures"] = summary["failures"][:10]
                record["swoop"]["failures_total"] = len(summary["failures"])
        except ValueError:
            record["swoop"] = {"unparsed": lines[-1][:500]}


def _finish_logs(record, out_log, err_log):
    if not record["ok"]:
        record["stderr_tail"] = _tail(err_log)
        record["stdout_tail"] = _tail(out_log, 600)
        record["logs"] = [out_log, err_log]
    else:
        for path in (out_log, err_log):
            try:
                os.unlink(path)
            except OSError:
                pass


def _sync_and_check(path, expected_size, expected_sha, fsync=True):
    """fsyncs an output (timed: the write-back a tool left behind) and checks its size and SHA-256.
    Returns (seconds the fsync took, None or what is wrong)."""
    size = os.path.getsize(path)
    sync_start = time.perf_counter()
    if fsync:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    seconds = time.perf_counter() - sync_start if fsync else 0.0
    if size != expected_size:
        return seconds, "wrong size: %d bytes, expected %d" % (size, expected_size)
    digest = sha256_file(path)
    if digest != expected_sha:
        return seconds, "SHA-256 mismatch: %s, expected %s" % (digest, expected_sha)
    return seconds, None


def run_once(cmd, output, expected_size, expected_sha, timeout, log_stem, parse_swoop_json=False):
    """Runs `cmd` once; returns a dict describing the run (never raises for a tool failure)."""
    os.makedirs(os.path.dirname(output), exist_ok=True)
    _remove_outputs(output)
    record, out_log, err_log = _measure(cmd, timeout, log_stem, lambda: _remove_outputs(output))
    if parse_swoop_json:
        _parse_swoop_json(record, out_log)
    if record["error"] is None:
        if not os.path.isfile(output):
            record["error"] = "no output file"
        else:
            sync_s, problem = _sync_and_check(output, expected_size, expected_sha)
            record["sync_s"] = round(sync_s, 4)
            record["error"] = problem
            record["ok"] = problem is None
    _finish_logs(record, out_log, err_log)
    _remove_outputs(output)
    return record


def run_once_digest(cmd, digest_file, expected_sha, timeout, log_stem):
    """Runs `cmd`, a pipeline that ends in `sha256sum > digest_file` (a stream, no file), once; the run
    is good when the digest is the object's."""
    os.makedirs(os.path.dirname(digest_file), exist_ok=True)
    _remove_outputs(digest_file)
    record, out_log, err_log = _measure(cmd, timeout, log_stem, lambda: _remove_outputs(digest_file))
    if record["error"] is None:
        try:
            with open(digest_file) as f:
                got = f.read().split()[0]
        except (OSError, IndexError):
            got = ""
        record["sync_s"] = 0.0
        if got != expected_sha:
            record["error"] = "wrong digest on the pipe: %s" % (got or "none")
        else:
            record["ok"] = True
    _finish_logs(record, out_log, err_log)
    _remove_outputs(digest_file)
    return record


def _fresh_dir(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)


def _mount_fresh_fs(path, size):
    """Makes a new ext4 file system of `size` bytes in a sparse image next to `path` and mounts it at
    `path` (root only). Returns the image's path, or None (and says why) where that cannot be done.

    Why: ext4 will not hand out an inode freed recently without first reading it from the inode
    table (`recently_deleted` and `find_inode_bit` in `perf`; on this kernel "recently" lasts far
    longer than a benchmark), so once earlier runs had created and deleted thousands of files in
    a directory's block group, every later run's file creation paid for them, whichever tool it
    was: 2,000 files of 4 KiB took curl 0.24 s on a fresh file system and 0.4 to 2.9 s in the
    benchmark's output directory. The inode tables and the journal are written by mkfs
    (lazy_itable_init=0), so no background zeroing runs during the measurement."""
    image = path.rstrip("/") + ".ext4"
    try:
        os.makedirs(path)
        with open(image, "wb") as f:
            f.truncate(size)
        subprocess.run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", image],
                       check=True, capture_output=True, timeout=120)
        subprocess.run(["mount", "-o", "loop", image, path], check=True, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as error:
        detail = getattr(error, "stderr", b"") or b""
        log("cannot make a fresh file system for %s (%s%s); using a plain directory" % (
            path, error, ": " + detail.decode(errors="replace").strip() if detail else ""))
        if os.path.exists(image):
            os.remove(image)
        return None
    return image


def _unmount_fresh_fs(path, image):
    subprocess.run(["umount", path], check=False, capture_output=True, timeout=60)
    os.remove(image)
    shutil.rmtree(path, ignore_errors=True)


def _syncfs(path):
    """syncfs(2) on the file system holding `path` (what `sync -f PATH` does); returns the seconds it took."""
    libc = ctypes.CDLL(None, use_errno=True)
    start = time.perf_counter()
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if libc.syncfs(fd) != 0:
            raise OSError(ctypes.get_errno(), "syncfs failed")
    finally:
        os.close(fd)
    return time.perf_counter() - start


def run_once_files(cmd, out_dir, files, timeout, log_stem, parse_swoop_json=False, sync="each", fresh_fs=False,
                   checks_files=True):
    """Runs `cmd`, a tool that downloads a set of files into `out_dir`, once. `files` is a list of
    {"name", "size", "sha256"} (names relative to out_dir). `out_dir` is emptied before the run (a tool
    would otherwise skip what an earlier run finished) and deleted after it. Every file is made durable
    (sync_s is the time: `sync="each"` fsyncs file by file, `sync="filesystem"` makes one syncfs of the
    output's file system, as `tool && sync -f DIR` would), then checked by size and SHA-256; one missing
    or wrong file fails the run.
    Files the tool left that are not in the set (control files, temporaries) are listed in
    `extra_files` but do not fail the run.
    `fresh_fs`: `out_dir` is a new ext4 file system, made and mounted for this run (`_mount_fresh_fs`).
    `checks_files`: false for a tool that writes files of its own (the file system's limit): only
    their number is checked."""
    image = None
    if fresh_fs:
        shutil.rmtree(out_dir, ignore_errors=True)
        total = sum(f["size"] for f in files)
        image = _mount_fresh_fs(out_dir, max(256 << 20, 2 * total + 8 * 4096 * len(files)))
    if image is None:
        _fresh_dir(out_dir)
    try:
        record = _run_files(cmd, out_dir, files, timeout, log_stem, parse_swoop_json, sync, checks_files)
    finally:
        if image:
            _unmount_fresh_fs(out_dir, image)
        else:
            shutil.rmtree(out_dir, ignore_errors=True)
    record["fresh_fs"] = image is not None
    return record


def _run_files(cmd, out_dir, files, timeout, log_stem, parse_swoop_json, sync, checks_files=True):
    record, out_log, err_log = _measure(cmd, timeout, log_stem,
                                        lambda: shutil.rmtree(out_dir, ignore_errors=True))
    if parse_swoop_json:
        _parse_swoop_json(record, out_log)
        done_before = (record.get("swoop") or {}).get("alreadyComplete")
        if record["error"] is None and done_before:
            record["error"] = ("swoop reported %d file(s) already complete in a fresh directory: "
                               "not a full download" % done_before)
    if record["error"] is None and not checks_files:
        record["sync_s"] = round(_syncfs(out_dir) if sync == "filesystem" else 0.0, 4)
        written = sum(len(names) for root, _dirs, names in os.walk(out_dir) if "lost+found" not in root)
        if written == len(files):
            record["ok"] = True
        else:
            record["error"] = "wrote %d files, not %d" % (written, len(files))
    elif record["error"] is None:
        bad = []
        sync_s = _syncfs(out_dir) if sync == "filesystem" else 0.0
        for f in files:
            path = os.path.join(out_dir, f["name"])
            if not os.path.isfile(path):
                bad.append("%s missing" % f["name"])
                continue
            seconds, problem = _sync_and_check(path, f["size"], f["sha256"], fsync=sync == "each")
            sync_s += seconds
            if problem:
                bad.append("%s: %s" % (f["name"], problem))
        record["sync_s"] = round(sync_s, 4)
        expected = {f["name"] for f in files}
        extra = []
        for root, _dirs, names in os.walk(out_dir):
            for name in names:
                rel = os.path.relpath(os.path.join(root, name), out_dir)
                if rel not in expected:
                    extra.append(rel)
        if extra:
            record["extra_files"] = sorted(extra)[:20]
            record["extra_files_total"] = len(extra)
        if bad:
            record["bad_files"] = bad[:20]
            record["bad_files_total"] = len(bad)
            record["error"] = "%d of %d files missing or wrong: %s%s" % (
                len(bad), len(files), "; ".join(bad[:3]), "; ..." if len(bad) > 3 else "")
        else:
            record["ok"] = True
    _finish_logs(record, out_log, err_log)
    return record
