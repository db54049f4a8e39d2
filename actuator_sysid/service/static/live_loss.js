
(()=>{const div=document.getElementById('live-loss'),msg=document.getElementById('live-msg');
if(!div||!msg||!window.Plotly)return;const traces={};
Plotly.newPlot(div,[],{title:{text:'best loss per generation (live)'},height:260,showlegend:true,
  xaxis:{title:{text:'generation'}},yaxis:{title:{text:'loss'},type:'log'},legend:{orientation:'h'},
  margin:{t:40,l:60,r:20,b:40}},{displaylogo:false,responsive:true});
function point(){const m=/^(.+?): generation (\d+)\/\d+, best loss ([^,]+),/.exec(msg.textContent||'');
  if(!m||!isFinite(+m[3]))return;const label=m[1];
  if(!(label in traces)){traces[label]=Object.keys(traces).length;
    Plotly.addTraces(div,{x:[],y:[],name:label,type:'scatter',mode:'lines+markers'})}
  Plotly.extendTraces(div,{x:[[+m[2]]],y:[[+m[3]]]},[traces[label]]);
  const ticks=logTicks(div.data.flatMap(t=>t.y));if(ticks)Plotly.relayout(div,ticks)}
window.addEventListener('resize',()=>Plotly.Plots.resize(div));
point();new MutationObserver(point).observe(msg,{childList:true,characterData:true,subtree:true})})();
