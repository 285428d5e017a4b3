"""What backends said, kept for get_logs and get_notifications: bounded, and fair between servers."""

from __future__ import annotations

from emceepee_cli.backends import notifications
from emceepee_cli.backends.notifications import Heard, Kept


def test_a_flooding_server_pushes_out_its_own_lines_not_a_quiet_servers() -> None:
    kept = Heard()
    kept.log("quiet", "error", "cannot write the stderr log", "emceepee")
    for n in range(notifications.LOGS_KEPT * 3):
        kept.log("loud", "info", f"line {n}", "stderr")
    quiet, loud, every = (kept.logs_of(s, None, 10_000) for s in ("quiet", "loud", None))
    assert [e["message"] for e in quiet["logs"]] == ["cannot write the stderr log"] and "dropped" not in quiet
    assert (
        len(every["logs"]) == notifications.LOGS_KEPT and every["dropped"] == notifications.LOGS_KEPT * 2 + 1
    )
    assert loud["logs"][-1]["message"] == f"line {notifications.LOGS_KEPT * 3 - 1}" and loud["dropped"] > 0
    assert every["logs"][0]["server"] == "quiet"  # still in arrival order


def test_entries_of_every_server_come_in_arrival_order() -> None:
    kept = Kept(4)
    for server, n in [("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5)]:
        kept.append(server, {"n": n})
    assert [e["n"] for e in kept.entries(None)] == [2, 3, 4, 5]  # a, the fullest, lost its oldest
    assert [e["n"] for e in kept.entries("b")] == [2, 5] and kept.dropped_note("a") == {"dropped": 1}
    assert kept.dropped_note("b") == {} and kept.dropped_note(None) == {"dropped": 1} and len(kept) == 4
