"""bench.report's table from bench.realworld records (no lowering here: records made by hand)."""

from bench.report import table


def _report(fallbacks):
    side = {"ok": True, "error": None, "median_s": 2.0, "peak_rss_mb": 100.0}
    lowerkit = {**side, "median_s": 1.0}
    if fallbacks is not None:
        lowerkit["decomposition_fallbacks"] = fallbacks
    case = {
        "model": "tv:resnet18", "target": "TOSA-1.0+INT", "sides": {"stock": side, "dropin": lowerkit},
        "compared": ".pte sha256", "same": True, "ratios": {"dropin": 2.0}, "passed_only_on": [],
    }  # fmt: skip
    machine = {
        "cpus": 2, "loadavg_at_start": [1.0, 1.0, 1.0], "started": "2026-12-02 08:00:00 UTC", "niceness": 0,
        "versions": {"torch": "2.13.0"}, "lowerkit_commit": "abc123",
    }  # fmt: skip
    return {"machine": machine, "argv": ["--models", "tv:resnet18"], "cases": [case]}


def test_the_table_names_each_fallback_and_why():
    text = table([_report(["nested graphs (189 nodes)"])])
    assert "| `tv:resnet18` | TOSA-1.0+INT | 2.0 | 1.0 | 2.00x | same .pte |" in text
    assert "- `tv:resnet18` TOSA-1.0+INT, drop-in: nested graphs (189 nodes)" in text
    assert "lowerkit abc123" in text


def test_the_table_says_when_every_decomposition_stayed_local():
    assert "stayed local" in table([_report([])])
    assert "stayed local" not in table([_report(None)])  # records from before the field existed


def test_geomeans_per_target_and_per_backend_with_several_targets():
    first, second = _report(None), _report(None)
    second["cases"][0] = {**second["cases"][0], "target": "TOSA-1.0+FP", "ratios": {"dropin": 8.0}}
    text = table([first, second])
    assert "Geomean drop-in / stock, Arm: 4.00x over 2 cases (min 2.00x)." in text
    assert "Geomean drop-in / stock, TOSA-1.0+INT: 2.00x over 1 cases (min 2.00x)." in text
    assert "Geomean drop-in / stock, TOSA-1.0+FP: 8.00x over 1 cases (min 8.00x)." in text
    assert "Core ML" not in text  # no Core ML case, and one target is no backend line of its own


def test_a_documented_fix_is_flagged_in_the_failures():
    report = _report(None)
    stock = {"ok": False, "error": "AttributeError: 'Parameter' object has no attribute 'to_tensor'", "median_s": None,
             "peak_rss_mb": 100.0}  # fmt: skip
    fix = "lowerkit.arm_passes.upstream_fixes:SCALAR_OF_A_WEIGHT"
    report["cases"][0] = {**report["cases"][0], "sides": {**report["cases"][0]["sides"], "stock": stock},
                          "same": None, "ratios": {}, "passed_only_on": ["dropin"], "documented_fix": fix}  # fmt: skip
    assert f"passes on lowerkit's sides: documented fix `{fix}`" in table([report])
