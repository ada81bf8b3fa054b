"""Summaries (medians, ratios), Markdown tables and a hand-written SVG chart."""

from xml.sax.saxutils import escape

from .util import GiB, MiB, median


def summarize_entry(er):
    counted = [r for r in er["runs"] if r["phase"] in ("counted", "single")]
    ok = [r for r in counted if r["ok"]]
    warm = [r for r in er["runs"] if r["phase"] == "warm-up"]
    s = {"id": er["id"], "label": er["label"], "tool": er["tool"], "group": er["group"], "size": er["size"],
         "mode": er["mode"], "note": er.get("note"),
         "ok_runs": len(ok), "total_runs": len(counted),
         "warmup_failed": sum(1 for r in warm if not r["ok"]),
         "failures": [{"phase": r["phase"], "index": r["index"], "error": r["error"],
                       "stderr_tail": (r.get("stderr_tail") or "")[-400:]} for r in er["runs"] if not r["ok"]]}
    if not ok:
        return s
    walls = [r["wall_s"] for r in ok]
    s["median_wall_s"] = median(walls)
    s["min_wall_s"], s["max_wall_s"] = min(walls), max(walls)
    s["mibps"] = er["size"] / MiB / s["median_wall_s"]
    s["median_cpu_s"] = median([r["cpu_s"] for r in ok])
    machine = [r["machine_cpu_s"] for r in ok if r.get("machine_cpu_s") is not None]
    if machine and len(machine) == len(ok):
        s["median_machine_cpu_s"] = median(machine)
    s["cpu_per_gib"] = s["median_cpu_s"] / (er["size"] / GiB)
    s["median_rss_mib"] = median([r["maxrss_kib"] for r in ok]) / 1024.0
    s["max_rss_mib"] = max(r["maxrss_kib"] for r in ok) / 1024.0
    s["median_sync_s"] = median([r.get("sync_s", 0.0) for r in ok])
    s["median_wall_sync_s"] = median([r["wall_s"] + r.get("sync_s", 0.0) for r in ok])
    s["mibps_with_sync"] = er["size"] / MiB / s["median_wall_sync_s"]
    if er.get("ideal_mibps"):
        s["ideal_mibps"] = er["ideal_mibps"]
        s["ideal_label"] = er.get("ideal_label")
        s["pct_ideal"] = 100.0 * s["mibps"] / er["ideal_mibps"]
    stray = [r for r in counted if r.get("extra_files_total")]
    if stray:
        worst = max(stray, key=lambda r: r["extra_files_total"])
        s["stray_files_max"] = worst["extra_files_total"]
        s["stray_example"] = worst["extra_files"][0]
    sw = [r.get("swoop") or {} for r in ok]
    conns = [x["connections"] for x in sw if isinstance(x.get("connections"), int)]
    if conns:
        s["swoop_connections"] = median(conns)
        s["swoop_requests"] = median([x["requests"] for x in sw if isinstance(x.get("requests"), int)] or [0])
        s["swoop_retries_max"] = max([x["retries"] for x in sw if isinstance(x.get("retries"), int)] or [0])
    settled = [x["settledConnections"] for x in sw if isinstance(x.get("settledConnections"), int)]
    if settled:
        s["swoop_settled"] = sorted(settled)
    # Bytes fetched twice on purpose (each response's overlap with its neighbours), per object byte.
    compared = [x["comparedBytes"] / x["bytes"] for x in sw
                if isinstance(x.get("comparedBytes"), int) and isinstance(x.get("bytes"), int) and x["bytes"] > 0]
    if compared:
        s["swoop_compared_pct"] = 100.0 * median(compared)
        s["swoop_compared_pct_max"] = 100.0 * max(compared)
    # Several addresses of one name (S12): Swoop's bytes per address in the run of median wall time.
    with_addresses = [r for r in ok if any(isinstance(x, dict) and x.get("address")
                                           for x in (r.get("swoop") or {}).get("sources") or [])]
    if with_addresses:
        mid = sorted(with_addresses, key=lambda r: r["wall_s"])[(len(with_addresses) - 1) // 2]
        s["swoop_sources_median_run"] = [
            {"address": x.get("address"), "bytes": x.get("bytes"), "state": x.get("state")}
            for x in mid["swoop"]["sources"] if isinstance(x, dict)]
        s["swoop_sources_by_run"] = [
            {x.get("address"): x.get("bytes") for x in r["swoop"]["sources"] if isinstance(x, dict)}
            for r in with_addresses]
    # Servers' own accounting (S12's access logs): which address served the tool, and the 503s.
    logged = [r["edges"] for r in ok if r.get("edges")]
    if logged:
        patterns = {}
        for edges in logged:
            # An address counts as serving a run when it sent at least 1% of the object.
            used = tuple(a for a, x in edges.items() if x["bytes"] >= er["size"] / 100)
            patterns[used] = patterns.get(used, 0) + 1
        s["served_by"] = [{"addresses": list(k), "runs": n} for k, n in sorted(patterns.items(), key=lambda kv: -kv[1])]
        s["status_503_median"] = median([sum(x["status_503"] for x in edges.values()) for edges in logged])
        s["status_503_max"] = max(sum(x["status_503"] for x in edges.values()) for edges in logged)
        s["requests_median"] = median([sum(x["requests"] for x in edges.values()) for edges in logged])
    return s


# Rows that are references, not peers: never a "best peer" (S9's floor of Swoop's own parts and the
# file system's own limit, S6's dd of the same bytes, the disk's limit).
REFERENCES = ("lane-floor", "fs-limit", "dd")


def summarize(scenario_result):
    sums = [summarize_entry(er) for er in scenario_result["entries"]]
    by_id = {s["id"]: s for s in sums}
    for s in sums:
        if s["tool"] != "swoop" or not s.get("ok_runs"):
            continue
        peers = [p for p in sums if p["tool"] not in ("swoop",) + REFERENCES and p["group"] == s["group"]
                 and p.get("ok_runs")]
        if peers:
            best = max(peers, key=lambda p: p["mibps"])
            # Swoop's wall time / the best peer's, at equal size (computed from throughput, so a peer run
            # on a smaller object, like curl in S3a, compares fairly).
            s["best_peer"] = best["label"]
            s["ratio_vs_best_peer"] = best["mibps"] / s["mibps"]
            best_sync = max(peers, key=lambda p: p["mibps_with_sync"])
            s["ratio_vs_best_peer_with_sync"] = best_sync["mibps_with_sync"] / s["mibps_with_sync"]
    return sums, by_id


def _mib(nbytes):
    if nbytes is None:
        return "?"
    mib = nbytes / MiB
    return "%.0f MiB" % mib if mib >= 10 or mib == 0 else "%.1f MiB" % mib


def _f(value, digits=2):
    return "–" if value is None else ("%.*f" % (digits, value))


def scenario_markdown(sr, sums, targets):
    lines = ["### %s — %s" % (sr["name"], sr["title"]), "", sr["description"], ""]
    if sr.get("runs_floor"):
        lines += ["%d counted runs per tool at least: %s" % (sr["runs_floor"], sr.get("runs_floor_why", "")), ""]
    if sr.get("run"):
        r = sr["run"]
        lines += ["From a separate run merged into this report (`--merge`): %s, Swoop %s, %s warm-up run per tool, "
                  "%d counted run%s per tool%s; load average at start %s, at end %s." % (
                      r["date"], r["swoop_version"], "one" if r.get("warmup") else "no", r["runs"],
                      "" if r["runs"] == 1 else "s", " (quick mode)" if r.get("quick") else "",
                      "/".join(r.get("loadavg_start") or ["?"]), "/".join(r.get("loadavg_end") or ["?"])), ""]
    if sr.get("origin"):
        lines += ["Origin: %s." % sr["origin"], ""]
    if sr.get("error") and not sums:
        lines += ["**Scenario failed:** %s" % sr["error"], ""]
        return "\n".join(lines)
    has_ideal = any(s.get("ideal_mibps") for s in sums)
    machine = bool(sr.get("machine_cpu"))
    head = ["Tool", "Median wall s (min–max)", "MiB/s", "CPU s", "CPU s/GiB"] + (["Machine CPU s"] if machine else []) + [
            "Peak RSS MiB", "+fsync s", "Runs OK", "Swoop ÷ best peer"]
    if has_ideal:
        head.append("% of ideal")
    head.append("Notes")
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join(["---"] + ["--:"] * (len(head) - 2) + ["---"]) + "|")
    for s in sums:
        name = ("**%s**" % s["label"]) if s["tool"] == "swoop" else s["label"]
        notes = []
        if s.get("swoop_connections") is not None:
            notes.append("%g conns, %g requests, %d retries max" % (
                s["swoop_connections"], s["swoop_requests"], s["swoop_retries_max"]))
        if s.get("swoop_settled"):
            notes.append("settled on %s" % "/".join(str(n) for n in s["swoop_settled"]))
        if s.get("swoop_compared_pct") is not None:
            notes.append("overlap compared %.3f%% of the bytes (max %.3f%%)" % (
                s["swoop_compared_pct"], s["swoop_compared_pct_max"]))
        if s.get("swoop_sources_median_run"):
            notes.append("bytes by address (median run): " + ", ".join(
                "%s %s%s" % (x["address"], _mib(x["bytes"]), "" if x["state"] in (None, "used") else " (%s)" % x["state"])
                for x in s["swoop_sources_median_run"]))
        if s.get("served_by"):
            n = sum(p["runs"] for p in s["served_by"])
            if s["tool"] != "swoop" or len(s["served_by"]) > 1 or len(s["served_by"][0]["addresses"]) < 2:
                notes.append("served by " + "; ".join(
                    "%s (%d/%d runs)" % (" + ".join(p["addresses"]) or "none", p["runs"], n) for p in s["served_by"]))
            notes.append("%g request%s, %g got 503 (median per run%s)" % (
                s["requests_median"], "" if s["requests_median"] == 1 else "s", s["status_503_median"],
                ", max %d" % s["status_503_max"] if s["status_503_max"] != s["status_503_median"] else ""))
        if s.get("note"):
            notes.append(s["note"])
        if s.get("stray_files_max"):
            notes.append("left up to %d stray file(s) in the output directory, e.g. %s" % (
                s["stray_files_max"], s["stray_example"]))
        if s["size"] != sums[0]["size"] and not s.get("note") and "MiB" not in s["label"] and "GiB" not in s["label"]:
            notes.append("%d MiB object" % (s["size"] // MiB))
        if s.get("warmup_failed"):
            notes.append("warm-up failed")
        if not s.get("ok_runs"):
            row = [name] + ["–"] * (7 if machine else 6) + ["%d/%d" % (s["ok_runs"], s["total_runs"]), "–"]
            if has_ideal:
                row.append("–")
            row.append("; ".join(notes + ["all runs failed"]))
            lines.append("| " + " | ".join(row) + " |")
            continue
        ratio = "–"
        if s.get("ratio_vs_best_peer") is not None:
            ratio = "%.2f× (%.2f× incl. fsync) vs %s" % (s["ratio_vs_best_peer"], s["ratio_vs_best_peer_with_sync"],
                                                       s["best_peer"])
        row = [name,
               "%s (%s–%s)" % (_f(s["median_wall_s"]), _f(s["min_wall_s"]), _f(s["max_wall_s"])),
               _f(s["mibps"], 1), _f(s["median_cpu_s"]), _f(s["cpu_per_gib"])] + (
                  [_f(s.get("median_machine_cpu_s"))] if machine else []) + [_f(s["median_rss_mib"], 1),
               _f(s["median_sync_s"]), "%d/%d" % (s["ok_runs"], s["total_runs"]), ratio]
        if has_ideal:
            row.append("%.1f%%" % s["pct_ideal"] if s.get("pct_ideal") is not None else "–")
        row.append("; ".join(notes))
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    ideals = []
    for s in sums:
        if s.get("ideal_label") and s["ideal_label"] not in ideals:
            ideals.append(s["ideal_label"])
    if ideals:
        lines.append("- %% of ideal: median MiB/s over %s." % " / ".join(ideals))
    for t in sr.get("skipped", []):
        lines.append("- Not run: %s — %s." % (t["label"], t["why"]))
    for text, met in targets:
        verdict = "" if met is None else (" — **met**" if met else " — **missed**")
        lines.append("- %s: %s%s" % ("Measured" if met is None else "Target", text, verdict))
    for s in sums:
        for f in s["failures"]:
            where = "warm-up" if f["phase"] == "warm-up" else "%s run %d" % (f["phase"], f["index"])
            tail = f["stderr_tail"].strip().splitlines()[-1] if f["stderr_tail"].strip() else ""
            lines.append("- **Failed:** %s, %s: %s%s" % (s["label"], where, f["error"], (" (`%s`)" % tail[:200]) if tail else ""))
    if sr.get("error"):
        lines.append("- **Scenario error:** %s" % sr["error"])
    lines.append("")
    return "\n".join(lines)


def markdown(doc):
    m = doc["meta"]
    out = ["## Results (%s)" % m["date"], "",
           "Machine: %s. Swoop %s. Peers: %s. Origin: %s." % (
               m["machine"], m["swoop_version"], ", ".join(m["peer_versions"]), m["nginx_version"]),
           "",
           "Each scenario: %s warm-up run per tool (not counted), then %d counted run%s per tool (more where a "
           "scenario names a floor, said under its heading), tools alternating in a balanced order (each runs "
           "right after every other equally often). Medians of the successful counted runs. "
           "MiB/s = object size / median wall time. CPU = "
           "user + sys of the tool's process and peak RSS = its ru_maxrss, from wait4 (via the tiny rusage-exec "
           "launcher, so the harness's own memory is not counted). \"+fsync s\" is the time the harness "
           "then needed to fsync the output (Swoop fsyncs before it exits; the peers do not). \"Swoop ÷ best peer\" is "
           "Swoop's wall time over the fastest peer's at equal size: < 1 means Swoop is faster." % (
               "one" if m["warmup"] else "no", m["runs"], "" if m["runs"] == 1 else "s"),
           ""]
    if m.get("quick"):
        out += ["**Quick mode** (`--quick`): small objects and %d counted run%s — a smoke test of the harness, "
                "not a measurement." % (m["runs"], "" if m["runs"] == 1 else "s"), ""]
    if m.get("load_note"):
        out += [m["load_note"], ""]
    merged = [sr["name"] for sr in doc["scenarios"] if sr.get("run")]
    if merged:
        out += ["%s come%s from a separate run merged in with `--merge` (its date and conditions are under %s); "
                "the rest from the run above." % (", ".join(merged), "s" if len(merged) == 1 else "",
                                                   "its heading" if len(merged) == 1 else "their headings"), ""]
    for sr in doc["scenarios"]:
        out.append(sr["markdown"])
    return "\n".join(out).rstrip() + "\n"


# --- SVG -----------------------------------------------------------------------------------------

SWOOP_COLOR = "#1f6feb"
PEER_COLORS = {"aria2c": "#57606a", "axel": "#8c959f", "curl": "#b6bec8"}


def svg(doc):
    width = 900
    left = 255          # label column
    bar_max = 310       # longest bar
    bar_h, gap, group_gap, head_h = 18, 5, 16, 22
    m = doc["meta"]
    rows = []
    y = 100
    for sr in doc["scenarios"]:
        sums = sr.get("summary") or []
        if not sums:
            continue
        top = max([s.get("mibps") or 0 for s in sums] + [s.get("ideal_mibps") or 0 for s in sums]) or 1.0
        rows.append(("head", y, sr, top))
        y += head_h
        first = y
        for s in sums:
            rows.append(("bar", y, s, top))
            y += bar_h + gap
        # Dashed ideal marks, drawn first (behind the bars and labels), over the rows that have one.
        marks = [("ideal", first + i * (bar_h + gap), (s["ideal_mibps"], first + i * (bar_h + gap) + bar_h), top)
                 for i, s in enumerate(sums) if s.get("ideal_mibps") and s.get("ok_runs")]
        rows[len(rows) - len(sums):len(rows) - len(sums)] = marks
        y += group_gap
    height = y + 30
    p = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
         'font-family="Helvetica, Arial, sans-serif" font-size="12">' % (width, height, width, height),
         '<rect width="100%" height="100%" fill="#ffffff"/>',
         '<text x="16" y="26" font-size="17" font-weight="bold" fill="#1f2328">%s</text>' % escape(
             "Swoop vs aria2c, axel, curl — %s" % m["date"][:10]),
         '<text x="16" y="46" fill="#57606a">%s</text>' % escape(m["machine"]),
         '<text x="16" y="63" fill="#57606a">%s</text>' % escape(
             "MiB/s = object size / median wall time (higher is better); each scenario has its own scale; "
             "\"N× best peer's time\" < 1 means Swoop was faster."),
         '<g transform="translate(16,76)">'
         '<rect width="12" height="12" fill="%s"/><text x="17" y="10">Swoop</text>'
         '<rect x="70" width="12" height="12" fill="%s"/><text x="87" y="10">aria2c</text>'
         '<rect x="140" width="12" height="12" fill="%s"/><text x="157" y="10">axel</text>'
         '<rect x="200" width="12" height="12" fill="%s"/><text x="217" y="10">curl</text>'
         '<line x1="262" y1="6" x2="282" y2="6" stroke="#cf222e" stroke-dasharray="4 3"/>'
         '<text x="287" y="10">ideal / ceiling</text></g>' % (
             SWOOP_COLOR, PEER_COLORS["aria2c"], PEER_COLORS["axel"], PEER_COLORS["curl"])]
    if m.get("quick"):
        p.append('<text x="%d" y="26" text-anchor="end" fill="#cf222e" font-weight="bold">quick mode: smoke test</text>'
                 % (width - 16))
    for kind, y, item, top in rows:
        if kind == "ideal":
            ideal, bottom = item
            ix = left + bar_max * ideal / top
            p.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#cf222e" stroke-dasharray="4 3"/>' % (
                ix, y - gap / 2.0, ix, bottom + gap / 2.0))
            continue
        if kind == "head":
            head = "%s  %s" % (item["name"], item["title"])
            if item.get("run"):
                head += "  (run of %s)" % item["run"]["date"]
            p.append('<text x="16" y="%d" font-size="13" font-weight="bold" fill="#1f2328">%s</text>' % (
                y + 14, escape(head)))
            p.append('<line x1="16" y1="%d" x2="%d" y2="%d" stroke="#d0d7de"/>' % (y + 18, width - 16, y + 18))
            continue
        s = item
        swoop = s["tool"] == "swoop"
        color = SWOOP_COLOR if swoop else PEER_COLORS.get(s["tool"], "#8c959f")
        label = s["label"]
        if s.get("mode") == "single":
            label += " (1 run)"
        p.append('<text x="%d" y="%d" text-anchor="end" fill="#1f2328"%s>%s</text>' % (
            left - 8, y + 13, ' font-weight="bold"' if swoop else "", escape(label[:42])))
        if not s.get("ok_runs"):
            p.append('<text x="%d" y="%d" fill="#cf222e">failed (%d/%d runs OK)</text>' % (
                left, y + 13, s["ok_runs"], s["total_runs"]))
            continue
        w = max(1.0, bar_max * s["mibps"] / top)
        p.append('<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s" rx="2"/>' % (left, y, w, bar_h, color))
        value = "%.1f MiB/s" % s["mibps"] if s["mibps"] < 100 else "%.0f MiB/s" % s["mibps"]
        extra = []
        if s.get("pct_ideal") is not None:
            extra.append("%.0f%% of ideal" % s["pct_ideal"])
        if s.get("ratio_vs_best_peer") is not None:
            extra.append("%.2f× best peer's time" % s["ratio_vs_best_peer"])
        if s["ok_runs"] < s["total_runs"]:
            extra.append("%d/%d OK" % (s["ok_runs"], s["total_runs"]))
        text = "  ·  ".join([value] + extra)
        p.append('<text x="%.1f" y="%d" fill="#1f2328" stroke="#ffffff" stroke-width="3" paint-order="stroke">%s</text>'
                 % (left + w + 6, y + 13, escape(text)))
    p.append('<text x="16" y="%d" fill="#57606a" font-size="11">%s</text>' % (
        height - 12, escape("Generated by Benchmarks/run; data in Benchmarks/results/latest.json.")))
    p.append("</svg>")
    return "\n".join(p) + "\n"


# --- A/B (run --ab-baseline): the same Swoop variants, the baseline's binary and this one -----------

def _per_round_ratios(before, after):
    """after ÷ before wall time for each counted round in which both sides succeeded (the two ran
    minutes apart at most, so a drift in the machine's speed mostly cancels in each ratio)."""
    b = {r["index"]: r["wall_s"] for r in before["runs"] if r["phase"] == "counted" and r["ok"]}
    a = {r["index"]: r["wall_s"] for r in after["runs"] if r["phase"] == "counted" and r["ok"]}
    return [a[i] / b[i] for i in sorted(b) if i in a and b[i] > 0]


def ab_summarize(scenario_result, sums):
    """One row per Swoop variant: its before and after summaries (summarize_entry's), after ÷ before
    of the median wall time and of the median CPU time, and the per-round ratios."""
    entries = {er["id"]: er for er in scenario_result["entries"]}
    by_id = {s["id"]: s for s in sums}
    rows = []
    for er in scenario_result["entries"]:
        variant, side = er.get("ab") or (None, None)
        if side != "before":
            continue
        after_id = er["id"][:-len("before")] + "after"
        b, a = by_id[er["id"]], by_id.get(after_id)
        if a is None:
            continue
        row = {"variant": variant, "label": er["label"][:-len(", before")], "before": er["id"], "after": after_id,
               "before_ok": "%d/%d" % (b["ok_runs"], b["total_runs"]), "after_ok": "%d/%d" % (a["ok_runs"], a["total_runs"])}
        if b.get("ok_runs") and a.get("ok_runs"):
            row["ratio_wall"] = a["median_wall_s"] / b["median_wall_s"]
            if b["median_cpu_s"] > 0:
                row["ratio_cpu"] = a["median_cpu_s"] / b["median_cpu_s"]
            rounds = _per_round_ratios(er, entries[after_id])
            if rounds:
                row["round_ratios"] = [round(x, 4) for x in rounds]
                row["median_round_ratio"] = median(rounds)
            # With 5 runs a side, every after run landing above every before run happens by chance
            # once in 252 (1 / C(10, 5)) when the two binaries are the same; with 3, once in 20.
            if min(b["ok_runs"], a["ok_runs"]) < 5:
                row["reading"] = "fewer than 5 runs: no reading"
            elif a["min_wall_s"] > b["max_wall_s"]:
                row["reading"] = "**after slower**: every after run slower than every before run"
            elif a["max_wall_s"] < b["min_wall_s"]:
                row["reading"] = "after faster: every after run faster than every before run"
            else:
                row["reading"] = "ranges overlap"
        rows.append(row)
    return rows


def ab_scenario_markdown(sr, sums, rows):
    lines = ["### %s — %s" % (sr["name"], sr["title"]), ""]
    if sr.get("origin"):
        lines += ["Origin: %s." % sr["origin"], ""]
    if sr.get("error") and not sums:
        lines += ["**Scenario failed:** %s" % sr["error"], ""]
        return "\n".join(lines)
    by_id = {s["id"]: s for s in sums}

    def wall(s):
        if not s.get("ok_runs"):
            return "all runs failed"
        return "%s (%s–%s)" % (_f(s["median_wall_s"], 3), _f(s["min_wall_s"], 3), _f(s["max_wall_s"], 3))

    def pair(b, a, key, digits=2, scale=1.0):
        f = lambda s: _f(s[key] / scale, digits) if s.get("ok_runs") else "–"  # noqa: E731
        return "%s → %s" % (f(b), f(a))

    head = ["Swoop variant", "Before: wall s (min–max)", "After: wall s (min–max)", "After ÷ before",
            "Per-round ratios (median, min–max)", "CPU s", "Peak RSS MiB", "+fsync s", "Runs OK (before, after)",
            "Reading"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join(["---"] + ["--:"] * (len(head) - 2) + ["---"]) + "|")
    for row in rows:
        b, a = by_id[row["before"]], by_id[row["after"]]
        ratio = "–"
        if row.get("ratio_wall") is not None:
            ratio = "**%.3f×**" % row["ratio_wall"]
            if row.get("ratio_cpu") is not None:
                ratio += " (CPU %.2f×)" % row["ratio_cpu"]
        rounds = "–"
        if row.get("round_ratios"):
            rr = row["round_ratios"]
            rounds = "%.3f (%.3f–%.3f)" % (row["median_round_ratio"], min(rr), max(rr)) if len(rr) > 1 else "%.3f" % rr[0]
        lines.append("| " + " | ".join([
            row["label"], wall(b), wall(a), ratio, rounds,
            pair(b, a, "median_cpu_s"), pair(b, a, "median_rss_mib", 1), pair(b, a, "median_sync_s"),
            "%s, %s" % (row["before_ok"], row["after_ok"]), row.get("reading", "–")]) + " |")
    lines.append("")
    for t in sr.get("skipped", []):
        lines.append("- Not run: %s — %s." % (t["label"], t["why"]))
    for s in sums:
        for f in s["failures"]:
            where = "warm-up" if f["phase"] == "warm-up" else "%s run %d" % (f["phase"], f["index"])
            tail = f["stderr_tail"].strip().splitlines()[-1] if f["stderr_tail"].strip() else ""
            lines.append("- **Failed:** %s, %s: %s%s" % (s["label"], where, f["error"], (" (`%s`)" % tail[:200]) if tail else ""))
    if sr.get("error"):
        lines.append("- **Scenario error:** %s" % sr["error"])
    lines.append("")
    return "\n".join(lines)


def ab_markdown(doc):
    m = doc["meta"]
    ab = m["ab"]
    out = ["## A/B: Swoop before and after (%s)" % m["date"], "",
           "Machine: %s. Before: %s. After: %s. Origin: %s; %s." % (
               m["machine"], ab["before"], ab["after"], m["nginx_version"], ab["test_origin"]),
           "",
           "Each scenario: %s warm-up run of each side (not counted), then %d counted round%s in which every Swoop "
           "variant runs with both binaries, interleaved: the variants rotate round-robin (each round starts one "
           "variant later) and the two sides of a variant take turns going first. Same origins, objects, fsync and "
           "checks (size and SHA-256 of every output) for both; the peers are not run. Wall time and CPU "
           "(user + sys) and peak RSS of the tool's process, from wait4; medians of the successful counted runs. "
           "**After ÷ before** is the after binary's median wall time over the before binary's: > 1 means after "
           "is slower. Per-round ratios pair the two sides of each round (they ran seconds apart). \"Reading\": "
           "whether the two sides' min–max ranges overlap (with at least 5 runs each; when the binaries are the same, "
           "one side entirely above the other happens by chance once in 252 at 5 runs)." % (
               "one" if m["warmup"] else "no", m["runs"], "" if m["runs"] == 1 else "s"),
           ""]
    if m.get("quick"):
        out += ["**Quick mode** (`--quick`): small objects — a smoke test of the harness, not a measurement.", ""]
    if m.get("load_note"):
        out += [m["load_note"], ""]
    for sr in doc["scenarios"]:
        out.append(sr["markdown"])
    return "\n".join(out).rstrip() + "\n"
