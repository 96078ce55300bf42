"""The reference pages, generated from the code at every build (``docs/gen_reference.py`` runs this under
mkdocs-gen-files), so they cannot drift: every setting from the settings model, every command and option
from click, the exit codes, every metric with its labels from a worker's registry, the exception tree and
the Redis keys. ``tests/unit/test_docs_reference.py`` checks each page names everything the code has."""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Iterator
from typing import Any

import click


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _code_cell(text: object) -> str:
    """Text for a code span in a table cell: Python-Markdown shows a ``\\|`` there as it is, so a pipe is the
    HTML entity inside ``<code>``."""
    import html

    return "<code>" + html.escape(str(text).replace("\n", " "), quote=False).replace("|", "&#124;") + "</code>"


def _default(value: Any) -> str:
    from ferret.settings.walk import REQUIRED

    if value == REQUIRED:
        return "required"
    shown = json.dumps(value, default=str)
    return f"`{shown}`" if len(shown) <= 60 else f"`{shown[:57]}...`"


def settings_page() -> str:
    from ferret.settings import Settings
    from ferret.settings.walk import leaves

    rows = ["# Settings", "",
            "Every setting, generated from `ferret.settings`. Sources, later wins: these defaults, a YAML file "
            "(`--config` or `FERRET_CONFIG`), then environment variables (the column below). Unknown keys are an "
            "error. `ferret config show` prints the values in force and where each came from.", ""]
    section = None
    for leaf in leaves(Settings):
        top = leaf.path.split(".")[0]
        if top != section:
            section = top
            rows += ["", f"## {top}", "", "| setting | type | default | bounds | environment | meaning |",
                     "|---|---|---|---|---|---|"]
        rows.append(f"| `{leaf.path}` | {_code_cell(leaf.type)} | {_cell(_default(leaf.default))} | "
                    f"{_cell(leaf.bounds) or ''} | `{leaf.env}` | {_cell(leaf.meaning)} |")
    return "\n".join(rows) + "\n"


def _commands(group: click.Group, prefix: str) -> Iterator[tuple[str, click.Command]]:
    for name in sorted(group.commands):
        command = group.commands[name]
        yield f"{prefix} {name}", command
        if isinstance(command, click.Group):
            yield from _commands(command, f"{prefix} {name}")


def _option_row(parameter: click.Parameter) -> str:
    if isinstance(parameter, click.Argument):
        return f"| `{parameter.human_readable_name}` | argument | {'required' if parameter.required else ''} | |"
    assert isinstance(parameter, click.Option)
    names = ", ".join(f"`{n}`" for n in [*parameter.opts, *parameter.secondary_opts])
    default = "" if parameter.default is None or (parameter.is_flag and not parameter.default) \
        else _default(parameter.default if not callable(parameter.default) else "(computed)")
    return f"| {names} | {_cell(parameter.type.name)} | {default} | {_cell(parameter.help or '')} |"


def cli_page() -> str:
    from ferret.cli.main import cli

    rows = ["# Command line", "", "Every `ferret` command and option, generated from the click definitions. "
            "Exit codes: [Exit codes](exit-codes.md).", "", "## ferret", "", _cell(cli.help or ""), "",
            "| option | type | default | meaning |", "|---|---|---|---|"]
    rows += [_option_row(p) for p in cli.params]
    for path, command in _commands(cli, "ferret"):
        rows += ["", f"## {path}", "", (command.help or "").strip(), ""]
        parameters = [p for p in command.params if p.name != "help"]
        if parameters:
            rows += ["| option | type | default | meaning |", "|---|---|---|---|"]
            rows += [_option_row(p) for p in parameters]
    return "\n".join(rows) + "\n"


def exit_codes_page() -> str:
    from ferret.cli import exit_codes

    return "# Exit codes\n\nThe same for every `ferret` command (`ferret.cli.exit_codes`).\n\n" + \
        inspect.cleandoc(exit_codes.__doc__ or "").split("\n", 1)[1].strip() + "\n"


def metrics_page() -> str:
    from prometheus_client import CollectorRegistry

    from ferret.worker.metrics import CircuitCollector, FerretMetrics, IndexBytesCollector, QueueDepthCollector

    registry = CollectorRegistry()
    FerretMetrics(registry)
    scraped = [f for c in (QueueDepthCollector, CircuitCollector, IndexBytesCollector) for f in c.families()]
    rows = ["# Metrics", "", "Every metric a worker exports on `--metrics-port` (generated from a worker's "
            "registry). Counters are exported with `_total`, histograms with `_bucket`, `_sum`, `_count`.", "",
            "| metric | type | labels | meaning |", "|---|---|---|---|"]
    rows += _metric_rows([*registry.collect(), *scraped])
    from ferret.serve.http_metrics import HttpMetrics

    rows += ["", "## The HTTP server", "", "What `ferret serve` exports at `/metrics` (generated from its registry).",
             "", "| metric | type | labels | meaning |", "|---|---|---|---|",
             *_metric_rows(list(HttpMetrics().registry.collect()))]
    return "\n".join(rows) + "\n"


def _metric_rows(families: list) -> list[str]:
    rows = []
    for metric in sorted(families, key=lambda m: m.name):
        labels = sorted({key for sample in metric.samples for key in sample.labels if key != "le"}
                        | set(getattr(metric, "_labelnames", ())))
        name = metric.name + ("_total" if metric.type == "counter" else "")
        rows.append(f"| `{name}` | {metric.type} | {', '.join(f'`{label}`' for label in labels)} | "
                    f"{_cell(metric.documentation)} |")
    return rows


def errors_page() -> str:
    from ferret import errors

    rows = ["# Errors", "", "One exception tree, `ferret.errors` (the CLI maps it to [exit codes](exit-codes.md)).",
            "", "```", inspect.cleandoc(errors.__doc__ or "").split("\n\n")[1], "```", "",
            "| class | base | meaning |", "|---|---|---|"]
    for name, cls in inspect.getmembers(errors, inspect.isclass):
        if issubclass(cls, errors.FerretError) and cls.__module__ == errors.__name__:
            base = cls.__mro__[1].__name__
            rows.append(f"| `{name}` | `{base}` | {_cell(inspect.cleandoc(cls.__doc__ or '').split(chr(10))[0])} |")
    return "\n".join(rows) + "\n"


def keys_page() -> str:
    from ferret import keys

    rows = ["# Redis keys", "", inspect.cleandoc(keys.__doc__ or ""), "",
            "| function | key | what it holds |", "|---|---|---|"]
    for name, function in inspect.getmembers(keys, inspect.isfunction):
        if function.__module__ != keys.__name__ or name.startswith("_"):
            continue
        arguments = {p: f"<{p}>" for p in inspect.signature(function).parameters}
        try:
            example = function(**arguments)
        except Exception:  # a key function that computes from its argument (a hash): shown by its signature
            example = f"{name}({', '.join(arguments)})"
        rows.append(f"| `{name}` | {_code_cell(example)} | {_cell(inspect.cleandoc(function.__doc__ or ''))} |")
    return "\n".join([*rows, "", *_rq_keys()]) + "\n"


def _rq_keys() -> list[str]:
    """RQ's own keys for Ferret's queues, from RQ's accessors (``rq info`` and rq-dashboard read them)."""
    import redis
    from rq import Queue, Worker
    from rq.job import Job

    from ferret.contract import QUEUES

    idle = redis.Redis()  # never connects
    rows = ["## RQ's keys", "", "RQ keeps its own keys for Ferret's queues (read with `rq info` or rq-dashboard); "
            "Ferret's jobs are RQ jobs.", "", "| key | what it holds |", "|---|---|",
            f"| `{Job.key_for('<job id>')}` | Hash: one job (JSON data, status, timestamps, origin queue). |",
            f"| `{Queue.redis_queues_keys}` | Set: every queue's key. |",
            f"| `{Worker.redis_workers_keys}` | Set: every registered worker's key. |",
            f"| `{Worker.redis_worker_namespace_prefix}<name>` | Hash: one worker (state, current job, heartbeat). |"]
    for name in QUEUES:
        queue = Queue(name, connection=idle)
        rows += [f"| `{queue.key}` | List: the {name} queue's waiting job ids. |",
                 f"| `{queue.intermediate_queue_key}` | List: {name} jobs taken off the queue, not yet started. |",
                 f"| `{queue.started_job_registry.key}` | Sorted set: {name} jobs running, by heartbeat expiry. |",
                 f"| `{queue.failed_job_registry.key}` | Sorted set: {name} jobs RQ failed, by expiry. |",
                 f"| `{queue.finished_job_registry.key}` | Sorted set: {name} jobs RQ finished (Ferret keeps none: "
                 "result_ttl 0). |"]
    return rows


PAGES = {"reference/settings.md": settings_page, "reference/cli.md": cli_page,
         "reference/exit-codes.md": exit_codes_page, "reference/metrics.md": metrics_page,
         "reference/errors.md": errors_page, "reference/redis-keys.md": keys_page}


def memories_page() -> str:
    """Get started with your own memories: every field of a memory, from ``ferret.records.Memory``."""
    from ferret.ingest import MAX_LINE_BYTES
    from ferret.records import Memory
    from ferret.settings.walk import leaves

    rows = ["# Your own memories", "",
            "A memory is one JSON object; a file of them has one per line (JSONL). Load a file with "
            "`ferret ingest FILE.jsonl -n NAMESPACE` (each bad line is reported with its number and field, the "
            "good ones are stored, exit code 1), or from Python with `client.remember(namespace, [...])` (the "
            "first bad memory raises `InvalidMemory` naming `memories[i].field`). Writing an id again replaces "
            "that memory. The field names are a Nous server's, so its nodes load as they are.", "",
            "```json",
            '{"id": "e02", "type": "event", "content_title": "Flights booked to Italy", "content_body": "Booked '
            'the Lisbon to Rome flights for 14 March, business class.", "provenance_created_at": '
            '"2026-02-20T10:00:00Z", "temporal_event_time": "2026-03-14T07:40:00Z", "state_lifecycle": "ACTIVE"}',
            "```", "",
            f"A line is at most {MAX_LINE_BYTES:,} characters; no field may hold control characters other than tab "
            "and newline; unknown fields are ignored (a Nous node's `neural_*`, `layer`, ... load as they are); "
            "a field given as `null` is as if absent. `ferret/data/everyday_memories.jsonl` is a 30-line example.",
            "", "| field | type | default | limits | meaning |", "|---|---|---|---|---|"]
    for leaf in leaves(Memory):
        rows.append(f"| `{leaf.path}` | {_code_cell(leaf.type)} | {_cell(_default(leaf.default))} | "
                    f"{_cell(leaf.bounds)} | {_cell(leaf.meaning)} |")
    rows += ["", "Sections (`EPISODIC`, `SIGNALS`, `KNOWLEDGE`, `PROCEDURAL`) decide the boost a question about "
             "that kind of memory gives: see [Sections](../concepts/sections.md)."]
    return "\n".join(rows) + "\n"


PAGES["get-started/memories.md"] = memories_page


# When each Grafana panel stays flat, by its title (a panel added to the dashboard needs its line here:
# tests/unit/test_docs_reference.py checks it).
FLAT_WHEN = {
    "HTTP API: requests per second by route and status": "no `ferret serve` runs or no client calls it",
    "HTTP API: latency percentiles by route": "no HTTP requests are answered",
    "HTTP API: refusals per second by reason": "every request has a live key that may do what it asks, within its rate",
    "HTTP API: waits in flight (queries holding a connection for their result)":
        "no query is waiting for its result (zero between requests)",
    "Store mismatches: workers refused for serving another memory store":
        "every worker of a queue is configured with the same memory store (the normal case)",
    "Throughput by status (jobs/s)": "no jobs arrive; only `ok` when nothing fails",
    "Job latency percentiles": "no jobs finish",
    "Queue wait p95 by queue": "workers keep up (near zero) or no jobs arrive",
    "Stage latency p95": "no jobs run; a stage missing is one that did not run (e.g. rerank, off by default)",
    "Retry rate (retries per sub-query)": "every search's best hit clears `pipeline.quality_threshold`",
    "Replacement rate": "always, by default: replace-weak is off (`pipeline.max_replacements` 0)",
    "Decomposition rate": "no compound questions arrive",
    "Deadline misses (per s)": "every job ends within its deadline (the normal case)",
    "Backlog (queue depth)": "workers keep up (zero)",
    "Routes (jobs/s)": "no jobs arrive",
    "Backend requests by outcome": "no jobs run; only `ok` when the backend is healthy",
    "Backend latency p95": "no jobs run",
    "Workers up / busy": "never, while workers run: up is their count, busy how many are in a job",
    "Cache hit ratio": "the cache is off, or no request repeats within `cache.ttl_seconds`",
    "LLM re-rank by outcome (non-ok fell back)": "always, by default: the re-rank is off",
    "Refused queue entries by reason (none expected: someone wrote to the queues)":
        "always, unless something other than a Ferret producer writes to the queues",
    "Plain-search fallbacks by outcome (the orchestration failed; ok answered partial)":
        "always, unless every search of a job failed or the orchestration hit a bug",
    "Agent runs by outcome (fallback: the fast path answered) and LLM call p50": "always, by default: the agent is off",
    "Fusion of retrievers: results each contributed, weight shifts away from weak ones, failures":
        "lexical alone by default (graph and semantic need a Nous backend or embeddings)",
    "Oldest waiting job by queue (s): scale workers out when it grows": "workers keep up (zero)",
    "Outside endpoints with an open circuit (calls skipped by every worker)":
        "every outside endpoint answers (zero), or none is configured",
    "Jobs that skipped an endpoint (circuit open), per second": "every outside endpoint answers",
    "Prefetches superseded by a newer one of their conversation, per second":
        "agents read each prefetch before the next, or use no conversations",
    "Writes reaching the index: changes staged, committed (on a job's path, after a job) per second, and commit "
    "p95 (s)": "no memories are written (a read-only namespace), or the backend is Nous",
}


def dashboard_page() -> str:
    from pathlib import Path

    dashboard = json.loads((Path(__file__).resolve().parents[1] / "ops" / "grafana" / "dashboards"
                            / "ferret.json").read_text())
    rows = ["# The Grafana dashboard", "", "Every panel of `ops/grafana/dashboards/ferret.json` (provisioned by "
            "`ops/docker-compose.yml`), its query, and when it stays flat (so a flat panel is read right). "
            "The alerts are in `ops/prometheus/ferret-alerts.yml`: [Operating](../guides/operating.md).", "",
            "| panel | query | stays flat when |", "|---|---|---|"]
    for panel in dashboard["panels"]:
        queries = "<br>".join(_code_cell(t.get("expr", "")) for t in panel.get("targets", []))
        rows.append(f"| {_cell(panel['title'])} | {queries} | {_cell(FLAT_WHEN.get(panel['title'], ''))} |")
    return "\n".join(rows) + "\n"


PAGES["reference/dashboard.md"] = dashboard_page


def alerts_page() -> str:
    from pathlib import Path

    import yaml

    rules = yaml.safe_load((Path(__file__).resolve().parents[1] / "ops" / "prometheus" / "ferret-alerts.yml")
                           .read_text())
    rows = ["# Alerts", "", "Every alert of `ops/prometheus/ferret-alerts.yml` (generated from it; unit-tested with "
            "`promtool test rules ops/prometheus/ferret-alerts.test.yml`).", "",
            "| alert | severity | for | expression | summary |", "|---|---|---|---|---|"]
    for group in rules["groups"]:
        for rule in group["rules"]:
            expression = " ".join(rule["expr"].split())
            rows.append(f"| `{rule['alert']}` | {rule.get('labels', {}).get('severity', '')} | "
                        f"{rule.get('for', '')} | {_code_cell(expression)} | {_cell(rule['annotations']['summary'])} |")
    return "\n".join(rows) + "\n"


PAGES["reference/alerts.md"] = alerts_page


def http_api_page() -> str:
    """Every route of ``ferret serve`` from its OpenAPI document, which is published beside the page."""
    import json

    from ferret.serve.app import openapi_document

    document = openapi_document()
    rows = ["# The HTTP API", "", "Every route of `ferret serve` (generated from its OpenAPI document, which the "
            "server "
            "serves at `/openapi.json` and which is [published here](openapi.json)). Routes under `/v1` need "
            "`Authorization: Bearer KEY`; see [the HTTP API](../http/index.md).", "",
            "| method | route | what | answers |", "|---|---|---|---|"]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            answers = ", ".join(sorted(operation.get("responses", {})))
            rows.append(f"| {method.upper()} | `{path}` | {_cell(operation.get('summary', ''))} | {answers} |")
    rows += ["", "Models: " + ", ".join(f"`{name}`" for name in sorted(document["components"]["schemas"])) + "."]
    HTTP_DOCUMENT["reference/openapi.json"] = json.dumps(document, indent=2, sort_keys=True)
    return "\n".join(rows) + "\n"


HTTP_DOCUMENT: dict[str, str] = {}
PAGES["reference/http-api.md"] = http_api_page


def _signature(function: Any) -> str:
    try:
        return str(inspect.signature(function)).replace("'", "")
    except (TypeError, ValueError):
        return "(...)"


def _doc(thing: Any) -> str:
    return inspect.cleandoc(inspect.getdoc(thing) or "")


def _public_methods(cls: type, names: tuple[str, ...]) -> list[tuple[str, Any]]:
    """``names`` of the class (defined on it or a base), in that order."""
    found = []
    for name in names:
        member = next((vars(base)[name] for base in cls.__mro__ if name in vars(base)), None)
        if member is not None:
            found.append((name, member))
    return found


def _model_fields(cls: Any) -> list[str]:
    rows = ["| field | type | default | meaning |", "|---|---|---|---|"]
    for name, field in cls.model_fields.items():
        shown = "required" if field.is_required() else _default(field.get_default(call_default_factory=True))
        kind = getattr(field.annotation, "__name__", None) or str(field.annotation).replace("typing.", "")
        rows.append(f"| `{name}` | {_code_cell(kind)} | {_cell(shown)} | {_cell(field.description or '')} |")
    return rows


def python_api_page() -> str:
    """The Python client's public surface (``ferret.__all__``), from the code's signatures and docstrings."""
    import ferret

    rows = ["# The Python API", "",
            "What `import ferret` offers (`ferret.__all__`): the two ways in, the clients, what they take and give "
            "back, and the errors to catch. Generated from the code's signatures and docstrings at every build; "
            "any other module of the package is internal and may change.", ""]
    for name in ferret.__all__:
        if name.startswith("__"):
            continue
        found = getattr(ferret, name)
        where = getattr(found, "__module__", "ferret")
        rows += [f"## `ferret.{name}`", ""]
        if inspect.isfunction(found):
            from ferret.producer import api

            real = getattr(api, name)  # ferret.connect hands its arguments to the client's own connect
            rows += [f"```python\nferret.{name}{_signature(real)}\n```", "", _doc(real), ""]
            continue
        bases = ", ".join(b.__name__ for b in found.__bases__ if b is not object)
        rows += [f"*class, defined in `{where}`{f'; a kind of {bases}' if bases else ''}*", "", _doc(found), ""]
        if hasattr(found, "model_fields"):
            rows += [*_model_fields(found), ""]
        elif dataclasses.is_dataclass(found):
            rows += ["| field | type | default |", "|---|---|---|"]
            for field in dataclasses.fields(found):
                shown = "required" if field.default is dataclasses.MISSING else _default(field.default)
                rows.append(f"| `{field.name}` | {_code_cell(field.type)} | {_cell(shown)} |")
            rows.append("")
        elif not issubclass(found, BaseException):
            for method, member in _public_methods(found, ferret.CLIENT_METHODS):
                if isinstance(member, property):
                    rows += [f"### `{method}` (property)", "", _doc(member), ""]
                else:
                    prefix = "async " if inspect.iscoroutinefunction(member) else ""
                    rows += [f"### `{method}`", "", f"```python\n{prefix}def {method}{_signature(member)}\n```", "",
                             _doc(member), ""]
    return "\n".join(rows) + "\n"


PAGES["reference/python-api.md"] = python_api_page
