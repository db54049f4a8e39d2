"""The pages' Jinja2 environment and shell: templates from service/templates/ (autoescaped), the CSS and JS files
of service/static/ inlined (a standalone report loads nothing), the filters every template shares, the page
layout and Plotly, served from /static or inlined.

Plots stay Plotly figures built as dicts by Python helpers (pages.py, report.py, robot_page.py); the templates
place their divs and the script that draws them (the `plots` macro of _macros.html). The shell is here, below
every page module, so that pages.py can read the fit kinds (kinds.py) whose pages use it."""

from __future__ import annotations

import json
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
    """A number as a table cell's text: 4 significant digits; None as a dash; anything else as text."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int | float):
        return f"{v:.4g}"
    if isinstance(v, list | dict):
        return json.dumps(v)
    return str(v)


def fmt_num(v: Any) -> str:
    """num_text, HTML-escaped, for pages that still join HTML in Python (robots.py passes it to templates)."""
    return escape(num_text(v))


def status_html(status: str) -> str:
    """A fit's status as a coloured span (the CSS classes status-<status>)."""
    return f'<span class="status-{escape(status)}">{escape(status)}</span>'


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
    env.globals.update(inline=lambda name: Markup(static_text(name)))
    return env


def render(name: str, **context: Any) -> str:
    """A template of service/templates/ rendered with `context`."""
    return templates().get_template(name).render(**context)


def macro(template: str, name: str) -> Any:
    """One macro of a template, callable from Python (e.g. report.py's section tables); returns Markup."""
    return getattr(templates().get_template(template).module, name)


def plotly_js_path() -> Path:
    """plotly.min.js shipped inside the installed plotly package (served locally; no CDN)."""
    return Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))


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
