"""The pages' Jinja2 environment and shell: templates from service/templates/ (autoescaped), the CSS and JS files
of service/static/ inlined (a standalone report loads nothing), the filters every template shares, the page
layout and Plotly, served from /static or inlined.

Plots stay Plotly figures built as dicts by Python helpers (pages.py, report.py, robot_page.py); the templates
place their divs and the script that draws them (the `plots` macro of _macros.html). The shell is here, below
every page module, so that pages.py can read the fit kinds (kinds.py) whose pages use it."""

from __future__ import annotations

import json
import math
from functools import cache, lru_cache
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

STATIC = Path(__file__).resolve().parent / "static"


@cache
def static_text(name: str) -> str:
    """A CSS or JS source from service/static/, read once (pages inline it)."""
    return (STATIC / name).read_text(encoding="utf-8")


def script_json(obj: Any) -> str:
    """JSON for inline <script>: strict, with '</' escaped so data cannot close the script element."""
    return json.dumps(obj, allow_nan=False).replace("</", "<\\/")


def num_text(v: Any) -> str:
    """A number as a table cell's text: 4 significant digits; None as a dash; a flag as yes or no (never Python's
    True / False); anything else as text."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int | float):
        return f"{v:.4g}"
    if isinstance(v, list | dict):
        return json.dumps(v)
    return str(v)


INTERVAL_MAX = 1e6  # a 95 % bound beyond this magnitude is no bound an actuator has
INTERVAL_DECADES = 3.0  # nor are bounds of one sign further apart than this many decades
INTERVAL_WIDTH = 1e3  # nor an interval wider than this many times its estimate


def interval_unidentified(low: float, high: float, estimate: float | None = None) -> str | None:
    """Why a 95 % interval identifies nothing (a bound not finite or beyond INTERVAL_MAX, bounds of one sign
    spanning more than INTERVAL_DECADES decades, a width over INTERVAL_WIDTH times a non-zero estimate), or None
    where it is a statement worth printing."""
    lo, hi = float(low), float(high)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "unbounded"
    if lo * hi > 0 and (decades := abs(math.log10(hi / lo))) > INTERVAL_DECADES:
        return f"spans {decades:.0f} decades"
    if max(abs(lo), abs(hi)) > INTERVAL_MAX:
        return "a bound beyond 10⁶"
    if estimate is not None and estimate != 0 and hi - lo > INTERVAL_WIDTH * abs(estimate):
        return f"wider than {INTERVAL_WIDTH:.0f} × its value"
    return None


def interval_text(low: Any, high: Any, estimate: Any = None) -> str:
    """A 95 % interval as the pages print it: "[low, high]" (4 significant digits), or "not identified (why)"
    where it identifies nothing (interval_unidentified); None bounds as a dash."""
    if low is None or high is None:
        return "—"
    est = float(estimate) if isinstance(estimate, int | float) and not isinstance(estimate, bool) else None
    why = interval_unidentified(low, high, est)
    if why:
        return f"not identified ({why})"
    return f"[{num_text(low)}, {num_text(high)}]"


def interval_html(low: Any, high: Any, estimate: Any = None) -> Markup:
    """interval_text in a span that never wraps (class "iv"), marked "unidentified" where it reads not
    identified: the templates' `interval`, the one formatter of every page's intervals."""
    text = interval_text(low, high, estimate)
    cls = "iv unidentified" if text.startswith("not identified") else "iv"
    return Markup(f'<span class="{cls}">{escape(text)}</span>')


def fmt_num(v: Any) -> str:
    """num_text, HTML-escaped, for pages that still join HTML in Python (robots.py passes it to templates)."""
    return escape(num_text(v))


def status_html(status: str) -> str:
    """A fit's status as a coloured span (the CSS classes status-<status>)."""
    return f'<span class="status-{escape(status)}">{escape(status)}</span>'


SITE: dict[str, Any] = {"auth": False}
"""What the navigation shows of the serving app: `auth` (log out only where there are tokens to log out of);
create_app sets it, one app per server process."""


@lru_cache(maxsize=1)
def templates() -> jinja2.Environment:
    """The one environment of every page: service/templates/ through the package loader (an installed wheel
    carries them, pyproject's package-data), autoescape on."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("actuator_sysid.service", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        num=num_text, status=lambda s: Markup(status_html(s)), script_json=lambda o: Markup(script_json(o))
    )
    env.globals.update(inline=lambda name: Markup(static_text(name)), interval=interval_html, site=SITE)
    return env


def render(name: str, **context: Any) -> str:
    """A template of service/templates/ rendered with `context`."""
    return templates().get_template(name).render(**context)


def macro(template: str, name: str) -> Any:
    """One macro of a template, callable from Python (e.g. report.py's section tables); returns Markup."""
    return getattr(templates().get_template(template).module, name)


PLOTLY_BUNDLE = "plotly-cartesian.min.js"
"""plotly.js 4.1.1's cartesian bundle (npm plotly.js-cartesian-dist-min, MIT: plotly-cartesian.LICENSE beside
it): every trace the pages draw (scatter with error bars, bar, heatmap, log axes) in 1.5 MB where the full
plotly.min.js of the plotly package is 4.8 MB, so a page's plots appear a second sooner."""


def plotly_js_path() -> Path:
    """The Plotly bundle the pages load from /static/plotly.min.js and a standalone report inlines (no CDN)."""
    return Path(str(resources.files("actuator_sysid.service") / "static" / PLOTLY_BUNDLE))


def plotly_inline() -> Markup:
    """plotly.min.js as the text of an inline <script> (a standalone file needs no server)."""
    return Markup(plotly_js_path().read_text(encoding="utf-8").replace("</script", "<\\/script"))


def page(title: str, body: str, head: str = "", nav: bool = False) -> str:
    """A complete HTML document (templates/layout.html) around `body`, HTML that a template rendered (the
    robot pages), with the site navigation when `nav`."""
    return render("layout.html", title=title, body=Markup(body), head=Markup(head), nav=nav)


def plot_script(figures: list[dict], plotly_js: Markup | None = None) -> str:
    """Plotly (served locally, or `plotly_js` inlined) and the code drawing `figures` ({id, data, layout}) into
    their divs."""
    return str(macro("_macros.html", "plots")(figures, plotly_js))
