// the robot fit form: bounds checked from the request's schema before sending, every error beside its field
(()=>{const form=document.getElementById('robot-fit'),out=document.getElementById('robot-fit-msg');
// the request's words for each field, longest first: a server message names its field, the error goes beside it
const WORDS=[['budget_s','budget_s'],['budget','budget_s'],['max_delay','max_delay'],['iterations','iterations'],['window_s','window_s'],['tags','tags'],['tag ','tags'],['run name','name'],['validation_fraction','validation_fraction'],
  ['payload_com','payload'],['payload','payload'],['holdout','holdout'],['decimation','decimation'],['effort_mode','effort_mode'],
  ['bias_limit','bias_limit'],['groups','groups'],['group','groups'],['delay','delay'],['kp','kp'],['kd','kd'],['window','window_s'],['dataset','dataset_id']];
function fieldOf(msg){let best=null,at=Infinity;for(const [w,id] of WORDS){const i=msg.indexOf(w);if(i>=0&&i<at){at=i;best=id}}return best}
function clear(){for(const e of form.querySelectorAll('.field-error')){e.textContent='';e.hidden=true}
  for(const e of form.querySelectorAll('.invalid'))e.classList.remove('invalid');out.textContent=''}
function show(msg,field){const id=field||fieldOf(msg),el=id&&document.getElementById('err-rf-'+id);
  if(!el){out.textContent='Fit not started: '+msg;return}
  el.textContent=msg;el.hidden=false;const input=document.getElementById('rf-'+id);
  if(input){input.classList.add('invalid');input.focus()}}
function boundsError(){for(const input of form.querySelectorAll('input[type=number]')){
  const v=input.validity,name=input.dataset.name;if(v.valid)continue;
  if(v.rangeUnderflow||v.rangeOverflow)return [name,`${name} must be between ${input.min} and ${input.max}, got ${input.value}`];
  if(v.stepMismatch)return [name,`${name} must be a whole number, got ${input.value}`];
  return [name,`${name} must be a number`]}return null}
function body(){const val=k=>document.getElementById('rf-'+k).value.trim(),on=k=>document.getElementById('rf-'+k).checked;
  const opts={fit_bias:on('fit_bias'),dc_motor:on('dc_motor'),position_friction:on('position_friction'),effort_mode:val('effort_mode'),payload_com:on('payload_com'),select:on('select'),replay:on('replay')};
  for(const k of ['kp','kd','bias_limit','delay','max_delay','iterations','window_s','decimation','budget_s','validation_fraction'])if(val(k))opts[k]=+val(k);
  if(val('holdout'))opts.holdout=val('holdout');
  if(val('payload'))opts.payload=val('payload').split(',').map(s=>s.trim()).filter(s=>s);
  if(val('groups')){try{opts.groups=JSON.parse(val('groups'))}
    catch(e){throw Object.assign(new Error('groups: not valid JSON ('+e.message+')'),{field:'groups'})}}
  const out={dataset_id:val('dataset_id'),robot_id:ROBOT_ID,robot:opts};
  if(val('name'))out.name=val('name');
  if(val('tags'))out.tags=val('tags').split(',').map(s=>s.trim()).filter(s=>s);
  return out}
form.addEventListener('submit',async ev=>{ev.preventDefault();clear();const bad=boundsError();if(bad){show(bad[1],bad[0]);return}
  let b;try{b=body()}catch(e){show(e.message,e.field);return}
  if(!b.dataset_id){show('dataset: upload a log first','dataset_id');return}
  const r=await fetch('/api/v1/fits',{method:'POST',headers:{'Content-Type':'application/json'},body:JSON.stringify(b)});
  if(r.ok){location.href='/fits/'+(await r.json()).id}else{show(await apiError(r))}})})();

// a log for this robot: uploaded with its id, then this page again with the new log chosen
(()=>{const form=document.getElementById('robot-upload'),out=document.getElementById('robot-upload-msg');
form.addEventListener('submit',async ev=>{ev.preventDefault();out.textContent='uploading…';out.className='muted';
  const r=await fetch('/api/v1/datasets',{method:'POST',body:new FormData(form)});
  if(r.ok){location.href=location.pathname+'?dataset='+(await r.json()).id+'#robot-fit'}
  else{out.className='form-error';out.textContent='Upload failed: '+await apiError(r)}})})();
