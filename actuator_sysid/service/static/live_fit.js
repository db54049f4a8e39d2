const FIT_ID=document.body.dataset.fit;
const es=new EventSource('/api/v1/fits/'+FIT_ID+'/events');
const bar=document.getElementById('live-progress'),pct=document.getElementById('live-pct'),
      msg=document.getElementById('live-msg'),st=document.getElementById('live-status'),logbox=document.getElementById('live-log');
es.addEventListener('progress',e=>{const d=JSON.parse(e.data);bar.value=d.progress;
  pct.textContent=Math.round(d.progress*100)+'%';msg.textContent=d.message||'';
  st.innerHTML='<span class="status-'+d.status+'">'+d.status+'</span>'});
es.addEventListener('log',e=>{const d=JSON.parse(e.data);logbox.textContent+=d.ts.slice(11,19)+' '+d.message+'\n';
  logbox.scrollTop=logbox.scrollHeight});
es.addEventListener('end',e=>{es.close();const d=JSON.parse(e.data);st.innerHTML='<span class="status-'+d.status+'">'+d.status+'</span>';
  setTimeout(()=>location.reload(),300)});
