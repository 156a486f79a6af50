"""A real Chroma server (`chroma run`, shipped with chromadb) on 127.0.0.1, for server-mode tests.

`ChromaServer(path, log_path)` picks a free port; `start()` waits until the heartbeat answers, `stop()`
terminates the process; both can be called again (a server that goes away and comes back on the same
port and data, as after a restart).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def chroma_cli() -> str:
    script = Path(sys.executable).with_name("chroma")
    found = str(script) if script.is_file() else shutil.which("chroma")
    if not found:
        pytest.skip("the `chroma` CLI (chromadb) is not installed")
    return found


class ChromaServer:
    def __init__(self, path: Path, log_path: Path, env: dict[str, str]):
        self.host, self.port = "127.0.0.1", free_port()
        self.path, self.log_path, self.env = path, log_path, env
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> ChromaServer:
        log = self.log_path.open("a")
        self.process = subprocess.Popen(
            [chroma_cli(), "run", "--path", str(self.path), "--host", self.host, "--port", str(self.port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                pytest.fail(f"chroma run exited with {self.process.returncode}: {self.log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://{self.host}:{self.port}/api/v2/heartbeat", timeout=1) as response:
                    if response.status == 200:
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"chroma run did not answer its heartbeat within {timeout:.0f} s")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(15)
        self.process = None
