"""`pip install boundmem` is the memory, not its laboratory: the built wheel holds no benchmark module, no trainer and
no benchmark data, while the data the runtime loads is there."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory) -> list[str]:
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                        str(ROOT)], capture_output=True, text=True)
    if r.returncode != 0 and "No module named" in r.stderr and "setuptools" in r.stderr:
        pytest.skip("setuptools is not installed: the wheel cannot be built offline")
    assert r.returncode == 0, r.stderr
    (whl,) = out.glob("boundmem-*.whl")
    return zipfile.ZipFile(whl).namelist()


def test_the_wheel_carries_no_benchmark(wheel_names):
    bad = [n for n in wheel_names if "bench" in n.split("/")[0] or "/bench/" in n or n.endswith("_training.py")
           or "challenge_data" in n or "reader_data" in n or n.endswith("encoder-fp32.onnx")]
    assert not bad, bad


def test_the_wheel_carries_what_the_runtime_loads(wheel_names):
    for needed in ("boundmem/schema/data/", "boundmem/extract/data/reader/encoder.onnx",
                   "boundmem/extract/data/reader/heads.onnx", "boundmem/extract/data/reader/reader.json", "boundmem/maintain/data/polarity_minilm.npz",
                   "boundmem/embed/data/minilm-tokenizer.json",
                   "boundmem/retrieve/data/recall_gate.json", "boundmem/cli/root.py", "boundmem/service/static/"):
        assert any(n.startswith(needed) for n in wheel_names), needed
