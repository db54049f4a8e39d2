document.getElementById('preset').addEventListener('change',ev=>{const p=PRESETS[ev.target.value];if(!p)return;
  for(const k of ['generations','population'])document.getElementById(k).value=p[k];
  document.getElementById('budget_s').value=p.seconds;
  if(p.models)for(const b of document.querySelectorAll('input[name=model]'))b.checked=p.models.includes(b.value)});
// the request's words for each form field, longest first: a message names its field, the error goes beside it
const FIELD_WORDS=[['budget.generations','generations'],['budget.population','population'],['budget.seconds','budget_s'],
  ['generations','generations'],['population','population'],['folds_by','folds_by'],['folds by','folds_by'],
  ['holdout','holdout'],['folds','folds'],['decimation','decimation'],['networks','networks'],['effort mode','effort_mode'],
  ['effort_mode','effort_mode'],['famil','models'],['models','models'],['joint','joints'],['seed','seed']];
function fieldOf(msg){let best=null,at=Infinity;
  for(const [w,id] of FIELD_WORDS){const i=msg.indexOf(w);if(i>=0&&i<at){at=i;best=id}}return best}
function clearFitErrors(){for(const e of document.querySelectorAll('#fit-settings .field-error')){e.textContent='';e.hidden=true}
  for(const e of document.querySelectorAll('#fit-settings .invalid'))e.classList.remove('invalid');
  document.getElementById('fit-error').textContent=''}
function showFitError(msg,field){const id=field||fieldOf(msg),el=id&&document.getElementById('err-'+id);
  if(!el){document.getElementById('fit-error').textContent='Fit not started: '+msg;return}
  el.textContent=msg;el.hidden=false;const input=document.getElementById(id);
  if(input&&input.classList){input.classList.add('invalid');if(input.focus)input.focus()}
  if(id==='networks')el.closest('details').open=true}
// the bounds the form carries are the request's (fitting/request.py BOUNDS): check them before sending
function boundsError(){for(const input of document.querySelectorAll('#fit-settings input[type=number]')){
  const v=input.validity,name=input.dataset.name||input.id;if(v.valid)continue;
  if(v.rangeUnderflow||v.rangeOverflow)return [input.id,`${name} must be between ${input.min} and ${input.max}, got ${input.value}`];
  if(v.stepMismatch)return [input.id,`${name} must be a whole number, got ${input.value}`];
  return [input.id,`${name} must be a number`]}return null}
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
    catch(e){throw Object.assign(new Error('networks: not valid JSON ('+e.message+')'),{field:'networks'})}}
  return body}
for(const b of document.querySelectorAll('button.start-fit')){b.addEventListener('click',async()=>{
  clearFitErrors();const bad=boundsError();if(bad){showFitError(bad[1],bad[0]);return}
  let body;try{body=fitBody(b.dataset.id)}catch(e){showFitError(e.message,e.field);return}
  const r=await fetch('/api/v1/fits',{method:'POST',headers:{'Content-Type':'application/json'},
    body:JSON.stringify(body)});
  if(r.ok){location.href='/fits/'+(await r.json()).id}else{showFitError(await apiError(r))}})}
for(const b of document.querySelectorAll('button.delete-dataset')){b.addEventListener('click',async()=>{
  if(!confirm('Delete dataset '+b.dataset.name+' and all its fits? This cannot be undone.'))return;
  let r=await fetch('/api/v1/datasets/'+b.dataset.id,{method:'DELETE'});
  if(r.status===409){const msg=await apiError(r);
    if(!confirm(msg+'\n\nCancel those fits and delete anyway?'))return;
    r=await fetch('/api/v1/datasets/'+b.dataset.id+'?force=true',{method:'DELETE'})}
  if(r.ok){location.href='/'}else{showMessage('Not deleted: '+await apiError(r))}})}
