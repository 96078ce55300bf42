#!/usr/bin/env python3
"""Record the real Nous server's answers to every request Ferret makes.

    python ops/nous/record_twin.py --source PATH_TO_HYNOUS_CHECKOUT
    python ops/nous/record_twin.py --url http://127.0.0.1:3100/v1   # a server you started (throwaway)

With ``--source`` (a checkout of the Hynous repository, or its bare git
directory) it copies ``nous-server/`` to a temporary folder, installs it with
pnpm (Node.js 20 and npm from your package manager; pnpm 9 comes through npx),
starts it on a free loopback port with an empty database, runs the twin
contract tests (``tests/contract/test_nous_twin.py``) against it through a
recording proxy, writes every exchange to
``tests/contract/recordings/nous_server.json`` and stops the server. The
replay tests, and the fake Nous, are then held to that recording.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from ferret.redis_plumbing.server_process import loopback_port

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "tests" / "contract" / "recordings" / "nous_server.json"
PNPM = ["npx", "--yes", "pnpm@9"]


def _copy_server(source: Path, into: Path) -> str:
    """``nous-server/`` of ``source`` into ``into``; returns what was recorded (commit if known)."""
    if (source / "nous-server").is_dir():
        shutil.copytree(source / "nous-server", into / "nous-server", ignore=shutil.ignore_patterns("node_modules"))
        git = ["git", "-C", str(source)]
    elif (source / "HEAD").is_file() and (source / "objects").is_dir():  # a bare git directory
        archive = subprocess.run(["git", f"--git-dir={source}", "archive", "HEAD", "nous-server"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "x", "-C", str(into)], input=archive, check=True)
        git = ["git", f"--git-dir={source}"]
    else:
        sys.exit(f"error: {source} has no nous-server/ folder and is not a git directory")
    commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    return f"nous-server (Hynous {commit or 'unknown commit'})"


def _wait_healthy(url: str, server: subprocess.Popen[bytes], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"error: the Nous server exited with {server.returncode} (its log is above)")
        try:
            if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    sys.exit(f"error: the Nous server did not answer {url}/health within {seconds:.0f} s")


def _record(url: str, out: Path, name: str) -> int:
    env = {**os.environ, "FERRET_TEST_NOUS_URL": url, "FERRET_TEST_NOUS_RECORD": str(out),
           "FERRET_TEST_NOUS_SERVER": name}
    tests = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-k", "live",
             str(ROOT / "tests" / "contract" / "test_nous_twin.py")]
    return subprocess.run(tests, env=env, cwd=ROOT).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--source", type=Path, help="a Hynous checkout (or its bare git directory)")
    where.add_argument("--url", help="a running, throwaway Nous server: http://host:port/v1")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"the recording (default {DEFAULT_OUT})")
    args = parser.parse_args()
    if args.url:
        return _record(args.url.rstrip("/"), args.out, f"nous-server at {args.url}")
    with tempfile.TemporaryDirectory(prefix="nous-twin-") as work:
        folder = Path(work)
        name = _copy_server(args.source.resolve(), folder)
        server_dir = folder / "nous-server"
        subprocess.run([*PNPM, "install", "--frozen-lockfile"], cwd=server_dir, check=True)
        port = loopback_port()
        env = {**os.environ, "PORT": str(port), "NOUS_DB_PATH": str(folder / "db" / "nous.db")}
        env.pop("OPENAI_API_KEY", None)  # no embeddings: the search is BM25 + graph, as recorded
        server = subprocess.Popen([*PNPM, "exec", "tsx", "src/index.ts"], cwd=server_dir / "server", env=env,
                                  start_new_session=True)
        url = f"http://127.0.0.1:{port}/v1"
        try:
            _wait_healthy(url, server)
            code = _record(url, args.out, name)
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=10)
    print(f"recorded {name} into {args.out}" if code == 0 else f"the twin tests failed against {name}: rc {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
