#!/usr/bin/env python3
"""The paper's sweep rehearsed on the distributed engine (issue 29): sweeps/paper.toml's
four benchmark variants, its four models (each a `credence simulate-server` at the speeds
measured for it on an H200), its four modes, run by several `credence worker` processes
on this machine against the local PostgreSQL and RabbitMQ, with the real verifier and
all-MiniLM-L6-v2 (BGE-large is not fetched here; PAPER.md's encoder is a setting).

Steps, each timed, results written to OUT as they come (log.txt; results.json at the end;
table.md):
1. a pilot: the same sweep on 1/PILOT, then on 2/PILOT of each dataset (other
   examples); the CPU seconds per scored example are the difference of the two runs'
   CPU (every process of the run: workers, launcher, model servers, PostgreSQL,
   RabbitMQ, this script) over the difference of their sizes, so what each run pays
   once (every worker loading the parser and encoder) cancels out; other load on the
   machine (a build beside it) is reported apart and counts in neither;
2. `credence sweep plan --estimate` of the rehearsal from the pilot (answer tokens and
   self-repair calls measured, CPU stated from the pilot's CPU seconds);
3. the rehearsal at 1/SCALE size (1 = the paper's 35,200 scored examples): `sweep launch
   --follow`, with every process's memory sampled; its wall time, jobs/s and rows/s;
4. the ideal it is compared with: generation alone (`sweep plan --estimate` with the run
   itself as pilot: the time its generations take at the fleet's concurrency) and CPU
   alone (the workers' CPU seconds over the cores); the overhead over the larger, and
   the CPU seconds of every process during the run (workers, launcher, model servers,
   PostgreSQL, RabbitMQ, this script);
5. checks: every (model, dataset, mode, example) stored once, no failed or dead-lettered
   job, every generation made once (each server's answered requests = cached
   generations, faults aside);
6. on the finished run: `credence report` (every table, the sweep's B = 10,000), every
   SQL query of dashboards/*.json and `sweep status`, each timed; PostgreSQL's size;
7. with --faults, the same sweep again in a fresh database (so every generation is made
   again), its processes reaching PostgreSQL through a proxy, with faults at points of
   its progress: at 15% a worker SIGKILLed (and a new one started), at 30% the broker
   restarted (`rabbitmqctl stop_app`, 5 s, `start_app`), at 45% PostgreSQL unreachable
   for --db-outage seconds while two workers are restarted (SIGTERM, new ones started
   during the outage), at 60% one model server down for --server-outage seconds; then
   the same checks (a generation may be made again only where a stopped worker held it
   unstored: at most one shard's requests per stopped worker and model), and its
   predictions, per-example metrics and aggregates must equal the unfaulted run's (a
   digest of each table's rows).

Usage: bench/rehearse-paper.sh [--scale N] [--workers W] [--faults] [--out DIR] [--keep]
(the wrapper builds the datasets and the binary first). Exit status 1 when a check fails.
"""

import argparse
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Examples per job: the most requests a worker has in flight to one model.
SHARD_SIZE = 25
# (the sweep's model name, simulate-server flags, the speed `sweep plan` is told).
# Gemini is an API, not a GPU: stated as 150 tokens/s per request, 64 at once at 4,800.
MODELS = [
    ("phi-3-mini-128k", ["--like", "phi3-mini"], "phi3-mini"),
    ("qwen3-8b", ["--like", "qwen3-8b"], "qwen3-8b"),
    ("gemma-3-12b-it", ["--like", "gemma3-12b"], "gemma3-12b"),
    ("gemini-2.5-flash",
     ["--decode-tps", "150", "--batch-tps", "4800", "--batch-limit", "64"], "150:4800:64"),
]
DATASETS = ["socialclaimsplit-100", "wikisplit-bench-100", "wikisplit-bench-1000",
            "claimdecomp-bench-1000"]
PG = os.environ.get("CREDENCE_REHEARSAL_PG", "postgres://postgres@127.0.0.1:5432")
BROKER = os.environ.get("CREDENCE_REHEARSAL_BROKER", "amqp://guest:guest@127.0.0.1:5672/%2f")


def proc_cpu(pid, children=False):
    """CPU seconds of process `pid` (with `children`, also of its exited children it
    waited for), or 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / os.sysconf("SC_CLK_TCK")


def services_cpu():
    """CPU seconds so far of the services the rehearsal does not start: PostgreSQL (its
    postmaster, the backends it reaped and the live ones) and RabbitMQ (beam.smp and its
    children)."""
    out = {"postgres": 0.0, "rabbitmq": 0.0}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            comm = (d / "comm").read_text().strip()
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if comm == "postgres":
            # The postmaster counts its reaped backends; a live backend counts itself.
            out["postgres"] += proc_cpu(d.name, children=ppid == 1)
        elif comm.startswith("beam"):
            out["rabbitmq"] += proc_cpu(d.name, children=True)
    return out


def machine_busy():
    """Seconds the machine's CPUs have been busy (all processes), from /proc/stat."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(x) for x in fields]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class DbProxy:
    """A TCP proxy in front of PostgreSQL that can be taken down: down, it cuts every
    relayed connection and closes new ones at once, as an unreachable database."""

    def __init__(self, host, port):
        self.target = (host, port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(256)
        self.port = self.listener.getsockname()[1]
        self.is_up = True
        self.live = []
        self.lock = threading.Lock()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            client, _ = self.listener.accept()
            if not self.is_up:
                client.close()
                continue
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.live += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self.pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def pipe(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def down(self):
        self.is_up = False
        with self.lock:
            for s in self.live:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.live = []

    def up(self):
        self.is_up = True


class Rehearsal:
    def __init__(self, args):
        self.args = args
        self.bin = str(Path(args.credence).resolve())
        self.out = Path(args.out).resolve()
        self.out.mkdir(parents=True, exist_ok=True)
        self.work = self.out / "work"
        self.work.mkdir(exist_ok=True)
        self.log_file = open(self.out / "log.txt", "a")
        tag = f"{os.getpid()}"
        self.db = f"rehearse_{tag}"
        self.db_url = f"{PG}/{self.db}"
        self.namespace = f"rehearse{tag}"
        self.killed_counts = {}  # model -> the counters its killed server had
        self.proxy = None  # the DbProxy the processes reach PostgreSQL through, if any
        self.procs = {}  # name -> Popen
        self.peak_rss = {}  # name -> bytes
        self.cpu = {}  # name -> (utime + stime) seconds, last read
        self.sampling = True
        self.results = {"scale": args.scale, "workers": args.workers, "cores": os.cpu_count()}
        self.failed = []
        self.main_run = None
        self.stopped_workers = 0  # by the faults

    # -- bookkeeping -------------------------------------------------------------------
    def log(self, text):
        line = f"[{time.strftime('%H:%M:%S')}] {text}"
        print(line, file=sys.stderr, flush=True)
        print(line, file=self.log_file, flush=True)

    def check(self, ok, what):
        self.log(("ok: " if ok else "FAILED: ") + what)
        if not ok:
            self.failed.append(what)

    def env(self):
        e = dict(os.environ)
        url = self.db_url
        if self.proxy:
            url = url.replace("127.0.0.1:5432", f"127.0.0.1:{self.proxy.port}")
        e.update({
            "CREDENCE_DATABASE_URL": url,
            "CREDENCE_BROKER_URL": BROKER,
            "CREDENCE_QUEUE_NAMESPACE": self.namespace,
            "RUST_LOG": "warn",
        })
        e.pop("CREDENCE_DELIVERY_LIMIT", None)
        return e

    def credence(self, *args, check=True, timeout=None):
        started = time.monotonic()
        p = subprocess.run([self.bin, *args], env=self.env(), capture_output=True, text=True,
                           timeout=timeout)
        seconds = time.monotonic() - started
        if check and p.returncode != 0:
            raise RuntimeError(f"credence {' '.join(args)}: exit {p.returncode}\n{p.stderr}")
        return p, seconds

    def start(self, name, args):
        err = open(self.out / f"{name}.stderr", "a")
        p = subprocess.Popen([self.bin, *args], env=self.env(), stdout=subprocess.DEVNULL,
                             stderr=err)
        self.procs[name] = p
        return p

    def sample(self):
        """Every process's resident memory (peak) and CPU seconds, twice a second."""
        tick = os.sysconf("SC_CLK_TCK")
        while self.sampling:
            for name, p in list(self.procs.items()):
                try:
                    status = Path(f"/proc/{p.pid}/status").read_text()
                    stat = Path(f"/proc/{p.pid}/stat").read_text()
                except OSError:
                    continue
                m = re.search(r"VmHWM:\s+(\d+) kB", status)
                if m:
                    self.peak_rss[name] = max(self.peak_rss.get(name, 0), int(m.group(1)) * 1024)
                fields = stat.rsplit(")", 1)[1].split()
                self.cpu[name] = (int(fields[11]) + int(fields[12])) / tick
            time.sleep(0.5)

    def stop(self, name, sig=signal.SIGTERM):
        p = self.procs.get(name)
        if p and p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(timeout=90)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    # -- set-up ------------------------------------------------------------------------
    def psql(self, sql, db="postgres"):
        url = f"{PG}/{db}"
        p = subprocess.run(["psql", "-X", "-q", "-A", "-t", url, "-c", sql],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"psql {sql!r}: {p.stderr}")
        return p.stdout.strip()

    def datasets(self, fraction, tag, skip=0, times=1):
        """`times` x ceil(n / fraction) examples of each dataset after the first `skip` x
        ceil(n / fraction), in WORK/tag/."""
        folder = self.work / tag
        folder.mkdir(exist_ok=True)
        paths = {}
        for name in DATASETS:
            source = ROOT / "datasets" / f"{name}.jsonl"
            lines = source.read_text().splitlines(keepends=True)
            k = math.ceil(len(lines) / fraction)
            keep = lines[skip * k: (skip + times) * k]
            target = folder / f"{name}.jsonl"
            target.write_text("".join(keep))
            paths[name] = target
        return paths

    def sweep(self, name, paths):
        ports = self.ports
        text = [
            "# Written by bench/rehearse_paper.py: sweeps/paper.toml's settings, each model a",
            "# credence simulate-server, the encoder all-MiniLM-L6-v2.",
            f'[sweep]\nname = "{name}"\nmodes = ["base", "repair", "self_repair", "all"]',
            f"shard_size = {SHARD_SIZE}\n",
            '[encoder]\npreset = "all-MiniLM-L6-v2"\n',
            "[verifier]\ntau_dup = 0.92\nmin_epr = 1.0\nmax_iterations = 1\nmax_llm_calls = 1\n",
            "[bootstrap]\nresamples = 10000\nseed = 42\n",
        ]
        for model, _, _ in MODELS:
            text.append(
                f'[[models]]\nname = "{model}"\npreset = "openai"\n'
                f'base_url = "http://127.0.0.1:{ports[model]}/v1"\napi_model = "{model}"\n'
                "max_new_tokens = 4096\n")
        for ds in DATASETS:
            text.append(f'[[datasets]]\nid = "{ds}"\npath = "{paths[ds]}"\n')
        path = self.work / f"{name}.toml"
        path.write_text("\n".join(text))
        return path

    def servers(self):
        self.ports = {}
        for model, flags, _ in MODELS:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            self.ports[model] = port
            self.start(f"server-{model}", ["simulate-server", "--addr", f"127.0.0.1:{port}",
                                           *flags])
        for model in self.ports:
            self.wait_port(self.ports[model])

    def wait_port(self, port):
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"no server on port {port}")

    def server_stats(self):
        """Each server's counters, with those of a killed server's earlier life added."""
        import urllib.request
        stats = {}
        for model, port in self.ports.items():
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as r:
                stats[model] = json.load(r)
            for k, v in self.killed_counts.get(model, {}).items():
                if k not in ("peak_decoding", "decoding"):
                    stats[model][k] += v
        return stats

    # -- one run -----------------------------------------------------------------------
    def worker(self, name, i):
        """Starts worker i of run `name` (a replacement gets a new process name)."""
        n = sum(1 for k in self.procs if k.startswith(f"worker-{name}-{i}"))
        key = f"worker-{name}-{i}" + (f"-{n}" if n else "")
        self.start(key, ["worker", "--models", ",".join(m for m, _, _ in MODELS),
                         "--worker-id", f"{name}-{i}-{n}"])
        return key

    def run(self, name, sweep, faults=None, label=None):
        """Launches `sweep` with the workers and follows it to the end; the wall time and
        the CPU seconds of the workers this call started (their replacements included).
        `faults(name)` runs beside it; its CPU figures are kept under `label` (the run's
        name by default)."""
        earlier = set(self.procs)
        for i in range(self.args.workers):
            self.worker(name, i)
        launch = ["sweep", "launch", str(sweep), "--follow", "--reap-every", "2"]
        busy_before = machine_busy()
        services_before = services_cpu()
        own_before = sum(os.times()[:2])
        servers_before = {k: v for k, v in self.cpu.items() if k.startswith("server-")}
        started = time.monotonic()
        self.start(f"launch-{name}", launch)
        if faults:
            threading.Thread(target=faults, args=(name,), daemon=True).start()
        launcher = self.procs[f"launch-{name}"]
        launcher_cpu = 0.0
        while launcher.poll() is None:
            launcher_cpu = proc_cpu(launcher.pid) or launcher_cpu
            time.sleep(0.2)
        code = launcher.returncode
        wall = time.monotonic() - started
        busy_cpu = machine_busy() - busy_before
        busy = busy_cpu / (wall * os.cpu_count())
        if code != 0:
            raise RuntimeError(f"sweep launch --follow of {name}: exit {code}")
        services = services_cpu()
        time.sleep(1.0)  # one more sample of the workers' CPU seconds
        mine = [k for k in self.procs if k.startswith(f"worker-{name}-") and k not in earlier]
        cpu = sum(self.cpu.get(k, 0.0) for k in mine)
        # Where the machine's CPU went during the run.
        groups = {"workers": cpu, "launcher (sweep launch --follow)": launcher_cpu}
        groups["model servers"] = sum(v - servers_before.get(k, 0.0)
                                      for k, v in self.cpu.items() if k.startswith("server-"))
        for k, v in services.items():
            groups[k] = v - services_before[k]
        groups["this script (sampling, polling)"] = sum(os.times()[:2]) - own_before
        groups["the run (every process above)"] = sum(groups.values())
        # What else ran on the machine meanwhile (the kernel's own work, or a build beside
        # the rehearsal): reported, counted in no figure.
        groups["other load on the machine"] = max(busy_cpu - groups["the run (every process above)"],
                                                  0.0)
        self.results.setdefault("cpu_s", {})[label or name] = {
            k: round(v, 1) for k, v in groups.items()}
        for k in mine:
            self.stop(k)
        return wall, cpu, busy

    def progress(self, run):
        try:
            return int(self.psql(f"SELECT count(*) FROM predictions WHERE run_id = '{run}'",
                                 self.db))
        except RuntimeError:
            return 0

    def faults(self, run):
        """The faults of step 7, each at a share of the run's rows."""
        total = self.expected_rows
        a = self.args
        steps = [(0.15, "SIGKILL worker 0"), (0.30, "broker restart"),
                 (0.45, f"PostgreSQL unreachable {a.db_outage} s, 2 workers restarted"),
                 (0.60, f"{MODELS[1][0]}'s server down {a.server_outage} s")]
        done = []
        for share, what in steps:
            while self.progress(run) < share * total:
                if self.procs[f"launch-{run}"].poll() is not None:
                    self.log(f"fault not reached: {what}")
                    return
                time.sleep(0.5)
            self.log(f"fault at {self.progress(run)} of {total} rows: {what}")
            if share == 0.15:
                victim = [k for k in self.procs if k.startswith(f"worker-{run}-0")][-1]
                self.stop(victim, signal.SIGKILL)
                self.stopped_workers += 1
                self.worker(run, 0)
            elif share == 0.30:
                subprocess.run(["rabbitmqctl", "stop_app"], capture_output=True, check=True)
                time.sleep(5)
                subprocess.run(["rabbitmqctl", "start_app"], capture_output=True, check=True)
            elif share == 0.45:
                self.proxy.down()
                time.sleep(min(5, a.db_outage / 4))
                for i in range(1, min(3, a.workers)):
                    victim = [k for k in self.procs if k.startswith(f"worker-{run}-{i}")][-1]
                    self.stop(victim, signal.SIGTERM)
                    self.stopped_workers += 1
                    self.worker(run, i)
                time.sleep(max(0, a.db_outage - min(5, a.db_outage / 4)))
                self.proxy.up()
            else:
                model, flags, _ = MODELS[1]
                # Its counters die with it: keep what it answered so far. The requests it
                # was decoding then may still be answered (and stored) before the kill
                # lands, uncounted: the check below allows that many.
                self.killed_counts[model] = self.server_stats()[model]
                self.stop(f"server-{model}", signal.SIGKILL)
                time.sleep(a.server_outage)
                self.start(f"server-{model}", ["simulate-server", "--addr",
                                               f"127.0.0.1:{self.ports[model]}", *flags])
            self.log(f"fault over: {what}")
            done.append(what)
        self.results["faults"] = done

    def timeline(self, run):
        """Seconds from the plan's commit to the first job, of the jobs, and of the
        aggregation tail after the last job, from the store's timestamps."""
        row = self.psql(
            "SELECT extract(epoch FROM min(j.started_at) - r.created_at), "
            "extract(epoch FROM max(j.finished_at) - min(j.started_at)), "
            "extract(epoch FROM (SELECT max(completed_at) FROM configs c WHERE c.run_id = r.run_id)"
            " - max(j.finished_at)), "
            "sum(extract(epoch FROM j.finished_at - j.started_at)) "
            f"FROM jobs j JOIN runs r ON r.run_id = j.run_id WHERE j.run_id = '{run}' "
            "GROUP BY r.created_at, r.run_id", self.db)
        first, jobs, tail, busy = (float(x) for x in row.split("|"))
        return {"to_first_job_s": first, "jobs_s": jobs, "aggregation_tail_s": tail,
                "job_seconds": busy}

    def digest(self, run):
        """A digest of the run's result rows (no timings in them)."""
        out = {}
        for table, order in (("predictions", "job_key, example_id"),
                             ("example_metrics", "job_key, example_id"),
                             ("aggregates", "model, dataset, mode, metric")):
            out[table] = self.psql(
                f"SELECT md5(string_agg(t::text, E'\\n' ORDER BY {order})) FROM {table} t "
                f"WHERE run_id = '{run}'", self.db)
        return out

    def estimate(self, sweep, pilot, extra):
        servers = [a for m, _, speed in MODELS for a in ("--server", f"{m}={speed}")]
        p, _ = self.credence("sweep", "plan", str(sweep), "--estimate", "--json",
                             "--workers", str(self.args.workers), "--cores",
                             str(os.cpu_count()), "--pilot", pilot, "--database", self.db_url,
                             *servers, *extra)
        return json.loads(p.stdout)

    # -- the rehearsal -----------------------------------------------------------------
    def main(self):
        a = self.args
        self.psql(f'CREATE DATABASE "{self.db}"')
        sampler = threading.Thread(target=self.sample, daemon=True)
        sampler.start()
        try:
            self.servers()
            # 1. The pilot: two runs, of 1/PILOT and 2/PILOT of each dataset (different
            # examples, so neither finds the other's generations or embeddings cached).
            # The CPU per scored example is the difference of their CPU over the
            # difference of their sizes: what every run pays once (loading the parser
            # and encoder in each worker, planning) cancels out.
            # The store's schema (migrations, generated views) is made once, before the
            # pilots, so that the first pilot does not pay it alone (`sweep status` of no
            # run opens the store and exits 1).
            self.credence("sweep", "status", "schema", check=False)
            pilots = {}
            for run, skip, times in (("small-pilot", 0, 1), ("pilot", 1, 2)):
                pilot_sweep = self.sweep(run, self.datasets(a.pilot, run, skip, times))
                wall, cpu, _ = self.run(run, pilot_sweep)
                scored = int(self.psql(
                    f"SELECT count(*) FROM predictions WHERE run_id = '{run}'", self.db))
                machine = self.results["cpu_s"][run]["the run (every process above)"]
                pilots[run] = {"scored": scored, "wall_s": wall, "worker_cpu_s": cpu,
                               "machine_cpu_s": machine}
                self.log(f"{run}: {scored} scored in {wall:.1f} s, the run's CPU {machine:.1f} s")
            small, big = pilots["small-pilot"], pilots["pilot"]
            cpu_ms = 1000.0 * (big["machine_cpu_s"] - small["machine_cpu_s"]) / max(
                big["scored"] - small["scored"], 1)
            if cpu_ms <= 0.0:
                # Noise larger than the difference (a tiny pilot): the bigger pilot's CPU
                # per scored example, start-up included, bounds it from above.
                cpu_ms = 1000.0 * big["machine_cpu_s"] / max(big["scored"], 1)
                self.log("pilot: the two pilots' CPU did not differ; using the bigger one's")
            self.results["pilot"] = {**pilots, "cpu_ms_per_scored": cpu_ms}
            self.log(f"pilot: {cpu_ms:.2f} CPU ms (every process of the run) per scored example")
            # 2. The estimate before the launch.
            name = "paper" if a.scale == 1 else f"paper-1-{a.scale}"
            paths = self.datasets(a.scale, "main")
            sweep = self.sweep(name, paths)
            self.main_run = name
            self.expected_rows = len(MODELS) * 4 * sum(
                len(p.read_text().splitlines()) for p in paths.values())
            before = self.estimate(sweep, "pilot", ["--cpu-ms", f"{cpu_ms:.4f}"])
            self.results["estimate"] = before
            self.log(f"estimate: {before['wall_seconds']:.1f} s (bound by {before['bound_by']})")
            # 3. The rehearsal (its first examples are the pilot's, already generated).
            before_stats = self.server_stats()
            self.cached_before = {m: self.cached(m) for m in self.ports}
            wall, cpu, busy = self.run(name, sweep)
            self.results["machine_busy"] = busy
            after_stats = self.server_stats()
            self.results["wall_s"] = wall
            self.results["worker_cpu_s"] = cpu
            self.log(f"run: {wall:.1f} s, workers' CPU {cpu:.1f} s")
            # 4. The ideal.
            ideal = self.estimate(sweep, name, ["--cpu-ms", "1"])
            generation = ideal["generation_seconds"]
            cpu_alone = cpu / os.cpu_count()
            self.results["generation_alone_s"] = generation
            self.results["cpu_alone_s"] = cpu_alone
            self.results["overhead"] = wall / max(generation, cpu_alone) - 1.0
            # The same against every process's CPU (PostgreSQL, RabbitMQ, the servers
            # and the launcher share the cores with the workers here).
            machine_alone = (self.results["cpu_s"][name]["the run (every process above)"]
                             / os.cpu_count())
            self.results["machine_cpu_alone_s"] = machine_alone
            self.results["overhead_machine"] = wall / max(generation, machine_alone) - 1.0
            self.results["estimate_error"] = before["wall_seconds"] / wall - 1.0
            self.results["timeline"] = self.timeline(name)
            self.checks(name, before_stats, after_stats)
            self.finished(name)
            if a.faults:
                self.faulted(name, sweep)
        finally:
            self.sampling = False
            for n in list(self.procs):
                self.stop(n)
            self.results["peak_rss_mib"] = {
                n: round(v / 2**20, 1) for n, v in sorted(self.peak_rss.items())}
            (self.out / "results.json").write_text(json.dumps(self.results, indent=2))
            if not a.keep:
                try:
                    self.psql(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')
                except RuntimeError as e:
                    self.log(f"dropping {self.db}: {e}")
        self.table()
        return 1 if self.failed else 0

    def faulted(self, name, sweep):
        """Step 7: the same sweep in a fresh database, with faults."""
        clean = self.digest(name)
        self.results["digest"] = clean
        first_db = self.db
        self.db = f"{first_db}_faulted"
        self.db_url = f"{PG}/{self.db}"
        self.psql(f'CREATE DATABASE "{self.db}"')
        self.proxy = DbProxy("127.0.0.1", 5432)
        try:
            before = self.server_stats()
            self.cached_before = {m: 0 for m in self.ports}
            wall, _, _ = self.run(name, sweep, faults=self.faults, label=f"{name} (faulted)")
            after = self.server_stats()
            self.results["faulted_wall_s"] = wall
            self.log(f"faulted run: {wall:.1f} s")
            self.checks(name, before, after)
            faulted = self.digest(name)
            for table in clean:
                self.check(faulted[table] == clean[table],
                           f"{table}: the faulted run's rows equal the unfaulted run's")
            self.check(len(self.results.get("faults", [])) == 4, "all four faults happened")
        finally:
            self.proxy = None
            if not self.args.keep:
                try:
                    self.psql(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')
                except RuntimeError as e:
                    self.log(f"dropping {self.db}: {e}")
            self.db = first_db
            self.db_url = f"{PG}/{self.db}"

    def checks(self, run, before, after):
        q = lambda sql: self.psql(sql, self.db)
        examples = sum(len((self.work / "main" / f"{d}.jsonl").read_text().splitlines())
                       for d in DATASETS)
        expected = examples * len(MODELS) * 4
        self.expected_rows = expected
        rows = int(q(f"SELECT count(*) FROM predictions WHERE run_id = '{run}'"))
        distinct = int(q(
            "SELECT count(*) FROM (SELECT DISTINCT model, dataset, mode, example_id "
            f"FROM predictions WHERE run_id = '{run}') d"))
        self.results["rows"] = rows
        self.results["jobs"] = int(q(f"SELECT count(*) FROM jobs WHERE run_id = '{run}'"))
        self.check(rows == expected == distinct,
                   f"{rows} rows, {distinct} distinct, {expected} expected")
        failed = int(q(f"SELECT count(*) FROM jobs WHERE run_id = '{run}' AND state <> 'done'"))
        self.check(failed == 0, f"{failed} jobs not done")
        dlq, _ = self.credence("dlq", "list", "--run", run, "--json", check=False)
        letters = json.loads(dlq.stdout or "[]") if dlq.returncode == 0 else None
        # A finished job's copy (its acknowledgement lost to a broker restart after its
        # results were committed, once too often) is no failure; it is reported apart.
        dead = -1 if letters is None else sum(not d.get("job_done") for d in letters)
        copies = 0 if letters is None else len(letters) - dead
        self.check(dead == 0, f"{dead} dead letters of unfinished jobs"
                   + (f" ({copies} copies of finished jobs)" if copies else ""))
        # A worker that dies or is stopped while it holds completions it has not stored
        # (received as it was SIGKILLed; kept through the database outage when it was
        # SIGTERMed) loses them, and they are made again: at most its requests in flight
        # to that model (one shard).
        lost = self.stopped_workers * SHARD_SIZE if self.proxy else 0
        for model in self.ports:
            answered = after[model]["answered"] - before[model]["answered"]
            made = self.cached(model) - self.cached_before[model]
            # Answers of the killed server that went out after its counters were read.
            unseen = self.killed_counts.get(model, {}).get("decoding", 0) if self.proxy else 0
            self.check(made - unseen <= answered <= made + lost,
                       f"{model}: each generation made once ({answered} answered, "
                       f"{made} new cached generations"
                       + (f", at most {lost} more for the stopped workers" if lost else "")
                       + (f", at most {unseen} fewer counted by the killed server" if unseen else "")
                       + ")")
            if lost:
                self.results.setdefault("made_again", {})[model] = answered - made

    def cached(self, model):
        """Cached generations of `model`'s generator (the pilot's and the run's share it)."""
        return int(self.psql(
            "SELECT count(*) FROM generation_cache g WHERE EXISTS (SELECT 1 FROM jobs j WHERE "
            f"j.model = '{model}' AND substr(j.model_fingerprint, 1, "
            "length(g.model_fingerprint) + 1) = g.model_fingerprint || '+')", self.db))

    def finished(self, run):
        # credence report: every table.
        p, seconds = self.credence("report", run, "--database", self.db_url, "--format", "md")
        (self.out / "report.md").write_text(p.stdout)
        self.results["report_s"] = seconds
        _, seconds = self.credence("sweep", "status", run, "--json")
        self.results["status_s"] = seconds
        self.results["pg_bytes"] = int(self.psql("SELECT pg_database_size(current_database())",
                                                 self.db))
        self.results["dashboard_queries_ms"] = self.dashboard_queries(run)

    def dashboard_queries(self, run):
        models = ",".join(f"'{m}'" for m, _, _ in MODELS)
        datasets = ",".join(f"'{d}'" for d in DATASETS)
        timings = {}
        for board in sorted((ROOT / "dashboards").glob("*.json")):
            d = json.loads(board.read_text())
            queries = []
            stack = list(d.get("panels", []))
            while stack:
                panel = stack.pop()
                stack.extend(panel.get("panels", []))
                for t in panel.get("targets", []):
                    if t.get("rawSql"):
                        queries.append((panel.get("title", "?"), t["rawSql"]))
            for v in d.get("templating", {}).get("list", []):
                q = v.get("query")
                q = q.get("query") if isinstance(q, dict) else q
                ds = v.get("datasource") or {}
                if v.get("type") == "query" and "postgres" in json.dumps(ds).lower() and q:
                    queries.append((f"${v.get('name')}", q))
            for title, sql in queries:
                for var, value in (("run", f"{run}"), ("model", models), ("dataset", datasets)):
                    sql = sql.replace("${" + var + "}", value).replace("$" + var, value)
                p = subprocess.run(["psql", "-X", "-q", "-A", "-t", self.db_url, "-c",
                                    "\\timing on", "-c", sql], capture_output=True, text=True)
                m = re.findall(r"Time: ([\d.]+) ms", p.stdout)
                key = f"{board.stem}: {title}"
                if p.returncode != 0 or not m:
                    self.check(False, f"dashboard query {key}: {p.stderr.strip()[:300]}")
                    continue
                timings[key] = float(m[-1])
        return timings

    def table(self):
        r = self.results
        est = r.get("estimate", {})
        lines = [f"# The paper's sweep at 1/{r['scale']} size on the distributed engine", "",
                 f"{r['workers']} workers (each serving the 4 models' queues), "
                 f"{r['cores']} cores, 4 simulated model servers", "",
                 "| figure | value |", "|---|---|"]

        def row(k, v):
            lines.append(f"| {k} | {v} |")
        if "wall_s" in r:
            row("scored examples (rows)", r.get("rows"))
            row("jobs", r.get("jobs"))
            row("wall time", f"{r['wall_s']:.1f} s")
            row("generation alone (ideal at the fleet's concurrency)",
                f"{r['generation_alone_s']:.1f} s")
            row("CPU alone (workers' CPU seconds / cores)", f"{r['cpu_alone_s']:.1f} s")
            row("overhead over the larger", f"{100 * r['overhead']:.1f}%")
            row("the run's CPU alone (every process of the run: CPU seconds / cores)",
                f"{r['machine_cpu_alone_s']:.1f} s")
            row("overhead over the larger of generation and the run's CPU alone",
                f"{100 * r['overhead_machine']:.1f}%")
            row("machine CPU busy during the run (every process)",
                f"{100 * r['machine_busy']:.0f}%")
            split = r.get("cpu_s", {}).get(self.main_run, {})
            if split:
                row("CPU seconds during the run, by process",
                    ", ".join(f"{k} {v:.1f}" for k, v in split.items()))
            row("estimate before launch (from the pilot)",
                f"{est.get('wall_seconds', 0):.1f} s ({100 * r['estimate_error']:+.1f}% of the wall)")
            t = r.get("timeline", {})
            if t:
                row("plan committed to first job started", f"{t['to_first_job_s']:.1f} s")
                row("first job started to last job done", f"{t['jobs_s']:.1f} s")
                row("last job done to last aggregation", f"{t['aggregation_tail_s']:.1f} s")
            row("jobs/s", f"{r['jobs'] / r['wall_s']:.2f}")
            row("rows/s", f"{r['rows'] / r['wall_s']:.1f}")
        if "report_s" in r:
            row("credence report (every table, B = 10,000)", f"{r['report_s']:.1f} s")
            row("sweep status", f"{1000 * r['status_s']:.0f} ms")
            row("PostgreSQL size", f"{r['pg_bytes'] / 2**20:.1f} MiB")
            q = r["dashboard_queries_ms"]
            if q:
                worst = max(q, key=q.get)
                row(f"dashboard SQL queries ({len(q)})",
                    f"slowest {q[worst]:.1f} ms ({worst})")
        if "faulted_wall_s" in r:
            row("faulted run (" + "; ".join(r.get("faults", [])) + ")",
                f"{r['faulted_wall_s']:.1f} s, rows equal the unfaulted run's: "
                + ("no" if any("equal" in f for f in self.failed) else "yes"))
            again = r.get("made_again", {})
            row("generations made again after the faults (stopped workers' unstored ones)",
                ", ".join(f"{m} {n}" for m, n in again.items()))
        for n, v in r.get("peak_rss_mib", {}).items():
            row(f"peak memory {n}", f"{v} MiB")
        if self.failed:
            lines += ["", "Failed checks:"] + [f"- {f}" for f in self.failed]
        text = "\n".join(lines) + "\n"
        (self.out / "table.md").write_text(text)
        print(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--credence", required=True, help="the credence binary")
    ap.add_argument("--scale", type=int, default=1, help="run 1/SCALE of each dataset")
    ap.add_argument("--pilot", type=int, default=100, help="the pilot's 1/PILOT of each dataset")
    ap.add_argument("--workers", type=int, default=4, help="worker processes")
    ap.add_argument("--out", default="bench/.work/rehearsal", help="where results go")
    ap.add_argument("--keep", action="store_true", help="keep the PostgreSQL databases")
    ap.add_argument("--faults", action="store_true",
                    help="run the sweep again with faults and compare (step 7)")
    ap.add_argument("--db-outage", type=float, default=60.0,
                    help="seconds PostgreSQL is unreachable in the faulted run")
    ap.add_argument("--server-outage", type=float, default=300.0,
                    help="seconds one model server is down in the faulted run")
    sys.exit(Rehearsal(ap.parse_args()).main())


if __name__ == "__main__":
    main()
