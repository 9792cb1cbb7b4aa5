"""The plugins' per-load JSON record (weightstream/serving/load_record.py,
`--model-loader-extra-config '{"stats": PATH}'`): its path template is
checked when the options are parsed, a path that two ranks or replicas
would share is refused before a load, and the record says what the load
read, planned and fetched. (The plugins write it in real engines:
plugins/vllm/tests/test_vllm_s3.py at TP=2 from SeaweedFS,
plugins/sglang/tests/test_sglang.py.)"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

import pytest

import weightstream
from weightstream.serving import load_record
from weightstream.serving.options import Options
from weightstream.serving.load_record import share


@dataclass
class Planned:
    """What load_record reads of sharding.Planned (which needs torch)."""
    ck_name: str
    region: object
    note: str


def test_the_template_is_checked_when_options_are_parsed():
    assert Options.parse({"stats": "/tmp/load-{rank}.json"}).stats == "/tmp/load-{rank}.json"
    for bad, says in [("/tmp/load-{node}.json", "only {rank}, {dp} and {pid}"), ("/tmp/{rank", "only {rank}"),
                      ("", "is a file path"), (3, "is a file path")]:
        with pytest.raises(ValueError, match="stats") as e:
            Options.parse({"stats": bad})
        assert says in str(e.value), e.value
    assert Options.parse({"stats": "/tmp/{{literal}}-{rank}.json"}).stats


def test_a_path_ranks_or_replicas_would_share_is_refused():
    assert str(load_record.path_for("/x/load.json", rank=0, ranks=1)) == "/x/load.json"
    assert str(load_record.path_for("/x/load-{rank}.json", rank=3, ranks=4)) == "/x/load-3.json"
    with pytest.raises(ValueError, match=r"each of this engine's 2 ranks: put \{rank\} in it"):
        load_record.path_for("/x/load.json", rank=1, ranks=2)
    with pytest.raises(ValueError, match=r"2 data-parallel replicas: put \{dp\}"):
        load_record.path_for("/x/load-{rank}.json", rank=0, ranks=2, dp=1, dps=2)
    assert str(load_record.path_for("/x/{dp}-{rank}.json", rank=1, ranks=2, dp=1, dps=2)) == "/x/1-1.json"
    # A runtime that does not say which replica this is: only {pid} tells them apart.
    with pytest.raises(ValueError, match=r"put \{pid\}"):
        load_record.path_for("/x/{dp}-{rank}.json", rank=0, ranks=1, dp=None, dps=2)
    assert str(load_record.path_for("/x/{pid}.json", rank=0, ranks=1, dp=None, dps=2)) == f"/x/{os.getpid()}.json"


def test_the_record_says_what_the_load_read_and_planned(fixtures, tmp_path):
    out, _ = fixtures
    with weightstream.open(out / "all_types.gguf", skip_unsupported=True) as ck:
        names = ck.keys()
        planned = [Planned(n, None, "replicated") for n in names[1:]] + [Planned(names[0], None, "skipped")]
        mine, whole = share(ck, planned)
        ck.load(names[1:])
        rec = load_record.record(ck, seconds=0.25, device="cpu", layout={"tp_rank": 0, "tp_size": 1}, planned=planned,
                                 share=mine, whole=whole, fetched=None, counts={"into_parameters": len(names) - 1})
        read = ck.bytes_read
    assert mine == sum(ck.slice_bytes(n) for n in names[1:]) and whole == mine + ck.slice_bytes(names[0])
    path = load_record.write(tmp_path / "records" / "load-0.json", rec)
    got = json.loads(path.read_text())
    assert got["checkpoint"] == str(out / "all_types.gguf") and got["format"] == "gguf" and got["device"] == "cpu"
    assert got["tensors"] == {"planned": len(names), "skipped": 1, "into_parameters": len(names) - 1}
    assert got["bytes"] == {"share": mine, "whole": whole, "read": read} and read >= mine
    assert got["fetched"] is None, "a local file fetches nothing"
    assert got["seconds"] == 0.25 and got["layout"] == {"tp_rank": 0, "tp_size": 1}
    assert [s["source"] for s in got["sources"]] and os.listdir(path.parent) == ["load-0.json"], "no temporary left"
