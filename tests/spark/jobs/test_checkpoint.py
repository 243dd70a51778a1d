"""Reading a local Spark checkpoint for progress (warren/spark/jobs/checkpoint.py): the end of
the newest committed batch, and of the newest planned one."""

from __future__ import annotations

from warren.spark.jobs.checkpoint import committed_ends, planned_ends


def _offsets(folder, batch: int, ends: dict) -> None:
    import json

    (folder / "offsets").mkdir(exist_ok=True)
    (folder / "offsets" / str(batch)).write_text("v1\n" + json.dumps({"batchWatermarkMs": 0}) + "\n"
                                                 + json.dumps(ends) + "\n")


def test_committed_and_planned_ends(tmp_path):
    assert committed_ends(str(tmp_path)) == {} and planned_ends(str(tmp_path)) == {}
    _offsets(tmp_path, 0, {"a": 100, "b": 5})
    assert committed_ends(str(tmp_path)) == {}  # planned, not committed yet
    assert planned_ends(str(tmp_path)) == {"a": 100, "b": 5}
    (tmp_path / "commits").mkdir()
    (tmp_path / "commits" / "0").write_text("v1\n{}\n")
    _offsets(tmp_path, 1, {"a": 250, "b": 5})
    assert committed_ends(f"file://{tmp_path}") == {"a": 100, "b": 5}
    assert planned_ends(str(tmp_path)) == {"a": 250, "b": 5}


def test_a_checkpoint_elsewhere_says_nothing(tmp_path):
    assert committed_ends("s3a://bucket/chk") == {} and planned_ends(str(tmp_path / "missing")) == {}
