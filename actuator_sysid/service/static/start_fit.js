document.getElementById('preset').addEventListener('change',ev=>{const p=PRESETS[ev.target.value];if(!p)return;
  for(const k of ['generations','population'])document.getElementById(k).value=p[k];
  document.getElementById('budget_s').value=p.seconds;
  if(p.models)for(const b of document.querySelectorAll('input[name=model]'))b.checked=p.models.includes(b.value)});
function fitBody(id){
  const val=k=>document.getElementById(k).value.trim();
  const models=[...document.querySelectorAll('input[name=model]:checked')].map(e=>e.value);
  const budget={generations:+val('generations'),population:+val('population')};
  if(val('budget_s'))budget.seconds=+val('budget_s');
  const body={dataset_id:id,families:models,seed:+val('seed'),budget,effort_mode:val('effort_mode')};
  if(val('decimation')&&+val('decimation')!==1)body.decimation=+val('decimation');
  if(val('joints'))body.joints=val('joints').split(',').map(s=>s.trim()).filter(s=>s);
  for(const k of ['holdout','folds_by'])if(val(k))body[k]=val(k);
  if(val('folds'))body.folds=+val('folds');
  if(val('networks')){try{body.networks=JSON.parse(val('networks'))}
    catch(e){throw new Error('networks: not valid JSON ('+e.message+')')}}
  return body}
for(const b of document.querySelectorAll('button.start-fit')){b.addEventListener('click',async()=>{
  let body;try{body=fitBody(b.dataset.id)}catch(e){alert('Fit not started: '+e.message);return}
  const r=await fetch('/api/v1/fits',{method:'POST',headers:{'Content-Type':'application/json'},
    body:JSON.stringify(body)});
  if(r.ok){location.href='/fits/'+(await r.json()).id}else{alert('Fit not started: '+await apiError(r))}})}
for(const b of document.querySelectorAll('button.delete-dataset')){b.addEventListener('click',async()=>{
  if(!confirm('Delete dataset '+b.dataset.name+' and all its fits? This cannot be undone.'))return;
  let r=await fetch('/api/v1/datasets/'+b.dataset.id,{method:'DELETE'});
  if(r.status===409){const msg=await apiError(r);
    if(!confirm(msg+'\n\nCancel those fits and delete anyway?'))return;
    r=await fetch('/api/v1/datasets/'+b.dataset.id+'?force=true',{method:'DELETE'})}
  if(r.ok){location.href='/'}else{alert('Not deleted: '+await apiError(r))}})}
