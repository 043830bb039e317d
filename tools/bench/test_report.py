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


def test_a_case_measured_again_is_reported_from_the_later_run_the_earlier_named():
    before, after = _report(None), _report(None)
    before["machine"] = {**before["machine"], "lowerkit_commit": "old1234"}
    after["cases"][0] = {**after["cases"][0], "ratios": {"dropin": 8.0}}
    text = table([before, after])
    assert text.count("| `tv:resnet18` | TOSA-1.0+INT |") == 1
    assert "Geomean drop-in / stock, TOSA-1.0+INT: 8.00x over 1 cases (min 8.00x)." in text
    assert "- `tv:resnet18` TOSA-1.0+INT at lowerkit old1234 (2026-12-02 08:00:00 UTC): drop-in 2.00x" in text


def test_the_later_run_is_the_one_that_started_later_whatever_the_file_order():
    before, after = _report(None), _report(None)
    before["machine"] = {**before["machine"], "lowerkit_commit": "old1234"}
    after["machine"] = {**after["machine"], "started": "2026-12-03 08:00:00 UTC", "lowerkit_commit": "new5678"}
    after["cases"][0] = {**after["cases"][0], "ratios": {"dropin": 8.0}}
    text = table([after, before])  # e.g. a glob that sorts the newer file first
    assert "Geomean drop-in / stock, TOSA-1.0+INT: 8.00x over 1 cases (min 8.00x)." in text
    assert "- `tv:resnet18` TOSA-1.0+INT at lowerkit old1234 (2026-12-02 08:00:00 UTC): drop-in 2.00x" in text
    assert text.index("lowerkit old1234") < text.index("lowerkit new5678")  # runs listed as they started


def test_a_documented_fix_is_flagged_in_the_failures():
    report = _report(None)
    stock = {"ok": False, "error": "AttributeError: 'Parameter' object has no attribute 'to_tensor'", "median_s": None,
             "peak_rss_mb": 100.0}  # fmt: skip
    fix = "lowerkit.arm_passes.upstream_fixes:SCALAR_OF_A_WEIGHT"
    report["cases"][0] = {**report["cases"][0], "sides": {**report["cases"][0]["sides"], "stock": stock},
                          "same": None, "ratios": {}, "passed_only_on": ["dropin"], "documented_fix": fix}  # fmt: skip
    assert f"passes on lowerkit's sides: documented fix `{fix}`" in table([report])


def _with_floors(floors, stages=None, parts=None):
    """`_report`'s case, its drop-in side holding stage seconds and their floors (as bench.realworld records)."""
    report = _report(None)
    dropin = report["cases"][0]["sides"]["dropin"]
    dropin["stages"] = stages or {"export": 0.5, "quantize": 2.0, "re-export": 1.0,
                                  "to_edge_transform_and_lower": 6.0, "to_executorch": 0.5}  # fmt: skip
    dropin["floors"] = floors
    dropin["floor_parts"] = parts or {"changed_passes": 36}
    return report


FLOORS = {"export": 0.5, "quantize": 0.25, "re-export": 0.001, "to_edge_transform_and_lower": 1.5, "to_executorch": 0.25}


def test_each_stage_is_shown_as_a_multiple_of_its_floor_with_the_biggest_excess_named():
    text = table([_with_floors(FLOORS)])
    row = next(line for line in text.splitlines() if line.startswith("| `tv:resnet18`") and "floor" not in line
               and "drop-in |" in line)  # fmt: skip
    assert "| 0.50 / 0.50 = 1.0x | 2.00 / 0.25 = 8.0x | 1.00 / 0.001 = 1000x | 6.00 / 1.50 = 4.0x |" in row
    assert "| 10.00 / 2.50 = 4.0x | to_edge_transform_and_lower (+4.50 s) | 36 |" in row
    assert "Whole time / summed floors: geomean 4.0x over 1 cases (max 4.0x)." in text
    assert "- re-export: one no-op walk over the re-exported graph." in text  # each floor's definition


def test_the_biggest_excess_is_in_seconds_not_in_multiples():
    floors = {**FLOORS, "to_edge_transform_and_lower": 5.9}  # to_edge: 1.02x but +0.1 s; quantize +1.75 s
    assert "| quantize (+1.75 s) |" in table([_with_floors(floors)])


def test_a_floor_not_measured_shows_no_multiple_and_no_whole():
    text = table([_with_floors({**FLOORS, "to_edge_transform_and_lower": None})])
    assert "| 6.00 / - |" in text
    assert "Whole time / summed floors" not in text
    assert "| quantize (+1.75 s) |" in text  # still the biggest among the measured ones


def test_records_without_floors_show_no_floor_table():
    assert "floor" not in table([_report(None)]).lower()  # JSON written before the floor column


def test_only_the_cases_with_floors_get_a_row():
    old, new = _report(None), _with_floors(FLOORS)
    old["cases"][0] = {**old["cases"][0], "model": "tv:mobilenet_v2"}
    text = table([old, new])
    assert "Stage floors" in text
    assert not any(line.startswith("| `tv:mobilenet_v2` | TOSA-1.0+INT | drop-in |") for line in text.splitlines())


def test_a_flow_without_quantization_has_no_quantize_columns():
    stages = {"export": 0.5, "to_edge_transform_and_lower": 6.0, "to_executorch": 0.5}
    floors = {"export": 0.5, "to_edge_transform_and_lower": 3.0, "to_executorch": 0.25}
    text = table([_with_floors(floors, stages)])
    assert "quantize s / floor" not in text and "re-export s / floor" not in text
    assert "| 7.00 / 3.75 = 1.9x | to_edge_transform_and_lower (+3.00 s) |" in text


def test_a_failed_floor_measurement_is_listed():
    report = _report(None)
    report["cases"][0]["sides"]["dropin"]["floor_error"] = "RuntimeError: boom"
    assert "- `tv:resnet18` TOSA-1.0+INT, drop-in: floors failed: `RuntimeError: boom`" in table([report])


def test_the_console_line_gives_the_whole_and_the_biggest_excess():
    from bench.floor_table import floor_line

    side = _with_floors(FLOORS)["cases"][0]["sides"]["dropin"]
    assert floor_line(side) == "10.00 s / floors 2.50 s = 4.0x, biggest excess to_edge_transform_and_lower +4.50 s"
    assert floor_line(_report(None)["cases"][0]["sides"]["dropin"]) is None
