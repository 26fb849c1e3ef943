"""Fixtures of the Python package's tests: the package and the CLI of one build (MTX_BUILD_DIR, default
build-torch2: PYTHONPATH=<build>/python, CLI <build>/bin/mtx), Multi30k, and one tiny model trained once."""
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("MTX_BUILD_DIR", ROOT / "build-torch2"))
sys.path.insert(0, str(BUILD / "python"))


def multi30k() -> pathlib.Path:
    return pathlib.Path(os.environ.get("MTX_DATA_DIR", ROOT / "data" / "multi30k"))


@pytest.fixture(scope="session")
def cli() -> pathlib.Path:
    path = BUILD / "bin" / "mtx"
    assert path.exists(), f"{path}: build the CLI of the same build as the package"
    return path


@pytest.fixture(scope="session")
def data_dir() -> pathlib.Path:
    d = multi30k()
    if not (d / "train.de.gz").exists():
        if os.environ.get("MTX_ALLOW_MISSING_DATA") == "1":
            pytest.skip(f"Multi30k not found at {d}")
        pytest.fail(f"Multi30k not found at {d}: scripts/get_multi30k.sh --mirror DIR")
    return d


def need(module: str):
    """The module, or a skip where it is not installed -- but in CI (CI=true) and where MTX_REQUIRE_ORACLES=1
    (scripts/test.sh installs the peers), a missing peer fails the test instead of skipping it."""
    if os.environ.get("CI") == "true" or os.environ.get("MTX_REQUIRE_ORACLES") == "1":
        import importlib
        try:
            return importlib.import_module(module)
        except ImportError as e:
            pytest.fail(f"{module} is not installed, and this run requires the tests' peers: {e}")
    return pytest.importorskip(module)


def tiny_overrides(data_dir: pathlib.Path, cache: pathlib.Path, steps: int) -> list:
    return [f"data.dir={data_dir}", f"data.cache_dir={cache}", f"train.max_steps={steps}",
            "train.validate_every=20", "train.threads=1", "train.max_tokens=1024", "train.warmup_steps=20",
            "train.keep_last=2", "train.log_every=10"]


@pytest.fixture(scope="session")
def model(tmp_path_factory, data_dir) -> pathlib.Path:
    """A tiny model (configs/tiny.json, 40 updates), trained in this process through mtx.train."""
    import mtx
    work = tmp_path_factory.mktemp("model")
    mtx.train(str(ROOT / "configs" / "tiny.json"), overrides=tiny_overrides(data_dir, work / "cache", 40),
              out=str(work / "run"))
    return work / "run" / "best.pt"


@pytest.fixture(scope="session")
def ssru_model(tmp_path_factory, data_dir) -> pathlib.Path:
    """The tiny model with an SSRU decoder (Marian's students: model.decoder_autoreg ssru), 40 updates."""
    import mtx
    work = tmp_path_factory.mktemp("ssru")
    mtx.train(str(ROOT / "configs" / "tiny.json"),
              overrides=tiny_overrides(data_dir, work / "cache", 40) + ["model.decoder_autoreg=ssru"],
              out=str(work / "run"))
    return work / "run" / "best.pt"


@pytest.fixture(scope="session")
def val_lines(data_dir) -> list:
    import gzip
    with gzip.open(data_dir / "val.de.gz", "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for _, line in zip(range(60), f)]


def run_cli(cli, *args, input_text=None) -> str:
    out = subprocess.run([str(cli), *map(str, args)], input=input_text, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout
