"""Cold starts in CPU seconds: each handler's import paired with a bare-boto3 floor, and the whole
cold path (import, first clients, secret fetch, first SendMessage) projected to wall time in Lambda.

Every figure is the CPU time (``time.process_time``) of a fresh interpreter: wall time on a shared
two-core machine says more about the neighbours than about the code. The runs are interleaved
(floor, ingress, router, reconciler, gateway; again) so a busy moment weighs on all alike, and each
ratio is taken within one round (paired) before its median.

Lambda gives a function CPU in proportion to its memory: 1,769 MB is one vCPU (AWS's documentation;
FINDINGS.md). The projection assumes the work is CPU-bound and single-threaded, that one Lambda vCPU
runs Python as fast as one core of this machine, and that nothing else waits: wall = CPU seconds /
min(1, memory / 1769). Network round trips come on top (moto answers on loopback here).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import textwrap
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
from moto.server import ThreadedMotoServer

from bench.machine import ROOT
from bench.stats import median
from bench.support import FAKE_AWS

FUNCTIONS = ("ingress", "router", "reconciler", "gateway")
RUNS = 9
#: MB of memory that buys one full vCPU (AWS Lambda's documentation).
FULL_VCPU_MB = 1769
#: Memory sizes the projection is made for (MB); the configured ones are added.
PROJECTED_MB = (128, 256, 512, 1024, 1769)
#: The issue's goal: a handler's import at most this many times the floor's CPU.
GOAL_RATIO = 1.3
#: What the floor imports: what any Python webhook Lambda on boto3 needs anyway.
FLOOR = "import json, hmac, hashlib, base64, boto3"
SECRET = "It's a Secret to Everybody"  # noqa: S105 (GitHub's documented test secret)
APP_ID = 424242

#: The clients each function builds on its path (what the generic cold path creates).
CLIENTS: Mapping[str, tuple[str, ...]] = {
    "router": ("sqs", "dynamodb", "secretsmanager", "ecs"),
    "reconciler": ("sqs", "dynamodb", "secretsmanager", "ecs"),
    "gateway": ("sqs", "dynamodb", "secretsmanager"),
}


def configured_memory_mb() -> dict[str, int]:
    """Each function's memory as infra/ configures it (the constructs' class constants)."""
    from infra.constructs.agents import AgentCompute  # noqa: PLC0415 (aws_cdk: only when run)
    from infra.constructs.ingress import WebhookIngress  # noqa: PLC0415
    from infra.constructs.reconciler import Reconciler  # noqa: PLC0415
    from infra.constructs.router import EventRouter  # noqa: PLC0415

    return {
        "ingress": WebhookIngress.MEMORY_SIZE_MB,
        "router": EventRouter.MEMORY_SIZE_MB,
        "reconciler": Reconciler.MEMORY_SIZE_MB,
        "gateway": AgentCompute.GATEWAY_MEMORY_SIZE_MB,
    }


def deployed_tracing() -> dict[str, bool]:
    """Whether each function traces with X-Ray as deployed (its construct's setting)."""
    from infra.constructs.agents import AgentCompute  # noqa: PLC0415
    from infra.constructs.ingress import WebhookIngress  # noqa: PLC0415
    from infra.constructs.reconciler import Reconciler  # noqa: PLC0415
    from infra.constructs.router import EventRouter  # noqa: PLC0415

    return {
        "ingress": WebhookIngress.TRACING,
        "router": EventRouter.TRACING,
        "reconciler": Reconciler.TRACING,
        "gateway": AgentCompute.GATEWAY_TRACING,
    }


def cpu_share(memory_mb: int) -> float:
    """The fraction of one vCPU a function of ``memory_mb`` gets (Python uses one at most)."""
    return min(1.0, memory_mb / FULL_VCPU_MB)


def projected_wall_s(cpu_s: float, memory_mb: int) -> float:
    return round(cpu_s / cpu_share(memory_mb), 3)


# --- the child interpreter -----------------------------------------------------------------

#: Runs in a fresh interpreter: ``import`` one statement timed, then the cold path's phases, each
#: in CPU seconds; prints one JSON line and leaves with os._exit (a Lambda never shuts down).
_CHILD = textwrap.dedent(
    """
    import time as _t
    _c0 = _t.process_time()
    {statement}
    _c1 = _t.process_time()
    import json as _json, os as _os, sys as _sys
    _phases = {{"import": _c1 - _c0}}
    _plan = {plan!r}
    if _plan is not None:
        _p = _json.loads(open(_plan).read())
        _mark = _t.process_time()
        def _lap(name):
            global _mark
            now = _t.process_time()
            _phases[name] = now - _mark
            _mark = now
        if _p["kind"] == "ingress":
            from squadron.local.lambda_events import FakeLambdaContext
            _ctx = FakeLambdaContext()
            _lap("_harness")
            _service = handler.ingress()
            _lap("settings_and_wiring")
            _service.secrets.get(_service.settings.webhook_secret_arn)
            _lap("secret_client_and_fetch")
            _service.queue.client
            _lap("sqs_client")
            _answer = handler.handler(_p["event"], _ctx)
            _lap("first_event_triage_envelope_send")
            assert _answer["statusCode"] == 202, _answer
            handler.handler(_p["second"], _ctx)
            _lap("_warm_event")
        else:
            import boto3
            _clients = {{name: boto3.client(name) for name in _p["clients"]}}
            _lap("clients")
            from squadron.adapters.secrets import SecretsManagerSource
            SecretsManagerSource(client=_clients["secretsmanager"]).get(_p["secret_arn"])
            _lap("secret_fetch")
            from squadron.adapters.sqs import SqsEventQueue
            from squadron.domain.events import EventEnvelope
            _envelope = EventEnvelope.from_message(_p["envelope"])
            SqsEventQueue(_p["queue_url"], client=_clients["sqs"]).send(_envelope)
            _lap("first_send_message")
    _sys.stdout.write(_json.dumps(_phases) + "\\n")
    _sys.stdout.flush()
    _os._exit(0)
    """
)


def _env(name: str | None, tracing: bool, aws: Mapping[str, str]) -> dict[str, str]:
    """The child's environment: the layer on the path, and a Lambda's variables as deployed."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),  # noqa: S108 (only when HOME is unset)
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(ROOT / "layers" / "squadron"),
    }
    if name is None:
        return env
    return {
        **env,
        **aws,
        "LAMBDA_TASK_ROOT": str(ROOT / "functions" / name),
        "AWS_LAMBDA_FUNCTION_NAME": f"squadron-{name}",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
        "POWERTOOLS_SERVICE_NAME": name,
        "POWERTOOLS_METRICS_NAMESPACE": "SquadronBench",
        "POWERTOOLS_METRICS_DISABLED": "true",  # no EMF lines on stdout: the child answers there
        "POWERTOOLS_LOG_LEVEL": "CRITICAL",
        "POWERTOOLS_TRACE_DISABLED": "false" if tracing else "true",
        # No X-Ray daemon here: a traced child's segments go nowhere (UDP), as the SDK allows.
        "AWS_XRAY_CONTEXT_MISSING": "IGNORE_ERROR",
    }


def _child(statement: str, cwd: Path, env: Mapping[str, str], plan: Path | None = None) -> dict[str, float]:
    code = _CHILD.format(statement=statement, plan=str(plan) if plan else None)
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{statement!r} in {cwd} failed: {done.stderr[-3000:]}")
    phases: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return phases


# --- AWS under moto --------------------------------------------------------------------------


def _webhook_event(delivery: str) -> dict[str, Any]:
    from squadron.domain.webhook import sign  # noqa: PLC0415
    from tests.support.lambdas import http_api_event  # noqa: PLC0415
    from tests.support.webhook_examples import example  # noqa: PLC0415

    body = json.dumps(example("issues", "opened")).encode()
    headers = {
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": sign(body, SECRET),
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/bench",
    }
    return http_api_event(body, headers)


def _envelope_message() -> str:
    from squadron.domain.webhook import Accepted, AppIdentity, sign, triage_webhook  # noqa: PLC0415
    from tests.support.webhook_examples import example  # noqa: PLC0415

    body = json.dumps(example("issues", "opened")).encode()
    decision = triage_webhook(
        headers={
            "x-github-event": "issues",
            "x-github-delivery": str(uuid.uuid4()),
            "x-hub-signature-256": sign(body, SECRET),
        },
        body=body,
        secret=SECRET,
        app=AppIdentity(app_id=APP_ID, slug="squadron-bench"),
        max_body_bytes=2 * 1024 * 1024,
        received_at=datetime.now(UTC),
    )
    assert isinstance(decision, Accepted), decision
    return decision.envelope.to_message()


def _provision(endpoint: str, aws: Mapping[str, str]) -> dict[str, str]:
    session = boto3.session.Session(
        aws_access_key_id=aws["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=aws["AWS_SECRET_ACCESS_KEY"],
        region_name=aws["AWS_DEFAULT_REGION"],
    )
    sqs = session.client("sqs", endpoint_url=endpoint)
    queue_url = sqs.create_queue(
        QueueName="events.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"}
    )["QueueUrl"]
    secrets = session.client("secretsmanager", endpoint_url=endpoint)
    secret_arn = secrets.create_secret(Name="webhook-secret", SecretString=SECRET)["ARN"]
    return {"queue_url": queue_url, "secret_arn": secret_arn}


# --- the benchmark ---------------------------------------------------------------------------


def bench_cold_start() -> dict[str, Any]:
    memory = configured_memory_mb()
    tracing = deployed_tracing()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # the moto server's request lines
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        aws = {**FAKE_AWS, "AWS_REGION": FAKE_AWS["AWS_DEFAULT_REGION"], "AWS_ENDPOINT_URL": endpoint}
        resources = _provision(endpoint, aws)
        return _measure(memory, tracing, aws, resources)
    finally:
        server.stop()


def _measure(
    memory: dict[str, int], tracing: dict[str, bool], aws: dict[str, str], resources: dict[str, str]
) -> dict[str, Any]:
    envs = {
        name: {
            **_env(name, tracing[name], aws),
            "EVENTS_QUEUE_URL": resources["queue_url"],
            "WEBHOOK_SECRET_ARN": resources["secret_arn"],
            "GITHUB_APP_ID": str(APP_ID),
            "GITHUB_APP_SLUG": "squadron-bench",
        }
        for name in FUNCTIONS
    }
    floor_env = _env(None, tracing=False, aws=aws)
    # Unrecorded runs first: every module's bytecode cached, as in the deployed layer.
    _child(FLOOR, ROOT, floor_env)
    for name in FUNCTIONS:
        _child("import handler", ROOT / "functions" / name, envs[name])
    floors: list[float] = []
    imports: dict[str, list[float]] = {name: [] for name in FUNCTIONS}
    paths: dict[str, list[dict[str, float]]] = {name: [] for name in FUNCTIONS}
    envelope = _envelope_message()
    with tempfile.TemporaryDirectory(prefix="cold-start-") as directory:
        plans = Path(directory)
        for round_number in range(RUNS):
            floors.append(_child(FLOOR, ROOT, floor_env)["import"])
            for name in FUNCTIONS:
                plan = plans / f"{name}.json"
                plan.write_text(json.dumps(_plan(name, round_number, resources, envelope)), encoding="utf-8")
                phases = _child("import handler", ROOT / "functions" / name, envs[name], plan)
                imports[name].append(phases["import"])
                paths[name].append(phases)
    return _report(memory, tracing, floors, imports, paths)


def _plan(name: str, round_number: int, resources: dict[str, str], envelope: str) -> dict[str, Any]:
    if name == "ingress":
        return {
            "kind": "ingress",
            "event": _webhook_event(f"cold-{round_number}-{uuid.uuid4()}"),
            "second": _webhook_event(f"warm-{round_number}-{uuid.uuid4()}"),
        }
    return {"kind": "generic", "clients": list(CLIENTS[name]), "envelope": envelope, **resources}


def _report(
    memory: dict[str, int],
    tracing: dict[str, bool],
    floors: list[float],
    imports: dict[str, list[float]],
    paths: dict[str, list[dict[str, float]]],
) -> dict[str, Any]:
    floor_s = median(floors, 4) or 0.0
    functions: dict[str, Any] = {}
    for name in FUNCTIONS:
        paired = [handler / floor for handler, floor in zip(imports[name], floors, strict=True)]
        phase_names = [key for key in paths[name][0] if not key.startswith("_")]
        phases = {key: median([run[key] for run in paths[name]], 4) or 0.0 for key in phase_names}
        cold_path_s = median([sum(run[key] for key in phase_names) for run in paths[name]], 4) or 0.0
        sizes = sorted({*PROJECTED_MB, memory[name]})
        ratio = median(paired, 2) or 0.0
        functions[name] = {
            "memory_mb": memory[name],
            "tracing": tracing[name],
            "import_cpu_s": median(imports[name], 4),
            "import_cpu_s_min": round(min(imports[name]), 4),
            "import_ratio_to_floor": ratio,
            "import_ratios_paired": [round(r, 2) for r in paired],
            "meets_goal": ratio <= GOAL_RATIO,
            "cold_path_cpu_s": cold_path_s,
            "cold_path_phases_cpu_s": phases,
            "cold_path_wall_s_at_configured_memory": projected_wall_s(cold_path_s, memory[name]),
            "cold_path_wall_s_by_memory_mb": {str(mb): projected_wall_s(cold_path_s, mb) for mb in sizes},
        }
        if name == "ingress":
            warm = median([run["_warm_event"] for run in paths[name]], 4) or 0.0
            functions[name]["warm_event_cpu_s"] = warm
            functions[name]["warm_event_wall_s_by_memory_mb"] = {
                str(mb): projected_wall_s(warm, mb) for mb in sizes
            }
    return {
        "method": (
            f"{RUNS} rounds, each a fresh interpreter per function and one for the floor, interleaved "
            f"(floor, {', '.join(FUNCTIONS)}); CPU seconds by time.process_time inside the child "
            "around `import handler` (cwd functions/<name>, PYTHONPATH=layers/squadron, a Lambda's "
            "variables and each function's deployed tracing setting), after one unrecorded run per "
            "module (bytecode cached, as deployed); ratio: handler import / floor import of the same "
            "round, median over rounds. Cold path: in the same child, after the import: the ingress's "
            "first real event (settings and wiring, secret client and GetSecretValue, SQS client, "
            "the resolver, triage, envelope and SendMessage of a signed issues.opened); for the "
            "others, their clients, one GetSecretValue and one SendMessage of an envelope through "
            "the adapters. AWS is a moto server on loopback in the parent (its CPU is not counted)."
        ),
        "floor": FLOOR,
        "goal_ratio": GOAL_RATIO,
        "runs": RUNS,
        "projection": {
            "assumption": (
                f"CPU share = min(1, memory MB / {FULL_VCPU_MB}) of one vCPU (AWS: {FULL_VCPU_MB} MB "
                "is one vCPU); the cold path is CPU-bound and single-threaded; one Lambda vCPU runs "
                "Python as fast as one core of this machine; network round trips (a few ms each "
                "inside a region) and the runtime's own start are not included"
            ),
            "wall_s = cpu_s / share": True,
        },
        "floor_import_cpu_s": floor_s,
        "floor_import_cpu_s_runs": [round(f, 4) for f in floors],
        "functions": functions,
    }


def summary(result: dict[str, Any]) -> str:
    parts = []
    for name, info in result["functions"].items():
        parts.append(
            f"{name} import {info['import_ratio_to_floor']:.2f}x floor, cold path "
            f"{info['cold_path_cpu_s']:.2f} s CPU = {info['cold_path_wall_s_at_configured_memory']:.1f} s "
            f"at {info['memory_mb']} MB"
        )
    return f"floor {result['floor_import_cpu_s']:.3f} s CPU; " + "; ".join(parts)
