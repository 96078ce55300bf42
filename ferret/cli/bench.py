"""``ferret bench``: retrieval quality on LoCoMo, and service performance."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from ferret.cli.options import settings_of

DEFAULT_OUT = Path("bench-results")


@click.group()
def bench() -> None:
    """Benchmarks that print tables and write JSON."""


@bench.command(name="http")
@click.option("--queries", default=50, show_default=True, help="Queries per round and client.")
@click.option("--rounds", default=6, show_default=True, help="Rounds, the two clients alternated.")
@click.option("--waiters", default=1000, show_default=True, help="Concurrent HTTP waits one server holds.")
def http_api(queries: int, rounds: int, waiters: int) -> None:
    """The HTTP API against the Python client on the same job (p50s), and one server holding WAITERS waits."""
    from ferret.bench.http_api import run

    click.echo(json.dumps(run(queries, rounds, waiters), indent=2))


@bench.command()
@click.option("--jobs", default=1000, show_default=True, help="Jobs per throughput round.")
@click.option("--latency-runs", default=300, show_default=True, help="Sequential jobs for latency.")
@click.option("--rounds", default=5, show_default=True, help="Alternating throughput rounds per worker count.")
@click.option("--signing", is_flag=True, help="Also run the fast path with signed jobs and results, alternated.")
@click.option("--out", "out_dir", default=DEFAULT_OUT, show_default=True, type=click.Path(path_type=Path),
              help="Directory the report (JSON and Markdown) is written to.")
def service(jobs: int, latency_runs: int, rounds: int, signing: bool, out_dir: Path) -> None:
    """Raw RQ vs Ferret with real workers; pipeline overhead; sub-query parallelism."""
    from ferret.bench.fast_path import fast_path, parallelism
    from ferret.bench.service import markdown, run_service_bench

    overhead = fast_path()
    parallel = parallelism()
    report = run_service_bench(jobs, latency_runs, rounds, log=lambda s: click.echo(s, err=True), signing=signing)
    report.update(pipeline_overhead=overhead, parallelism=parallel)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "service.json").write_text(json.dumps(report, indent=2))
    click.echo(markdown(report))
    for workers in (1, 2):
        row = report[f"{workers}_workers"]
        rounds_seen = ", ".join(str(r) for r in row["fast_throughput_ratio_rounds"])
        click.echo(f"{workers} worker(s): Ferret fast path / raw RQ throughput {row['fast_throughput_ratio']} "
                   f"(target >= 0.8; median of rounds {rounds_seen}), "
                   f"p50 latency {row['fast_p50_latency_ratio']} (target < 2)")
        if "signing_throughput_ratio" in row:
            signed_rounds = ", ".join(str(r) for r in row["signing_throughput_ratio_rounds"])
            click.echo(f"{workers} worker(s): signed / unsigned fast path throughput {row['signing_throughput_ratio']} "
                       f"(target >= 0.97; median of rounds {signed_rounds}), {row['signed_fast_jobs_per_s']} jobs/s")
    click.echo(f"pipeline overhead over one search: {overhead['overhead_ms']:.3f} ms "
               f"(search {overhead['search_median_ms']:.3f} ms, pipeline {overhead['pipeline_median_ms']:.3f} ms)")
    click.echo(f"compound query, backend at {parallel['backend_latency_ms']:.0f} ms a search: "
               f"{parallel['compound_ms']:.1f} ms for {parallel['searches_per_compound_job']} searches "
               f"(one search {parallel['one_search_ms']:.1f} ms; "
               f"in sequence ~{parallel['sequential_would_be_ms']:.0f} ms)")
    click.echo(f"wrote {out_dir / 'service.json'}")


@bench.command()
@click.option("--runs", default=30, show_default=True, help="Compound jobs, each with one hung sub-query.")
@click.option("--deadline", default=0.5, show_default=True, help="Each job's deadline, seconds.")
def lateness(runs: int, deadline: float) -> None:
    """How late past its deadline a job's result is written (one worker, a hung Nous sub-query)."""
    from ferret.bench.lateness import measure_lateness, summary

    report = measure_lateness(runs, deadline)
    click.echo(summary(report))
    click.echo(json.dumps(report))


@bench.command(name="round-trips")
@click.option("--jobs", default=100, show_default=True, help="n: runs of n and 2n jobs are compared.")
def round_trips(jobs: int) -> None:
    """Redis round trips per job: RQ's stock bookkeeping and Ferret's lean layer."""
    from ferret.bench.round_trips import measure

    figures = measure(jobs)
    click.echo(f"Redis round trips per job (SimpleWorker, rq {rq_version()}): stock {figures['stock']}, "
               f"lean {figures['lean']}; Redis CPU per job (enqueue and run): stock "
               f"{figures['stock_redis_cpu_us']} us, lean {figures['lean_redis_cpu_us']} us")
    click.echo(json.dumps(figures))


def _in_process_options(jobs: int, jobs_help: str, rounds_help: str) -> Any:
    """The options of a bench whose worker runs in the bench's own process: jobs, rounds, memories."""
    def decorate(command: Any) -> Any:
        for option in reversed((
                click.option("--jobs", default=jobs, show_default=True, type=click.IntRange(1, 1_000_000),
                             help=jobs_help),
                click.option("--rounds", default=3, show_default=True, type=click.IntRange(1, 100),
                             help=rounds_help),
                click.option("--memories", default=5000, show_default=True, type=click.IntRange(1, 5000),
                             help="Memories in the namespace (at most 5,000: built in the job's process)."))):
            command = option(command)
        return command
    return decorate


@bench.command(name="result-writes")
@_in_process_options(1500, "Jobs a round.", "Rounds of each way, alternated; medians printed.")
def result_writes(jobs: int, rounds: int, memories: int) -> None:
    """A worker's CPU writing batch results: held for the trip's end against each job's own write."""
    from ferret.bench.result_writes import run

    report = run(jobs, rounds, memories)
    for way in ("own", "held"):
        median = report["median"][way]
        click.echo(f"{way}: writing results {median['writes_ms']} ms a job, the worker {median['worker_ms']} ms "
                   "a job (medians)")
    click.echo(f"outcomes {report['outcomes']}")
    click.echo(json.dumps(report))


@bench.command(name="drain")
@_in_process_options(2000, "Jobs a round (and as many queries in-process).",
                     "Rounds, the pipeline's and the worker's alternated; medians printed.")
def drain(jobs: int, rounds: int, memories: int) -> None:
    """A worker's CPU a job draining a deep queue in this process, against the same pipeline in-process."""
    from ferret.bench.drain import run

    report = run(jobs, rounds, memories)
    for row in report["rounds_run"]:
        click.echo(f"pipeline {row['pipeline_ms']} ms a query, worker {row['worker_ms']} ms a job: "
                   f"{row['over_pipeline']}x, machinery {row['machinery_ms']} ms a job; the job core "
                   f"{row['job_core_ms']} ms a job, so RQ's layer {row['rq_layer_ms']} ms")
    median = report["median"]
    click.echo(f"median: {median['over_pipeline']}x the pipeline, machinery {median['machinery_ms']} ms a job, "
               f"of which RQ's layer {median['rq_layer_ms']} ms; outcomes {report['outcomes']}")
    click.echo(json.dumps(report))


def _setting_env(values: tuple[str, ...]) -> dict[str, str]:
    """``--setting section.key=value`` options as the FERRET_* variables the benchmark's workers get."""
    env = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or any(not part.isidentifier() for part in name.strip().split(".")):
            raise click.BadParameter(f"{item!r}: expected section.key=value, e.g. backend.local.fold_changes=1",
                                     param_hint="--setting")
        env["FERRET_" + "__".join(part.upper() for part in name.strip().split("."))] = value
    return env


SETTING_OPTION = click.option("--setting", "settings", multiple=True, metavar="KEY=VALUE",
                              help="A setting for the benchmark's workers (repeatable), e.g. "
                                   "backend.local.fold_changes=1.")


def _sizes(value: str) -> list[int]:
    try:
        sizes = [int(part.replace("_", "").replace("k", "000").replace("M", "000000")) for part in value.split(",")]
    except ValueError:
        raise click.BadParameter("a comma-separated list of sizes, e.g. 10k,100k") from None
    if any(size < 1 for size in sizes):
        raise click.BadParameter("sizes must be positive")
    return sizes


@bench.command()
@click.option("--sizes", default="10k,100k", show_default=True, help="Namespace sizes (memories), e.g. 10k,100k,1M.")
@click.option("--tenants", default="1000x500", show_default=True,
              help="TxM: T namespaces of M memories under the memory bound ('' to skip).")
@click.option("--bound-mb", default=512, show_default=True, help="backend.local.index_memory_mb for the tenants run.")
@click.option("--queries", default=200, show_default=True, help="Warm queries per run.")
@click.option("--writes", default=20, show_default=True, help="Write-then-query cycles per size.")
@click.option("--out", "out_dir", default=DEFAULT_OUT, show_default=True, type=click.Path(path_type=Path),
              help="Directory the report (JSON and Markdown) is written to.")
@SETTING_OPTION
def scale(sizes: str, tenants: str, bound_mb: int, queries: int, writes: int, out_dir: Path,
          settings: tuple[str, ...]) -> None:
    """The local backend at scale: ingest, first query, warm queries, write-then-query, RSS, tenants."""
    from ferret.bench.scale import run
    pair = None
    if tenants:
        try:
            count, each = (int(part) for part in tenants.lower().split("x"))
        except ValueError:
            raise click.BadParameter("TxM, e.g. 1000x500", param_hint="--tenants") from None
        pair = (count, each)
    run(_sizes(sizes), pair, bound_mb, queries, writes, out_dir / "scale.json", _setting_env(settings))


@bench.command()
@click.option("--tenants", default="1000x500", show_default=True, help="TxM: T namespaces of M memories on each store.")
@click.option("--cycles", default=25, show_default=True, help="Write-then-query cycles per side per round.")
@click.option("--rounds", default=8, show_default=True, help="Rounds, cluster and single Redis alternated.")
@click.option("--warm-tenants", default=100, show_default=True, help="Tenants the cycles pick from (warmed first).")
@click.option("--out", "out_dir", default=DEFAULT_OUT, show_default=True, type=click.Path(path_type=Path),
              help="Directory the report (JSON and Markdown) is written to.")
def cluster(tenants: str, cycles: int, rounds: int, warm_tenants: int, out_dir: Path) -> None:
    """The memory store on a real Redis Cluster against one Redis: spread, write-then-query, failover."""
    from ferret.bench.cluster_store import run
    try:
        count, each = (int(part) for part in tenants.lower().split("x"))
    except ValueError:
        raise click.BadParameter("TxM, e.g. 1000x500", param_hint="--tenants") from None
    run(count, each, cycles, rounds, warm_tenants, out_dir / "cluster.json",
        log=lambda line: click.echo(line, err=True))


@bench.command()
@click.option("--cap", default=None, type=int, help="limits.max_job_data_bytes (default: the configured cap).")
@click.pass_context
def bomb(ctx: click.Context, cap: int | None) -> None:
    """A 512 MiB zlib bomb in a job hash: time and peak RSS of a worker's intake, bounded and RQ's own."""
    from ferret.bench.bomb import run

    report = run(cap or settings_of(ctx).limits.job_data_cap())
    for kind in ("bounded", "rq"):
        row = report[kind]
        click.echo(f"{kind}: {row['verdict']} in {row['ms']} ms, peak RSS +{row['peak_growth_mb']} MB "
                   f"{row['message']}".rstrip())
    click.echo(json.dumps(report))


@bench.command()
@click.option("--jobs", default=200, show_default=True, help="Jobs against the hung endpoint.")
def breaker(jobs: int) -> None:
    """Job time with a hung chat endpoint: healthy, hung with the circuit breaker, hung without it."""
    from ferret.bench.breaker import run

    report = run(jobs)
    click.echo(f"healthy p50 {report['healthy_p50_ms']} ms; hung: {report['hung_timeouts']} timeouts then "
               f"{report['hung_skipped']} skipped, p50 once open {report['open_p50_ms']} ms "
               f"({report['open_over_healthy']}x healthy); breaker off: p50 {report['unguarded_p50_ms']} ms")
    click.echo(json.dumps(report))


@bench.command()
@click.option("--jobs", default=2_000, show_default=True, type=click.IntRange(10), help="Jobs per round and path.")
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(1), help="Alternated rounds.")
@click.option("--memories", default=10_000, show_default=True, type=click.IntRange(1),
              help="Memories in the namespace.")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 64), help="Simple workers.")
@click.option("--jobs-per-trip", type=click.IntRange(1, 256), default=None,
              help="The workers' service.jobs_per_trip (default: the setting's); 1 takes one job a trip.")
def overhead(jobs: int, rounds: int, memories: int, workers: int, jobs_per_trip: int | None) -> None:
    """CPU per job of the service (workers + producer + Redis) against the in-process pipeline's: a batch, one
    prefetch at a time, and an agent's turn (a memory written, then a prefetch about it)."""
    from ferret.bench.overhead import PATHS, run

    report = run(jobs, rounds, memories, workers, jobs_per_trip)
    cpu = report["cpu_ms_per_job"]
    click.echo(f"in-process pipeline: {cpu['in_process']['total']} ms of CPU a query")
    for kind in PATHS:
        row = cpu[kind]
        unit, client = ("a turn", "the agent's client") if kind == "agent_turn" else ("a job", "producer")
        click.echo(f"{kind}: {row['total']} ms {unit} (workers {row['workers']}, {client} {row['producer']}, "
                   f"redis {row['redis']}), {report[kind + '_over_in_process']}x the in-process pipeline; "
                   f"{report['redis_commands_per_job'][kind]} Redis commands {unit} (Lua's included); each round "
                   + ", ".join(f"{ratio}x" for ratio in report["each_round_over_in_process"][kind]))
    click.echo("outcomes: " + "; ".join(f"{kind} {json.dumps(counts)}" for kind, counts in report["outcomes"].items()))
    click.echo(json.dumps(report))


@bench.command()
@click.option("--jobs", default=300, show_default=True, type=click.IntRange(10), help="Jobs per round and worker.")
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(1), help="Rounds (the order rotates).")
@click.option("--memories", default=1_000, show_default=True, type=click.IntRange(1),
              help="Memories in the namespace.")
def horses(jobs: int, rounds: int, memories: int) -> None:
    """A forking worker's horse kept for many jobs against one a job, beside a simple worker: CPU a job, jobs/s."""
    from ferret.bench.horses import run

    report = run(jobs, rounds, memories)
    for name, row in report["workers"].items():
        click.echo(f"{name}: {row['cpu_ms']} ms of CPU a job (the worker and its horses), {row['jobs_per_s']} "
                   f"jobs/s, {report['cpu_over_simple'][name]}x the simple worker's CPU; outcomes "
                   f"{report['outcomes'][name]}")
    click.echo(json.dumps(report))


@bench.command(name="queue-peers")
@click.option("--jobs", default=1_000, show_default=True, type=click.IntRange(10), help="Jobs per round and system.")
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(1), help="Rounds (the order rotates).")
@click.option("--memories", default=10_000, show_default=True, type=click.IntRange(1),
              help="Memories in the namespace.")
def queue_peers(jobs: int, rounds: int, memories: int) -> None:
    """Ferret's worker against arq and raw RQ running the same retrieval: worker CPU per job, jobs/s."""
    from ferret.bench.queue_peers import run

    report = run(jobs, rounds, memories)
    for name, row in report["systems"].items():
        over = report.get("worker_cpu_over_arq", {}).get(name)
        click.echo(f"{name}: worker {row['worker_cpu_ms']} ms of CPU a job, redis {row['redis_cpu_ms']} ms, "
                   f"{row['jobs_per_s']} jobs/s" + (f"; worker CPU {over}x arq's" if over is not None else "")
                   + (f"; outcomes {row['outcomes']}" if "outcomes" in row else ""))
    if "worker_cpu_over_arq" not in report:
        click.echo(f"arq: {report['arq']}")
    click.echo(json.dumps(report))


@bench.command()
@click.option("--jobs", default=60_000, show_default=True, type=click.IntRange(1), help="Prefetch jobs to send.")
@click.option("--hogs", default=2 * (os.cpu_count() or 1), show_default="two per core", type=click.IntRange(0),
              help="Busy processes taking the CPU meanwhile.")
@click.option("--load", default=1.0, show_default=True, type=click.FloatRange(0.05, 10),
              help="Send rate as a share of the measured capacity.")
@click.option("--worker-class", default="simple", show_default=True, type=click.Choice(["simple", "fork"]),
              help="The two workers' class.")
@click.option("--memories", default=10_000, show_default=True, type=click.IntRange(1),
              help="Memories in the namespace.")
def soak(jobs: int, hogs: int, load: float, worker_class: str, memories: int) -> None:
    """Live workers under overload: jobs ending "worker lost" while no worker died (false losses)."""
    from ferret.bench.soak import run

    report = run(jobs, hogs, load, worker_class, memories)
    click.echo(f"{report['jobs']:,} jobs at {report['sent_jobs_per_s']}/s (capacity {report['capacity_jobs_per_s']}/s, "
               f"{report['hogs']} hogs on {report['cores']} cores) over {report['minutes']} min: {report['statuses']}; "
               f"false losses {report['false_losses']}, no final status {report['no_final_status']}")
    click.echo(json.dumps(report))


@bench.command()
@click.option("--jobs", default=2_000, show_default=True, help="Prefetch jobs to run.")
def footprint(jobs: int) -> None:
    """Bytes a prefetch job leaves in Redis, by key family (a private redis-server, default settings)."""
    from ferret.bench.footprint import measure

    report = measure(jobs)
    for family, size in sorted(report["bytes_per_job"].items(), key=lambda row: -row[1]):
        click.echo(f"{family:>24}: {size:>7,} bytes/job")
    click.echo(f"{'total, capped cache aside':>24}: {report['total_without_capped']:>7,} bytes/job")
    click.echo(json.dumps(report))


@bench.command()
@click.option("--data", "data_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="LoCoMo JSON (the LoCoMo data set's own file, e.g. locomo10.json).")
@click.option("--agents", default=100, show_default=True, type=click.IntRange(1, 10_000), help="Simulated agents.")
@click.option("--turns", default=10, show_default=True, type=click.IntRange(1, 1_000), help="Turns each agent plays.")
@click.option("--periods", default="2", show_default=True,
              help="Seconds between an agent's turns, comma-separated: one row per period and arrival pattern.")
@click.option("--arrivals", default="spread,lockstep", show_default=True,
              help="spread: agents start evenly over the period; lockstep: all at once, every period.")
@click.option("--think", default=1.0, show_default=True, type=float, help="Seconds between prefetch and reading.")
@click.option("--history", default=100, show_default=True, type=click.IntRange(0, 100_000),
              help="Turns of its conversation each agent's namespace holds before it plays.")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 64), help="ferret worker processes.")
@click.option("--out", "out_dir", default=DEFAULT_OUT, show_default=True, type=click.Path(path_type=Path),
              help="Directory for agents.json.")
@click.option("--stall-meter/--no-stall-meter", default=True, show_default=True,
              help="Measure the event loop's stall (a ticker waking every millisecond, whose own CPU counts in the "
                   "driver's).")
@SETTING_OPTION
def agents(data_path: Path, agents: int, turns: int, periods: str, arrivals: str, think: float, history: int,
           workers: int, out_dir: Path, stall_meter: bool, settings: tuple[str, ...]) -> None:
    """Agents playing LoCoMo conversations: write a turn, prefetch, think, read context_for (AsyncClient)."""
    from ferret.bench.agents import run
    from ferret.bench.common import write_json

    try:
        period_values = tuple(float(value) for value in periods.split(",") if value.strip())
    except ValueError:
        raise click.BadParameter("comma-separated seconds, e.g. 2,1,0.5", param_hint="--periods") from None
    arrival_values = tuple(value.strip() for value in arrivals.split(",") if value.strip())
    if not period_values or any(value <= 0 for value in period_values):
        raise click.BadParameter("positive seconds, e.g. 2,1,0.5", param_hint="--periods")
    if not arrival_values or set(arrival_values) - {"spread", "lockstep"}:
        raise click.BadParameter("spread, lockstep or both", param_hint="--arrivals")
    rows = run(data_path, agents, turns, period_values, arrival_values, think, history, workers,
               _setting_env(settings), stall_meter)
    for row in rows:
        click.echo(f"{row['arrival']:>8} every {row['period_s']:g} s: ready {row['ready_rate']:.3f}, "
                   f"fresh {row['fresh_rate']} of {row['fresh_checked']}, superseded {row['superseded']}, "
                   f"enqueue-to-ready p50 {row['enqueue_to_ready_p50_ms']} ms p99 {row['enqueue_to_ready_p99_ms']} ms, "
                   f"round trips/turn {row['client_round_trips_per_turn']} (agents) "
                   f"{row['redis_commands_per_turn']} (Redis commands, all), "
                   + (f"loop stall {row['loop_stall_ms']} ms ({row['loop_stall_cpu_ms']} ms CPU, "
                      f"{row['loop_stall_net_of_gc_ms']} ms net of GC pauses), " if stall_meter else "")
                   + f"CPU ms/turn: workers {row['cpu_ms_per_turn_workers']}, redis {row['cpu_ms_per_turn_redis']}, "
                   f"driver {row['cpu_ms_per_turn_driver']}")
    write_json(out_dir / "agents.json", rows)
    click.echo(json.dumps(rows))


def rq_version() -> str:
    from importlib.metadata import version

    return version("rq")
