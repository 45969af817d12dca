"""The error distribution of a numeric mismatch as inline SVG, for the HTML report: where
in the tensor the wrong elements are (x: flat index) and by how much (y: |difference|,
log scale; non-finite differences in a band at the top), with a one-line caption.

The profile comes from a finding file (oracles/values.py `error_profile`): numbers are
floats or text ('nan', 'inf', '(1+2j)'), and a hand-edited file may hold anything, so
everything is checked and escaped; a malformed profile gives no plot, never an error.
"""
from __future__ import annotations

import math
from html import escape

WIDTH, HEIGHT = 640, 230
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 40, 40
BAND_Y = 20            # the non-finite band, above the log axis
POINT, NONFINITE = "#c62828", "#6a1b9a"
HEAT_MAX_CELLS = 64 * 64


def as_float(x) -> float | None:
    """A profile number as a float (nan and inf included); None when it is not one."""
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, float)):
        return float(x)
    if isinstance(x, str):
        try:
            return float(x)
        except ValueError:
            return None
    return None


def _text(x) -> str:
    value = as_float(x)
    return f"{value:.6g}" if value is not None and math.isfinite(value) else str(x)


def _elements(profile: dict, numel: int) -> list[tuple[int, str, str, float | None]]:
    out = []
    for el in profile.get("elements") or ():
        if not isinstance(el, (list, tuple)) or len(el) != 4:
            continue
        index = el[0]
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < numel:
            continue
        out.append((index, _text(el[1]), _text(el[2]), as_float(el[3])))
    return out


def _finite(d: float | None) -> bool:
    return d is not None and math.isfinite(d) and d > 0


def _unravel(index: int, shape: list[int]) -> tuple[int, ...]:
    out = []
    for side in reversed(shape):
        out.append(index % side)
        index //= side
    return tuple(reversed(out))


def caption(profile: dict) -> str | None:
    numel = profile.get("numel")
    if isinstance(numel, bool) or not isinstance(numel, int) or numel < 1:
        return None
    elements = _elements(profile, numel)
    if not elements:
        return None
    # Worst: a non-finite difference (NaN where a number belongs, or an infinity), else
    # the largest one.
    worst = max(elements, key=lambda e: (not _finite(e[3]), e[3] if _finite(e[3]) else 0.0))
    mismatched = profile.get("mismatched", len(elements))
    shape = profile.get("shape")
    where = f"index {worst[0]}"
    if (isinstance(shape, list) and len(shape) > 1 and all(isinstance(s, int) and s > 0 for s in shape)
            and math.prod(shape) == numel):
        where += f" = {_unravel(worst[0], shape)}"
    words = f"{mismatched} of {numel} elements off; worst at {where} (expected {worst[1]}, got {worst[2]})"
    if isinstance(mismatched, int) and len(elements) < mismatched:
        words += f"; the first {len(elements)} plotted"
    return words


def _y_scale(values: list[float], atol: float | None):
    logs = [math.log10(v) for v in values] + ([math.log10(atol)] if atol else [])
    # A little headroom, so that a point on a power of ten does not sit on the axis.
    low, high = (math.floor(min(logs) - 0.3), math.ceil(max(logs) + 0.3)) if logs else (0, 1)
    if high <= low:
        high = low + 1
    bottom, top = HEIGHT - BOTTOM, TOP

    def y(v: float) -> float:
        return bottom - (math.log10(v) - low) / (high - low) * (bottom - top)
    return y, low, high


def _axes(y, low: int, high: int, numel: int, has_nonfinite: bool) -> list[str]:
    right, bottom = WIDTH - RIGHT, HEIGHT - BOTTOM
    parts = [f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="#555"/>',
             f'<line x1="{LEFT}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#555"/>']
    step = max(1, math.ceil((high - low) / 6))
    for decade in range(low, high + 1, step):
        yy = y(10.0 ** decade)
        parts.append(f'<line x1="{LEFT - 4}" y1="{yy:.1f}" x2="{right}" y2="{yy:.1f}" stroke="#e3e3e3"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{yy + 4:.1f}" text-anchor="end">1e{decade}</text>')
    if has_nonfinite:
        parts.append(f'<rect x="{LEFT}" y="{BAND_Y - 9}" width="{right - LEFT}" height="18" fill="#f3e5f5"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{BAND_Y + 4}" text-anchor="end" fill="{NONFINITE}">non-finite</text>')
    parts.append(f'<text x="{LEFT}" y="{HEIGHT - 8}">0</text>')
    parts.append(f'<text x="{right}" y="{HEIGHT - 8}" text-anchor="end">{numel - 1}</text>')
    parts.append(f'<text x="{(LEFT + right) / 2:.0f}" y="{HEIGHT - 8}" text-anchor="middle">flat index</text>')
    parts.append(f'<text x="14" y="{(TOP + bottom) / 2:.0f}" text-anchor="middle" '
                 f'transform="rotate(-90 14 {(TOP + bottom) / 2:.0f})">|difference|</text>')
    return parts


def scatter_svg(profile: dict) -> str | None:
    numel = profile.get("numel")
    if isinstance(numel, bool) or not isinstance(numel, int) or numel < 1:
        return None
    elements = _elements(profile, numel)
    if not elements:
        return None
    atol = as_float(profile.get("atol"))
    atol = atol if atol is not None and math.isfinite(atol) and atol > 0 else None
    y, low, high = _y_scale([e[3] for e in elements if _finite(e[3])], atol)
    has_nonfinite = any(not _finite(e[3]) for e in elements)
    parts = _axes(y, low, high, numel, has_nonfinite)
    if atol:
        parts.append(f'<line x1="{LEFT}" y1="{y(atol):.1f}" x2="{WIDTH - RIGHT}" y2="{y(atol):.1f}" '
                     f'stroke="#2e7d32" stroke-dasharray="5 4"/>')
        parts.append(f'<text x="{WIDTH - RIGHT}" y="{y(atol) - 4:.1f}" text-anchor="end" fill="#2e7d32">'
                     f'atol {atol:.3g}</text>')
    inset = 10  # index 0 off the y axis
    span = WIDTH - RIGHT - LEFT - 2 * inset
    for index, expected, actual, diff in elements:
        x = LEFT + inset + (span / 2 if numel == 1 else index / (numel - 1) * span)
        tip = f"<title>index {index}: expected {escape(expected)}, got {escape(actual)}</title>"
        if _finite(diff):
            parts.append(f'<circle class="pt" cx="{x:.1f}" cy="{y(diff):.1f}" r="3.5" fill="{POINT}" '
                         f'fill-opacity="0.75">{tip}</circle>')
        else:
            parts.append(f'<path class="nonfinite" d="M{x - 4:.1f} {BAND_Y - 4}l8 8m0 -8l-8 8" '
                         f'stroke="{NONFINITE}" stroke-width="2">{tip}</path>')
    return (f'<svg class="plot" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="error distribution">'
            + "".join(parts) + "</svg>")


def heat_grid(profile: dict) -> str | None:
    """For a tensor of 2 or more dims, its elements as a grid (rows: all dims but the
    last; columns: the last), the wrong ones coloured."""
    shape, numel = profile.get("shape"), profile.get("numel")
    if (not isinstance(shape, list) or len(shape) < 2 or not all(isinstance(s, int) and s > 0 for s in shape)
            or math.prod(shape) != numel or numel > HEAT_MAX_CELLS):
        return None
    cols, rows = shape[-1], numel // shape[-1]
    size = max(3, min(14, 200 // max(cols, rows)))
    parts = [f'<rect width="{cols * size}" height="{rows * size}" fill="#eceff1"/>']
    for index, expected, actual, diff in _elements(profile, numel):
        r, c = divmod(index, cols)
        colour = POINT if _finite(diff) else NONFINITE
        parts.append(f'<rect x="{c * size}" y="{r * size}" width="{size}" height="{size}" fill="{colour}">'
                     f"<title>index {index}: expected {escape(expected)}, got {escape(actual)}</title></rect>")
    return (f'<div class="heat"><svg width="{cols * size}" height="{rows * size}" role="img" '
            f'aria-label="wrong elements as a grid">' + "".join(parts) + "</svg>"
            f'<div class="muted">{rows} x {cols} (rows: all dims but the last)</div></div>')


def error_figure(profile) -> str:
    """The plot, the grid (2+ dims) and the caption as an HTML <figure>; '' when the
    profile cannot be drawn."""
    if not isinstance(profile, dict):
        return ""
    svg, words = scatter_svg(profile), caption(profile)
    if svg is None or words is None:
        return ""
    heat = heat_grid(profile) or ""
    return (f'<figure class="errors"><div class="plots">{svg}{heat}</div>'
            f"<figcaption>{escape(words)} ({escape(str(profile.get('dtype', '')))}, shape "
            f"{escape(str(profile.get('shape', '')))}, rtol {escape(_text(profile.get('rtol')))}, "
            f"atol {escape(_text(profile.get('atol')))})</figcaption></figure>")
