"""The LMTP row of the mail benchmark (Benchmarks/README.md, "LMTP delivery"; DESIGN §14, "Speed"), run by
Benchmarks/run-mail-bench: `inbox lmtp` beside Dovecot's LMTP server and beside the C floor of its own guarantees, all
fed the same distinct messages by one load driver (lmtp-load.c, compiled here by cc) at 1 and 8 sessions, in one run.

Servers (BENCH_LMTP_SERVERS, comma-separated; inbox,dovecot,floor by default), each fresh for every run, all run as
the account BENCH_LMTP_USER (default nobody; `inbox lmtp` never runs as root) and listening on a unix socket in a
folder of their own under the work folder:
  inbox    `inbox lmtp --container C --listen unix:PATH` (the release build, C made by `inbox init` as that account):
           every attachment into C's Inbox, durable before the 250
  dovecot  Debian's dovecot-lmtpd: `dovecot -F -c CONF`, as root (its master; the deliveries run as that account), from
           a dovecot.conf of its own (base_dir and state_dir in its folder, protocols = lmtp, a static passdb and
           userdb, mail_location = maildir:..., its lmtp unix_listener in its folder, mail_fsync = optimized, its
           default); the machine's /etc/dovecot and services are never read or touched
  floor    lmtp-floor.c (compiled here by cc, with nettle): the files, renames and syncs inbox lmtp makes for a
           message and for a batch, its group commit, and as little else as such a server can do (its comment says
           what it leaves out); every attachment into a folder of its own, durable before the 250

The messages (BENCH_LMTP_MESSAGES, default 1000; BENCH_MAIL_SEED): each a text body (with lines starting with '.', so
the dot-stuffing is exercised) and one base64 attachment of its own random bytes (BENCH_LMTP_ATTACHMENT_BYTES, default
20000), so no message is a duplicate of another. lmtp-load reads them all before its clock starts and sends them over
N sessions (BENCH_LMTP_SESSIONS, default 1,8), one command and its reply at a time (no PIPELINING), each session
taking the next message until none is left.

Rounds (BENCH_LMTP_ROUNDS, default 3): in each, every session count, and for it every server, in an order that
alternates from one round to the next. A run: the server started, its socket answered once (a greeting and QUIT),
os.sync(), then the driver's clock from before the first connect to the last QUIT answered. Each run's folder stays
until the work folder is removed at the end: a thousand files removed before the next run would slow that run's file
creations on a filesystem without a journal (ext4 then passes over each inode freed in the last minute or more:
find_inode_bit, recently_deleted; a quarter of inbox lmtp's CPU in perf), a cost of the benchmark, not of the
server. CPU: user + system ticks of the server's processes (with what they reaped: cutime, cstime) from /proc, after
the driver less before it. Peak RSS: VmHWM from /proc right before the server is stopped (Dovecot: summed over its
processes, the largest one beside it). Checked: inbox and floor, every attachment in the Inbox exactly once
with its SHA-256 (and no other file); Dovecot, every message in the Maildir, its attachment decoded by Python's email
with its SHA-256. A row is the median round by messages a second.

Syncs (BENCH_LMTP_SYNC_MESSAGES, default 200; 0 leaves it out): a separate short run of each server and session count
under `strace -f -c` (fsync, fdatasync, syncfs, sync, msync, sync_file_range counted), not timed: the syncs a
message of each.

Goal (printed, never failed on): inbox at least Dovecot's rate at 1 session and 1.5× it at 8, under 64 MiB. Beside
it, inbox ÷ floor: how much of what a server keeping inbox's guarantees can do on this machine inbox does.
"""

import base64
import collections
import email
import email.policy
import hashlib
import json
import os
import pwd
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MESSAGES = int(os.environ.get("BENCH_LMTP_MESSAGES", "1000"))
SESSIONS = [int(s) for s in os.environ.get("BENCH_LMTP_SESSIONS", "1,8").replace(" ", "").split(",")]
ROUNDS = int(os.environ.get("BENCH_LMTP_ROUNDS", "3"))
SYNC_MESSAGES = int(os.environ.get("BENCH_LMTP_SYNC_MESSAGES", "200"))
ATTACHMENT_BYTES = int(os.environ.get("BENCH_LMTP_ATTACHMENT_BYTES", "20000"))
SERVERS = os.environ.get("BENCH_LMTP_SERVERS", "inbox,dovecot,floor").replace(" ", "").split(",")
USER = os.environ.get("BENCH_LMTP_USER", "nobody")
SEED = int(os.environ.get("BENCH_MAIL_SEED", "20240610"))
GOALS = {1: 1.0, 8: 1.5}  # inbox's rate ÷ Dovecot's, at least, by session count
MEMORY_GOAL_MIB = 64
RECIPIENT = "bench@example.net"
SYNC_CALLS = ("fsync", "fdatasync", "syncfs", "sync", "msync")  # what makes data durable (msync: with MS_SYNC)
TRACED = SYNC_CALLS + ("sync_file_range",)  # sync_file_range only starts writeback: counted, not as a sync
TICK = os.sysconf("SC_CLK_TCK")


def log(message):
    print(message, file=sys.stderr, flush=True)


def wait_for(condition, seconds, what, process=None):
    """Polls condition() until it is true; raises naming `what` after `seconds`, or at once if `process` ended."""
    deadline = time.monotonic() + seconds
    while not condition():
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what}: the process exited with status {process.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {seconds} s")
        time.sleep(0.02)


# ---------------------------------------------------------------------------------------------- the messages


def make_messages(folder, count):
    """count messages, each with one attachment of its own; returns [(path, the attachment's SHA-256)]."""
    rng = random.Random(SEED + 14)
    os.makedirs(folder)
    out = []
    for n in range(count):
        data = rng.randbytes(ATTACHMENT_BYTES)
        name = f"scan-{n:05d}.pdf"
        text = (f"Hello,\n\nthe scan {n} is attached.\n.\n.. a line that starts with dots\n"
                f".{'x' * 70}\n\nRegards\n")
        message = (f"From: Anna Müller <a.{n % 997}@example.org>\nTo: Me <me@example.net>\n"
                   f"Subject: Scan {n}\nDate: Thu, 07 Mar 2024 10:{n % 60:02d}:00 +0100\n"
                   f"Message-ID: <lmtp.{n}.{rng.getrandbits(64):016x}@example.org>\nMIME-Version: 1.0\n"
                   f'Content-Type: multipart/mixed; boundary="=_b{n}"\n\n--=_b{n}\n'
                   f"Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 8bit\n\n{text}--=_b{n}\n"
                   f'Content-Type: application/pdf; name="{name}"\n'
                   f'Content-Disposition: attachment; filename="{name}"\nContent-Transfer-Encoding: base64\n\n'
                   f"{base64.encodebytes(data).decode('ascii')}--=_b{n}--\n")
        path = os.path.join(folder, f"{n:05d}.eml")
        with open(path, "wb") as f:
            f.write(message.encode("utf-8"))
        out.append((path, hashlib.sha256(data).hexdigest()))
    return out


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def digests(folder):
    """Counter of the SHA-256 of every file in folder."""
    return collections.Counter(sha256_file(e.path) for e in os.scandir(folder) if e.is_file())


# ---------------------------------------------------------------------------------------------- /proc


def tree(root):
    """root's pid and those of all its descendants."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += [child for child, parent in parents.items() if parent == pid]
    return found


def cpu_ticks(pids):
    """utime + stime + cutime + cstime, summed over pids (those that ended meanwhile are left out: their parent's
    cutime, cstime hold them once reaped)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15])
        except (OSError, IndexError, ValueError):
            pass
    return total


def host_ticks():
    """(busy, steal, all) jiffies of every CPU since boot, from /proc/stat's first line."""
    with open("/proc/stat") as stat:
        user, nice, system, idle, iowait, irq, softirq, steal = (int(v) for v in stat.readline().split()[1:9])
    return user + nice + system + irq + softirq, steal, user + nice + system + idle + iowait + irq + softirq + steal


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def hwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def pss_kib(pid):
    """Pss now (shared pages split among the processes that map them), from smaps_rollup."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def traced(pid):
    """Whether every thread of pid has a tracer."""
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/status") as f:
                if any(line.startswith("TracerPid:") and line.split()[1] == "0" for line in f):
                    return False
    except OSError:
        return True  # it ended: nothing to wait for
    return True


def answers(path):
    """Whether the LMTP server on the unix socket at path greets (220); says QUIT after."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(path)
            if not s.recv(512).startswith(b"220"):
                return False
            s.sendall(b"QUIT\r\n")
            s.recv(512)
            return True
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------- the servers


def as_account(account):
    """The argv prefix that runs a command as `account` (uid, gid, no other groups)."""
    return ["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups", "--"]


class Server:
    """One server's run in a folder of its own: start() until its socket answers, pids(), stop(), delivered()."""

    def __init__(self, place, account, children):
        self.place, self.account, self.children = place, account, children
        self.socket = os.path.join(place, "lmtp.sock")
        self.stderr = os.path.join(place, "server.log")
        self.process = None
        os.makedirs(place)
        os.chown(place, account.pw_uid, account.pw_gid)

    def launch(self, argv):
        with open(self.stderr, "ab") as err:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                            start_new_session=True)
        self.children.add(self.process)
        try:
            wait_for(lambda: os.path.exists(self.socket) and answers(self.socket), 30, f"{self.name}'s socket",
                     self.process)
        except RuntimeError as error:
            raise RuntimeError(f"{error}; its log: {' | '.join(self.log_tail())}") from None

    def pids(self):
        return tree(self.process.pid)

    def memory(self):
        """KiB: (peak RSS summed over the server's processes, the largest one's, Pss now summed)."""
        pids = self.pids()
        peaks = [hwm_kib(pid) for pid in pids]
        return sum(peaks), max(peaks, default=0), sum(pss_kib(pid) for pid in pids)

    def stop(self):
        """SIGTERM, then at most 15 s for it to end (its process group killed then); returns its exit status."""
        if self.process is None or self.process not in self.children:
            return self.process and self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        try:  # whatever it started and left behind
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.children.discard(self.process)
        return self.process.returncode

    def log_tail(self, lines=3):
        try:
            with open(self.stderr, errors="replace") as f:
                return f.read().splitlines()[-lines:]
        except OSError:
            return []


class InboxServer(Server):
    name = "inbox"

    def __init__(self, place, account, children, inbox):
        super().__init__(place, account, children)
        self.inbox = inbox
        self.container = os.path.join(place, "container")
        subprocess.run(as_account(account) + [inbox, "--container", self.container, "init"], check=True,
                       stdout=subprocess.DEVNULL)
        self.argv = as_account(account) + [inbox, "lmtp", "--container", self.container, "--listen",
                                           "unix:" + self.socket]

    def start(self):
        self.launch(self.argv)

    def delivered(self):
        """Counter of the SHA-256 of every file in the container's Inbox."""
        return digests(os.path.join(self.container, "Documents", "Inbox"))


class DovecotServer(Server):
    name = "dovecot"

    def __init__(self, place, account, children):
        super().__init__(place, account, children)
        self.maildir = os.path.join(place, "Maildir")
        self.conf = os.path.join(place, "dovecot.conf")
        for sub in ("run", "state"):
            os.mkdir(os.path.join(place, sub))
        with open(self.conf, "w") as out:
            out.write(f"""# The benchmark's own Dovecot: nothing from /etc/dovecot, nothing outside {place}.
base_dir = {place}/run
state_dir = {place}/state
instance_name = inbox-bench-{os.path.basename(place)}
log_path = {self.stderr}
protocols = lmtp
ssl = no
mail_location = maildir:{self.maildir}
# Debian's default, stated: the message file fsynced, not the Maildir's folders.
mail_fsync = optimized
postmaster_address = postmaster@example.net
passdb {{
  driver = static
  args = nopassword=y
}}
userdb {{
  driver = static
  args = uid={account.pw_uid} gid={account.pw_gid} home={place}
}}
service lmtp {{
  unix_listener {self.socket} {{
    mode = 0600
  }}
}}
""")

    def start(self):
        self.launch(["dovecot", "-F", "-c", self.conf])

    def delivered(self):
        """Counter of the SHA-256 of the attachment of every message in the Maildir (Python's email decodes it)."""
        found = collections.Counter()
        for sub in ("new", "cur"):
            folder = os.path.join(self.maildir, sub)
            if not os.path.isdir(folder):
                continue
            for entry in os.scandir(folder):
                with open(entry.path, "rb") as f:
                    message = email.message_from_binary_file(f, policy=email.policy.default)
                for part in message.iter_attachments():
                    found[hashlib.sha256(part.get_payload(decode=True)).hexdigest()] += 1
        return found


class FloorServer(Server):
    """lmtp-floor (lmtp-floor.c): the C floor of inbox lmtp's guarantees, delivering into a folder of its own."""
    name = "floor"

    def __init__(self, place, account, children, binary):
        super().__init__(place, account, children)
        self.binary = binary
        self.inbox = os.path.join(place, "Inbox")
        self.state = os.path.join(place, "state")
        for folder in (self.inbox, self.state):
            os.mkdir(folder)
            os.chown(folder, account.pw_uid, account.pw_gid)

    def start(self):
        self.launch(as_account(self.account) + [self.binary, self.socket, self.inbox, self.state])

    def delivered(self):
        """Counter of the SHA-256 of every file in its Inbox."""
        return digests(self.inbox)


# ---------------------------------------------------------------------------------------------- the runs


class Row:
    """What the LMTP row needs: the work folder, the tools, the children to kill on an interruption."""

    def __init__(self, workdir, inbox, children):
        self.workdir, self.inbox, self.children = os.path.join(workdir, "lmtp"), inbox, children
        self.account = pwd.getpwnam(USER)
        self.runs = 0
        os.makedirs(self.workdir)
        # The servers run as the account: it must reach its folder under the work folder.
        for folder in (workdir, self.workdir):
            os.chmod(folder, 0o711)
        self.driver = os.path.join(self.workdir, "lmtp-load")
        subprocess.run(["cc", "-O2", "-pthread", "-o", self.driver, os.path.join(HERE, "lmtp-load.c")], check=True)
        self.floor = os.path.join(self.workdir, "lmtp-floor")

    def build_floor(self):
        """Compiles lmtp-floor.c; the compiler's complaint when it cannot (None when it did)."""
        done = subprocess.run(["cc", "-O2", "-pthread", "-o", self.floor, os.path.join(HERE, "lmtp-floor.c"),
                               "-lnettle"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return None if done.returncode == 0 else (done.stdout.strip().splitlines() or ["cc failed"])[-1]

    def server(self, name):
        self.runs += 1
        place = os.path.join(self.workdir, f"{self.runs:02d}-{name}")
        if name == "inbox":
            return InboxServer(place, self.account, self.children, self.inbox)
        if name == "floor":
            return FloorServer(place, self.account, self.children, self.floor)
        return DovecotServer(place, self.account, self.children)

    def drive(self, server, sessions, messages):
        listing = os.path.join(self.workdir, f"list-{len(messages)}")
        if not os.path.exists(listing):
            with open(listing, "w") as out:
                out.writelines(path + "\n" for path, _ in messages)
        driver = subprocess.Popen([self.driver, "unix:" + server.socket, str(sessions), RECIPIENT, listing],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.children.add(driver)  # killed with the servers on an interruption
        output, errors = driver.communicate()
        self.children.discard(driver)
        if driver.returncode not in (0, 69):
            raise RuntimeError(f"lmtp-load exited with status {driver.returncode}: {errors.strip()}")
        return json.loads(output)

    def timed(self, name, sessions, messages):
        """One timed run of a fresh server: the driver's report, CPU, peak RSS and the check of what it delivered."""
        server = self.server(name)
        try:
            server.start()
            os.sync()  # what the benchmark wrote before should not land on this run's clock
            before, host_before, driver_before = cpu_ticks(server.pids()), host_ticks(), children_cpu()
            report = self.drive(server, sessions, messages)
            cpu = (cpu_ticks(server.pids()) - before) / TICK
            driver_cpu = children_cpu() - driver_before
            busy, steal, total = (after - was for after, was in zip(host_ticks(), host_before))
            rss_sum, rss_largest, pss = server.memory()
            processes = len(server.pids())
            status = server.stop()
            delivered = server.delivered()
        finally:
            server.stop()
        want = collections.Counter(digest for _, digest in messages)
        once = sum(1 for digest in want if delivered[digest] == 1)
        twice = sum(1 for digest in want if delivered[digest] > 1)
        extra = sum(count for digest, count in delivered.items() if digest not in want)
        result = {
            "server": name, "sessions": sessions, "messages": len(messages),
            "seconds": round(report["seconds"], 3), "accepted": report["accepted"],
            "messages_per_s": round(report["accepted"] / report["seconds"], 1) if report["seconds"] else None,
            "cpu_seconds": round(cpu, 2),
            "cpu_ms_per_message": round(cpu * 1000 / report["accepted"], 3) if report["accepted"] else None,
            "peak_rss_mib": round(rss_sum / 1024, 1), "largest_process_rss_mib": round(rss_largest / 1024, 1),
            "pss_at_end_mib": round(pss / 1024, 1), "driver_cpu_seconds": round(driver_cpu, 2),
            # The machine meanwhile: the hypervisor's steal, and the CPU that neither the server nor the driver used
            # (other users' work, and kernel threads such as writeback), each a share of all CPU time.
            "host_steal_pct": round(100 * steal / total, 1) if total else None,
            "others_cpu_pct": round(max(0.0, 100 * (busy / TICK - cpu - driver_cpu) / (total / TICK)), 1)
            if total else None,
            "processes": processes,
            "checked_once": once, "delivered_twice": twice, "extra_files": extra,
            "replies": report["replies"], "latency_ms": report["latency_ms"], "first_error": report["first_error"],
            "exit_status": status, "log_tail": server.log_tail() if report["accepted"] < len(messages) else [],
        }
        return result

    def syncs(self, name, sessions, messages):
        """A run under `strace -f -c`, not timed: the sync calls a message accepted."""
        server = self.server(name)
        counts = os.path.join(server.place, "strace.txt")
        try:
            server.start()
            pids = server.pids()
            argv = ["strace", "-f", "-c", "-o", counts, "-e", "trace=" + ",".join(TRACED)]
            for pid in pids:
                argv += ["-p", str(pid)]
            tracer = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True)
            self.children.add(tracer)
            wait_for(lambda: all(traced(pid) for pid in pids), 30, f"strace attached to {name}", tracer)
            report = self.drive(server, sessions, messages)
            tracer.send_signal(signal.SIGINT)  # detaches and writes the counts
            tracer.wait(30)
            self.children.discard(tracer)
        finally:
            server.stop()
        calls = {}
        with open(counts) as f:
            for line in f:
                fields = line.split()
                if len(fields) >= 5 and fields[-1] in TRACED and fields[3].isdigit():
                    calls[fields[-1]] = int(fields[3])
        accepted = report["accepted"]
        result = {"server": name, "sessions": sessions, "messages": len(messages), "accepted": accepted,
                  "calls": calls,
                  "syncs_per_message": round(sum(calls.get(c, 0) for c in SYNC_CALLS) / accepted, 2)
                  if accepted else None}
        return result


def inbox_has_lmtp(inbox):
    done = subprocess.run([inbox, "lmtp", "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return done.returncode == 0 and "--listen" in done.stdout


def run(workdir, inbox, children):
    """The whole row: returns its report (the JSON) with the lines to print under "notes"."""
    notes, servers = [], []
    for name in SERVERS:
        if name == "inbox":
            if inbox and inbox_has_lmtp(inbox):
                servers.append(name)
            else:
                notes.append(f"inbox: skipped, `inbox lmtp` is missing from {inbox or 'INBOX_BIN'} "
                             f"(this build has no LMTP server)")
        elif name == "dovecot":
            if shutil.which("dovecot") and os.path.exists("/usr/lib/dovecot/lmtp"):
                servers.append(name)
            else:
                notes.append("dovecot: skipped, Dovecot's LMTP server is missing: apt-get install dovecot-lmtpd "
                             "(make bench-mail-tools does)")
        elif name == "floor":
            servers.append(name)  # built below, once its folder is there
        else:
            raise SystemExit(f"run-mail-bench: unknown LMTP server {name!r} (known: inbox, dovecot, floor)")
    for line in notes:
        log("run-mail-bench: LMTP: " + line)
    report = {"messages": MESSAGES, "attachment_bytes": ATTACHMENT_BYTES, "sessions": SESSIONS, "rounds": ROUNDS,
              "account": USER, "servers": servers, "notes": notes, "runs": [], "rows": [], "syncs": [],
              "ratios": {}}
    if not servers:
        return report
    if SYNC_MESSAGES and not shutil.which("strace"):
        notes.append("syncs: not counted, strace is missing (apt-get install strace)")
    row = Row(workdir, inbox, children)
    if "floor" in servers:
        complaint = row.build_floor()
        if complaint:
            servers.remove("floor")
            notes.append(f"floor: skipped, cc cannot build lmtp-floor.c (it needs nettle-dev): {complaint}")
            log("run-mail-bench: LMTP: " + notes[-1])
    if not servers:
        return report
    started = time.monotonic()
    messages = make_messages(os.path.join(row.workdir, "messages"), MESSAGES)
    size = sum(os.path.getsize(path) for path, _ in messages)
    report["bytes"] = size
    log(f"run-mail-bench: LMTP: {len(messages)} messages ({size / 2**20:.1f} MiB, one {ATTACHMENT_BYTES}-byte "
        f"attachment each) made in {time.monotonic() - started:.1f} s; servers {', '.join(servers)}, sessions "
        f"{', '.join(map(str, SESSIONS))}, {ROUNDS} rounds")
    for number in range(ROUNDS):
        order = servers if number % 2 == 0 else list(reversed(servers))
        for sessions in SESSIONS:
            for name in order:
                result = row.timed(name, sessions, messages)
                result["round"] = number + 1
                report["runs"].append(result)
                log(f"run-mail-bench: LMTP round {number + 1}, {name}, {sessions} sessions: "
                    f"{result['messages_per_s']} msgs/s, {result['cpu_ms_per_message']} ms CPU a message, peak RSS "
                    f"{result['peak_rss_mib']} MiB, {result['checked_once']} of {len(messages)} checked"
                    + (f"; {result['first_error']}" if result["first_error"] else ""))
    if SYNC_MESSAGES and shutil.which("strace"):
        for sessions in SESSIONS:
            for name in servers:
                result = row.syncs(name, sessions, messages[:SYNC_MESSAGES])
                report["syncs"].append(result)
                log(f"run-mail-bench: LMTP syncs, {name}, {sessions} sessions: {result['syncs_per_message']} a "
                    f"message {json.dumps(result['calls'])}")
    report["rows"] = medians(report["runs"], servers)
    report["ratios"] = ratios(report["rows"])
    report["seconds"] = round(time.monotonic() - started, 1)
    return report


def medians(runs, servers):
    """For each session count and server, the median round by messages a second; the worst round's check and
    peak RSS beside it, and every round's rate."""
    rows = []
    for sessions in SESSIONS:
        for name in servers:
            mine = [r for r in runs if r["server"] == name and r["sessions"] == sessions]
            ranked = sorted(mine, key=lambda r: r["messages_per_s"] or 0)
            middle = dict(ranked[(len(ranked) - 1) // 2])
            middle["round_rates"] = [r["messages_per_s"] for r in mine]
            middle["worst_checked_once"] = min(r["checked_once"] for r in mine)
            middle["worst_extra"] = max(r["extra_files"] + r["delivered_twice"] for r in mine)
            middle["worst_peak_rss_mib"] = max(r["peak_rss_mib"] for r in mine)
            middle["median_rate"] = statistics.median(r["messages_per_s"] or 0 for r in mine)
            rows.append(middle)
    return rows


def ratios(rows):
    """By session count: inbox ÷ Dovecot (with the goal), and inbox ÷ the floor under "floor"."""
    by = {(r["server"], r["sessions"]): r for r in rows}
    out = {}
    for sessions in SESSIONS:
        inbox, dovecot, floor = (by.get((name, sessions)) for name in ("inbox", "dovecot", "floor"))
        if not inbox:
            continue
        entry = {}
        if dovecot:
            entry = quotients(inbox, dovecot)
            if sessions in GOALS and "messages_per_s" in entry:
                entry["goal"] = GOALS[sessions]
                entry["met"] = entry["messages_per_s"] >= GOALS[sessions]
        if floor:
            entry["floor"] = quotients(inbox, floor)
        if entry:
            out[str(sessions)] = entry
    return out


def quotients(row, other):
    """row ÷ other: messages a second (the medians), CPU a message, peak RSS (the worst rounds')."""
    entry = {}
    if row["median_rate"] and other["median_rate"]:
        entry["messages_per_s"] = round(row["median_rate"] / other["median_rate"], 2)
    if row["cpu_ms_per_message"] and other["cpu_ms_per_message"]:
        entry["cpu_per_message"] = round(row["cpu_ms_per_message"] / other["cpu_ms_per_message"], 2)
    if other["worst_peak_rss_mib"]:
        entry["peak_rss"] = round(row["worst_peak_rss_mib"] / other["worst_peak_rss_mib"], 2)
    return entry


def table(report):
    """The lines `make bench-mail` prints for the row."""
    if not report["rows"]:
        return "\n".join(["LMTP delivery: nothing measured"] + report["notes"])
    syncs = {(s["server"], s["sessions"]): s["syncs_per_message"] for s in report["syncs"]}
    lines = [f"LMTP delivery: {report['messages']} distinct messages ({report['bytes'] / 2**20:.1f} MiB, one "
             f"{report['attachment_bytes']:,}-byte attachment each), one driver, median of {report['rounds']} "
             f"alternating rounds"]
    header = (f"{'server':<8} {'sessions':>8} {'msgs/s':>7} {'rounds msgs/s':>21} {'cpu ms/msg':>10} "
              f"{'peak RSS MiB':>12} {'p50 ms':>7} {'p99 ms':>7} {'checked':>13} {'syncs/msg':>9} {'others':>6}")
    lines += [header, "-" * len(header)]
    for r in report["rows"]:
        rounds = ", ".join(f"{rate:,.0f}" for rate in r["round_rates"])
        checked = f"{r['worst_checked_once']} of {r['messages']}"
        sync = syncs.get((r["server"], r["sessions"]))
        lines.append(f"{r['server']:<8} {r['sessions']:>8} {r['median_rate']:>7,.0f} {rounds:>21} "
                     f"{r['cpu_ms_per_message'] or 0:>10.2f} {r['worst_peak_rss_mib']:>12.1f} "
                     f"{r['latency_ms']['p50']:>7.2f} {r['latency_ms']['p99']:>7.2f} {checked:>13} "
                     f"{'-' if sync is None else sync:>9} {r['others_cpu_pct']:>5.0f}%")
        if r["worst_extra"] or r["first_error"]:
            lines.append(f"  {r['server']}, {r['sessions']} sessions: {r['worst_extra']} delivered twice or "
                         f"unexpected; first error: {r['first_error']}; replies {json.dumps(r['replies'])}")
    for sessions, entry in report["ratios"].items():
        plural = "s" if sessions != "1" else ""
        if "messages_per_s" in entry:
            goal = (f" (goal ≥ {entry['goal']}×: {'met' if entry['met'] else 'missed'})" if "goal" in entry else "")
            lines.append(f"inbox ÷ dovecot, {sessions} session{plural}: messages/s {entry['messages_per_s']}×{goal}, "
                         f"CPU a message {entry.get('cpu_per_message')}×, peak RSS {entry.get('peak_rss')}×")
        if "messages_per_s" in entry.get("floor", {}):
            floor = entry["floor"]
            lines.append(f"inbox ÷ floor, {sessions} session{plural}: messages/s {floor['messages_per_s']}×, CPU a "
                         f"message {floor.get('cpu_per_message')}×")
    inbox_peaks = [r["worst_peak_rss_mib"] for r in report["rows"] if r["server"] == "inbox"]
    if inbox_peaks:
        peak = max(inbox_peaks)
        lines.append(f"inbox peak RSS {peak:.1f} MiB (goal < {MEMORY_GOAL_MIB} MiB: "
                     f"{'met' if peak < MEMORY_GOAL_MIB else 'missed'})")
    lines.append("checked: inbox and floor, each attachment in the Inbox exactly once with its SHA-256; Dovecot, "
                 "each message in its Maildir, its attachment's SHA-256 by Python's email. floor: lmtp-floor.c, the "
                 "files, renames and syncs of inbox lmtp and its group commit in C, with as little else as it can. Peak RSS: VmHWM, for "
                 "Dovecot summed over its processes (master, log, config, auth, one lmtp a session, ...). others: "
                 "the share of the machine's CPU neither the server nor the driver used in that round (other users, "
                 "kernel threads such as writeback): a busy machine's rows are noise.")
    if report["syncs"]:
        lines.append(f"syncs/msg: fsync, fdatasync and syncfs calls a message under strace -f -c (a run of its own, "
                     f"{SYNC_MESSAGES} messages, untimed). Before each 250, inbox syncs the attachment, its import "
                     "index (WAL and folder), the Inbox folder, the event log and its folder; Dovecot (mail_fsync = "
                     "optimized, its default) the message file, the Maildir's new/ and dovecot-uidlist; the floor the "
                     "attachment, its index file, the Inbox folder and its log.")
    lines += report["notes"]
    return "\n".join(lines)
