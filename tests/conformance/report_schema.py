"""The JSON report's shape, checked exactly (no extra or missing keys, the right types)."""

from __future__ import annotations

from typing import Any

TOP = {"hookproof", "target", "scheme", "seed", "options", "summary", "scenarios"}
SUMMARY = {"passed", "failed", "skipped", "errors"}
SCENARIO = {"id", "title", "family", "severity", "outcome", "observed_by", "duration_s", "failures"}
FAILURE = {"expected", "observed", "reproduce", "severity", "cause"}
OPTIONAL_TOP = {"interrupted", "causes"}
OPTIONAL_SCENARIO = {"reason"}


def validate_report(doc: Any) -> list[str]:
    """Every way ``doc`` departs from the documented shape (empty when it conforms)."""
    problems: list[str] = []

    def need(cond: bool, what: str) -> None:
        if not cond:
            problems.append(what)

    need(
        isinstance(doc, dict) and TOP <= set(doc) <= TOP | OPTIONAL_TOP,
        f"top-level keys {sorted(doc) if isinstance(doc, dict) else doc!r}",
    )
    if problems:
        return problems
    need(isinstance(doc["hookproof"], str) and bool(doc["hookproof"]), "hookproof version")
    need(isinstance(doc.get("interrupted", ""), str), "interrupted")
    need(isinstance(doc["seed"], int), "seed")
    need(isinstance(doc["options"], dict), "options")
    for cause in doc.get("causes", []):
        need(set(cause) == {"cause", "fix", "scenarios"}, f"cause keys {cause!r}")
    need(isinstance(doc["target"], str) and doc["target"].startswith("http"), "target")
    need(doc["scheme"] in ("standard", "stripe", "github"), "scheme")
    summary = doc["summary"]
    need(isinstance(summary, dict) and set(summary) == SUMMARY, "summary keys")
    need(
        all(isinstance(summary.get(k), int) and summary[k] >= 0 for k in SUMMARY), "summary counts"
    )
    scenarios = doc["scenarios"]
    need(isinstance(scenarios, list), "scenarios list")
    counts = dict.fromkeys(("passed", "failed", "skipped", "error"), 0)
    for item in scenarios if isinstance(scenarios, list) else []:
        shaped = isinstance(item, dict) and SCENARIO <= set(item) <= SCENARIO | OPTIONAL_SCENARIO
        need(shaped, f"scenario keys {item!r}")
        if not shaped:
            continue
        need(isinstance(item.get("reason", ""), str), f"reason of {item['id']}")
        for key in ("id", "title", "family"):
            need(isinstance(item[key], str) and bool(item[key]), f"{key} of {item.get('id')}")
        need(item["id"].startswith(item["family"] + "."), f"family of {item['id']}")
        need(item["severity"] in ("must", "should"), f"severity of {item['id']}")
        need(item["outcome"] in counts, f"outcome of {item['id']}")
        counts[item["outcome"]] = counts.get(item["outcome"], 0) + 1
        need(item["observed_by"] in ("probe", "status", None), f"observed_by of {item['id']}")
        need(isinstance(item["duration_s"], (int, float)) and item["duration_s"] >= 0, "duration")
        need(isinstance(item["failures"], list), f"failures of {item['id']}")
        for failure in item["failures"]:
            need(isinstance(failure, dict) and set(failure) == FAILURE, f"failure keys {failure!r}")
            need(all(isinstance(failure.get(k), str) for k in FAILURE), "failure values")
            need(failure.get("severity") in ("must", "should"), "failure severity")
        need(
            (item["outcome"] == "failed") == bool(item["failures"]),
            f"failures vs outcome of {item['id']}",
        )
    need(
        (summary["passed"], summary["failed"], summary["skipped"], summary["errors"])
        == (counts["passed"], counts["failed"], counts["skipped"], counts["error"]),
        "summary agrees with the scenarios",
    )
    return problems
