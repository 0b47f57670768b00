"""The text `glcnn bench` prints for a `glcnn.commands.bench.bench` report (GL-free)."""

RATIO_NOTE = ("ratio = glcnn ms / other ms, both with readback: lower is better for glcnn "
              "(> 1: glcnn is slower)")


def format_report(report: dict, top: int = 5) -> str:
    """Header, output agreement, timings with ratios, the `top` slowest layers of each
    precision and the load times, as plain text."""
    parts = [_header(report), _agreement(report["agreement"]), _timings(report)]
    for precision, result in report["glcnn"].items():
        if "layers" in result:
            parts.append(_layers(precision, result["layers"], top, report["settings"]))
        if "load" in result:
            parts.append(_load(precision, result["load"]))
    return "\n\n".join(p for p in parts if p)


def _header(report: dict) -> str:
    m, s = report["machine"], report["settings"]
    inputs = ", ".join(f"input {name!r} {tuple(shape)}" for name, shape in report["inputs"].items())
    return (f"{report['model']}: {inputs}, {report['mflops']:.1f} MFLOPs; up to "
            f"{s['runs']} runs after {s['warmup']} warm-up runs, {s['budget']:g} s budget per "
            f"measurement\n{m['renderer']} | OpenGL {m['gl_version']} | {m['cpu']}, "
            f"{m['cores']} cores | load average {m['load_average']}")


def _agreement(rows: list) -> str:
    if not rows:
        return ""
    lines = ["outputs compared before timing (scaled = max abs / max(1, max |reference|)):"]
    for r in rows:
        verdict = "ok" if r["ok"] else "MISMATCH"
        lines.append(f"  {r['a']:<26} vs {r['b']:<26} max abs {r['max_abs']:.2e}  "
                     f"scaled {r['scaled']:.2e}  {verdict} (≤ {r['tolerance']:g})")
    return "\n".join(lines)


def _timings(report: dict) -> str:
    precisions = [p for p, r in report["glcnn"].items() if "error" not in r]
    head = (f"{'implementation':<28} {'median ms':>10} {'min ms':>9} {'runs':>5} {'FPS':>8} "
            f"{'GFLOP/s':>8}")
    if report["against"]:
        head += f"  ratio ({' / '.join(precisions)})"
    lines = [head]
    for precision, result in report["glcnn"].items():
        if "error" in result:
            lines.append(f"{'glcnn ' + precision:<28} not timed: {result['error']}")
            continue
        lines.append(_row(f"glcnn {precision}", result["readback"]))
        lines.append(_row(f"glcnn {precision} no readback", result["no_readback"]))
    for name, other in report["against"].items():
        ratios = " / ".join(f"{report['ratios'][p][name]:.2f}" for p in precisions)
        lines.append(f"{_row(other['label'], other)}  {ratios}")
    return "\n".join(lines + ([RATIO_NOTE] if report["against"] else []))


def _row(label: str, t: dict) -> str:
    return (f"{label:<28} {t['median_ms']:>10.2f} {t['min_ms']:>9.2f} {t['runs']:>5} "
            f"{t['fps']:>8.1f} {t['gflops']:>8.2f}")


def slowest(layers: list, top: int) -> list:
    """The `top` layers with the largest median ms, slowest first."""
    return sorted(layers, key=lambda r: r["median_ms"], reverse=True)[:top]


def _layers(precision: str, layers: list, top: int, settings: dict) -> str:
    lines = [f"slowest {min(top, len(layers))} of {len(layers)} layers, glcnn {precision} "
             f"(each pass between two glFinish calls; median of up to {settings['runs']} runs):",
             f"  {'layer':<28} {'op':<24} {'output':<18} {'MFLOPs':>9} {'ms':>9} {'share':>6} "
             f"{'GFLOP/s':>8}"]
    rows = slowest(layers, top)
    for r, name in zip(rows, short_names([r["layer"] for r in rows], 28)):
        gflops = r["mflops"] / r["median_ms"]
        lines.append(f"  {name:<28} {r['op'][:24]:<24} {str(tuple(r['shape'])):<18} "
                     f"{r['mflops']:>9.2f} {r['median_ms']:>9.3f} {r['share']:>6.1%} "
                     f"{gflops:>8.2f}")
    return "\n".join(lines)


def short_names(names: list, width: int) -> list:
    """`names` cut to `width` characters for a table column, still telling them apart: a
    long name keeps its tail ("…/conv/conv.0/Conv": layer paths differ at their end), and
    distinct names that would still print alike end in "~1", "~2", ... instead."""
    cut = [n if len(n) <= width else "…" + n[len(n) - width + 1:] for n in names]
    alike: dict[str, list] = {}  # a cut name -> the distinct names it stands for
    for name, short in zip(names, cut):
        alike.setdefault(short, [])
        if name not in alike[short]:
            alike[short].append(name)
    out = []
    for name, short in zip(names, cut):
        if len(alike[short]) > 1:
            tag = f"~{alike[short].index(name) + 1}"
            short = short[:width - len(tag)] + tag
        out.append(short)
    return out


def _load(precision: str, load: dict) -> str:
    lines = [f"load + compile + first run in a fresh process, glcnn {precision}:"]
    for kind, note in (("cold", "Mesa shader cache and glcnn prepared-model cache off"),
                       ("warm", "both caches primed")):
        t = load[kind]
        lines.append(f"  {kind} ({note}): {t['total_ms']:.0f} ms = import {t['import_ms']:.0f}"
                     f" + load {t['load_ms']:.0f} + context {t['context_ms']:.0f} + compile "
                     f"{t['compile_ms']:.0f} ({t['programs']} programs) + first run "
                     f"{t['first_run_ms']:.0f}")
    return "\n".join(lines)
