
async function apiError(r){try{const j=await r.json();return typeof j.detail==='string'?j.detail
  :JSON.stringify(j.detail)}catch(e){return r.status+' '+r.statusText}}
async function apiPost(url,method){const r=await fetch(url,{method:method||'POST'});
  if(!r.ok){alert(await apiError(r));return null}return r.json()}
