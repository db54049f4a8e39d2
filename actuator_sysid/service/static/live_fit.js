const FIT_ID=document.body.dataset.fit;
const es=new EventSource('/api/v1/fits/'+FIT_ID+'/events');
const bar=document.getElementById('live-progress'),pct=document.getElementById('live-pct'),
      msg=document.getElementById('live-msg'),st=document.getElementById('live-status'),logbox=document.getElementById('live-log');
// the page's header (data-live) says what the live line says
const all=k=>document.querySelectorAll('[data-live='+k+']');
es.addEventListener('progress',e=>{const d=JSON.parse(e.data);bar.value=d.progress;
  pct.textContent=Math.round(d.progress*100)+'%';msg.textContent=d.message||'';
  st.innerHTML='<span class="status-'+d.status+'">'+d.status+'</span>';
  for(const b of all('progress'))b.value=d.progress;for(const p of all('pct'))p.textContent=pct.textContent;
  for(const m of all('msg'))m.textContent=msg.textContent;for(const s of all('status'))s.innerHTML=st.innerHTML});
es.addEventListener('log',e=>{const d=JSON.parse(e.data);logbox.textContent+=d.ts.slice(11,19)+' '+d.message+'\n';
  logbox.scrollTop=logbox.scrollHeight});
es.addEventListener('end',e=>{es.close();const d=JSON.parse(e.data);st.innerHTML='<span class="status-'+d.status+'">'+d.status+'</span>';
  setTimeout(()=>location.reload(),300)});
