
document.getElementById('upload').addEventListener('submit',async ev=>{ev.preventDefault();
  const out=document.getElementById('upload-msg');out.className='muted';out.textContent='uploading…';
  const r=await fetch('/api/v1/datasets',{method:'POST',body:new FormData(ev.target)});
  if(r.ok){location.href='/datasets/'+(await r.json()).id}else{out.className='form-error';out.textContent='Upload failed: '+await apiError(r)}});
document.getElementById('compare').addEventListener('click',()=>{
  const ids=[...document.querySelectorAll('input.pick:checked')].map(e=>e.value);
  if(ids.length!==2){document.getElementById('compare-error').textContent='Tick exactly two fits to compare (ticked: '+ids.length+').';return}
  location.href='/compare?a='+ids[0]+'&b='+ids[1]});
async function poll(){const r=await fetch('/api/v1/fits?limit=200');if(!r.ok)return;let active=false;
  for(const f of await r.json()){const row=document.getElementById('fit-'+f.id);if(!row)continue;
    row.querySelector('.st').innerHTML='<span class="status-'+f.status+'">'+f.status+'</span>';
    row.querySelector('progress').value=f.progress;row.querySelector('.pct').textContent=Math.round(f.progress*100)+'%';
    row.querySelector('.msg').textContent=f.error||f.message||'';active||=f.status==='queued'||f.status==='running';
    const s=f.summary,cell=row.querySelector('.verdict-cell');
    if(cell&&s&&f.status==='succeeded'&&!cell.dataset.v){cell.dataset.v=s.verdict;row.dataset.verdict=s.verdict;cell.textContent=s.verdict;
      const e=row.querySelector('.err');if(e&&s.error!==null){e.dataset.v=s.error;e.textContent=s.error.toPrecision(3)+' '+s.error_unit}}}
  if(active)setTimeout(poll,1500)}
poll();
