async function apiError(r){try{const j=await r.json();return typeof j.detail==='string'?j.detail
  :JSON.stringify(j.detail)}catch(e){return r.status+' '+r.statusText}}
// a message on the page itself (no dialog): under the page's heading
function showMessage(text){let p=document.getElementById('page-message');
  if(!p){p=document.createElement('p');p.id='page-message';p.className='error';p.setAttribute('role','alert');
    const h=document.querySelector('h1');if(h)h.after(p);else document.body.prepend(p)}p.textContent=text}
async function apiPost(url,method){const r=await fetch(url,{method:method||'POST'});
  if(!r.ok){showMessage(await apiError(r));return null}return r.json()}
// a log axis's ticks where the data are: 1-2-5 per decade, every digit where those leave fewer than three, else
// evenly spaced in log; with the range padded around the data (Plotly's own leave a narrow range unmarked)
function logTicks(values){const v=values.filter(x=>x>0&&isFinite(x));if(!v.length)return null;
  let lo=Math.min(...v)/1.15,hi=Math.max(...v)*1.15;if(hi/lo<1.5){const m=Math.sqrt(lo*hi);lo=m/1.25;hi=m*1.25}
  const pick=digits=>{const out=[];for(let e=Math.floor(Math.log10(lo));e<=Math.ceil(Math.log10(hi));e++)
    for(const d of digits){const t=d*10**e;if(t>=lo&&t<=hi)out.push(t)}return out};
  let vals=pick([1,2,5]);if(vals.length<3)vals=pick([1,2,3,4,5,6,7,8,9]);
  if(vals.length<3){vals=[];for(let k=0;k<4;k++)vals.push(+(lo*(hi/lo)**((k+0.5)/4)).toPrecision(2))}
  return {'yaxis.tickvals':vals,'yaxis.ticktext':vals.map(t=>+t.toPrecision(2)+''),'yaxis.range':[Math.log10(lo),Math.log10(hi)]}}
