"""mtx.train in this process: a KeyboardInterrupt from another thread stops the run at an update boundary, and
resuming it ends on the same weights, bit for bit, as a run never interrupted."""
import _thread
import logging
import re
import pathlib
import threading
import time

import pytest

import mtx
from conftest import ROOT, tiny_overrides


def test_interrupted_run_resumes_bit_for_bit(tmp_path, data_dir, caplog):
    config = str(ROOT / "configs" / "tiny.json")
    steps = 200
    whole = mtx.train(config, overrides=tiny_overrides(data_dir, tmp_path / "cache", steps), out=str(tmp_path / "a"))
    assert whole["steps"] == steps
    expected = mtx.load_info(str(tmp_path / "a" / "last.pt"))["weights_sha256"]

    messages = []
    started = threading.Event()

    def callback(record):
        messages.append(record["message"])
        if re.search(r"update \d+ \|", record["message"]):  # a progress line: updates are running
            started.set()

    def interrupt():
        started.wait(300)
        _thread.interrupt_main()  # as Ctrl-C does

    threading.Thread(target=interrupt, daemon=True).start()
    caplog.set_level(logging.INFO, logger="mtx")
    with pytest.raises(KeyboardInterrupt, match="resume"):
        mtx.train(config, overrides=tiny_overrides(data_dir, tmp_path / "cache", steps), out=str(tmp_path / "b"),
                  callback=callback)
    stopped = mtx.load_info(str(tmp_path / "b" / "last.pt"))
    assert 0 < stopped["step"] < steps, stopped["step"]
    assert messages and any(r.name == "mtx" for r in caplog.records)  # progress reached logging and the callback

    resumed = mtx.train(resume=str(tmp_path / "b"))
    assert resumed["steps"] == steps
    assert mtx.load_info(str(tmp_path / "b" / "last.pt"))["weights_sha256"] == expected
