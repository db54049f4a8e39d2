for (const f of FIGURES) Plotly.newPlot(f.id, f.data, f.layout, {responsive: true, displaylogo: false});
