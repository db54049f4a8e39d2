// a running robot fit's loss, live: the lowest training RMSE each progress message states, one point per message
(()=>{const div=document.getElementById('live-loss'),msg=document.getElementById('live-msg');
if(!div||!msg||!window.Plotly)return;let n=0,last='';
Plotly.newPlot(div,[{x:[],y:[],name:'training RMSE',type:'scatter',mode:'lines+markers'}],
  {title:{text:'training RMSE (live)'},height:260,xaxis:{title:{text:'update'}},yaxis:{title:{text:'RMSE [rad]'},type:'log'},
   margin:{t:40,l:60,r:20,b:40}},{displaylogo:false,responsive:true});
function point(){const text=msg.textContent||'';if(text===last||!/training RMSE/.test(text))return;last=text;
  const vals=[...text.split('training RMSE')[1].matchAll(/(\d+(?:\.\d+)?(?:e-?\d+)?) rad/g)].map(m=>+m[1]).filter(isFinite);
  if(!vals.length)return;n+=1;Plotly.extendTraces(div,{x:[[n]],y:[[Math.min(...vals)]]},[0]);
  const ticks=logTicks(div.data[0].y);if(ticks)Plotly.relayout(div,ticks)}
window.addEventListener('resize',()=>Plotly.Plots.resize(div));
point();new MutationObserver(point).observe(msg,{childList:true,characterData:true,subtree:true})})();
