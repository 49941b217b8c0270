"""What the simulated clusters' kwok is configured with for `pods/log`, and nothing more."""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import yaml

from corral.devenv import kwok

# The CRI log line: RFC 3339 time with nanoseconds, stream, F(ull)/P(artial) tag, message.
CRI_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z (stdout|stderr) [FP] (.*)$")


def test_cluster_logs_serve_the_file_for_every_pod_and_container() -> None:
    document = yaml.safe_load(yaml.safe_dump(kwok.cluster_logs(Path("/x/pod.log"))))
    assert (document["apiVersion"], document["kind"]) == ("kwok.x-k8s.io/v1alpha1", "ClusterLogs")
    spec = document["spec"]
    # kwok matches every pod with empty name and namespace lists, every container with an
    # empty container list.
    assert not spec["selector"].get("matchNames") and not spec["selector"].get("matchNamespaces")
    assert spec["logs"] == [{"containers": [], "logsFile": "/x/pod.log"}]


def test_the_log_is_in_cri_format_in_utc() -> None:
    at = datetime.datetime(
        2026, 1, 2, 4, 5, 6, 789, tzinfo=datetime.timezone(datetime.timedelta(hours=1))
    )
    text = kwok.cri_log(("one", "two words"), at)
    lines = text.splitlines()
    matches = [CRI_LINE.match(line) for line in lines]
    assert all(matches) and text.endswith("\n")
    assert [m.group(2) for m in matches if m] == ["one", "two words"]
    assert all(line.startswith("2026-01-02T03:05:06.000789000Z stdout F ") for line in lines)


def test_the_simulated_log_says_so() -> None:
    text = kwok.cri_log(kwok.SIMULATED_LOG, datetime.datetime.now(datetime.UTC))
    assert "simulated by kwok" in text
    assert all(CRI_LINE.match(line) for line in text.splitlines())
