// a running robot fit's loss, live: the lowest training RMSE each progress message states, one point per message;
// a selection's candidates each get their own curve (their messages start "select: NAME: ", the inner split's
// "select, inner split: NAME: "), the first curve being the fit itself, or the chosen configuration refitted
(()=>{const div=document.getElementById('live-loss'),msg=document.getElementById('live-msg');
if(!div||!msg||!window.Plotly)return;let n=0,last='';const traces={'':0};
Plotly.newPlot(div,[{x:[],y:[],name:'training RMSE',type:'scatter',mode:'lines+markers'}],
  {title:{text:'training RMSE (live)'},xaxis:{title:{text:'update'}},yaxis:{title:{text:'RMSE [rad]'},type:'log'},
   showlegend:false,legend:{orientation:'h',y:-0.3,yanchor:'top',font:{size:10}},margin:{t:40,l:60,r:20,b:40}},{displaylogo:false,responsive:true});
function point(){const text=msg.textContent||'';if(text===last)return;last=text;
  if(/^select\b/.test(text)&&!div.layout.showlegend){div.style.height='340px';  // the curves' names under the axis
    Plotly.update(div,{name:'chosen, refitted on the training part'},{showlegend:true,'margin.b':110},[0]);
    Plotly.Plots.resize(div)}
  const sel=/^select(, inner split)?: (.+?): (.*)$/.exec(text),body=sel?sel[3]:text;
  if(!/training RMSE/.test(body))return;
  const vals=[...body.split('training RMSE')[1].matchAll(/(\d+(?:\.\d+)?(?:e-?\d+)?) rad/g)].map(m=>+m[1]).filter(isFinite);
  if(!vals.length)return;const label=sel?(sel[1]?'inner split: ':'')+sel[2]:'';
  if(!(label in traces)){traces[label]=div.data.length;
    Plotly.addTraces(div,{x:[],y:[],name:label,type:'scatter',mode:'lines+markers'})}
  n+=1;Plotly.extendTraces(div,{x:[[n]],y:[[Math.min(...vals)]]},[traces[label]]);
  const ticks=logTicks(div.data.flatMap(t=>t.y));if(ticks)Plotly.relayout(div,ticks)}
window.addEventListener('resize',()=>Plotly.Plots.resize(div));
point();new MutationObserver(point).observe(msg,{childList:true,characterData:true,subtree:true})})();
