// Draw FIGURES (or the figures GET FIGURES_URL answers) into their divs with Plotly. Plotly inlined (a standalone
// file) draws at once; else PLOTLY_URL loads after the page's load event, so the tables show first, while the
// figures are fetched alongside. The plots in view are drawn first, the rest after. A plot that cannot be drawn
// says why.
(() => {
  const figures = FIGURES !== null ? Promise.resolve(FIGURES)
    : fetch(FIGURES_URL, {headers: {Accept: 'application/json'}}).then(r => {
      if (!r.ok) throw new Error(`the figures did not load (HTTP ${r.status})`);
      return r.json();
    });
  figures.catch(() => {});  // reported once the page has loaded (start), not as an unhandled rejection
  const plotly = () => window.Plotly ? Promise.resolve() : new Promise((done, fail) => {
    const s = document.createElement('script');
    s.src = PLOTLY_URL;
    s.onload = done;
    s.onerror = () => fail(new Error('Plotly did not load'));
    document.head.appendChild(s);
  });
  // the plots in (or near) the window first, each painted before the next, then the rest in the page's order
  const near = f => { const d = document.getElementById(f.id); if (!d) return false;
    const r = d.getBoundingClientRect(); return r.bottom > -200 && r.top < innerHeight + 200; };
  const frame = () => new Promise(done => requestAnimationFrame(() => setTimeout(done, 0)));
  const draw = async figs => {
    const first = figs.filter(near), rest = figs.filter(f => !near(f));
    for (const f of first) Plotly.newPlot(f.id, f.data, f.layout, {responsive: true, displaylogo: false});
    performance.mark('plots-in-view');
    for (const f of rest) {
      await frame();
      Plotly.newPlot(f.id, f.data, f.layout, {responsive: true, displaylogo: false});
    }
    performance.mark('plots-drawn');
  };
  const failed = e => {
    for (const div of document.querySelectorAll('.plot')) {
      if (div.querySelector('.main-svg') || div.id === 'live-loss') continue;
      const p = document.createElement('p');
      p.className = 'error';
      p.textContent = `${div.getAttribute('aria-label') || 'plot'}: not drawn: ${e.message}`;
      div.replaceChildren(p);
    }
  };
  const start = () => Promise.all([figures, plotly()]).then(([figs]) => draw(figs)).catch(failed);
  if (window.Plotly || document.readyState === 'complete') start();
  else window.addEventListener('load', start, {once: true});
})();
