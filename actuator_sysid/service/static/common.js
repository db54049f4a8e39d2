async function apiError(r){try{const j=await r.json();return typeof j.detail==='string'?j.detail
  :JSON.stringify(j.detail)}catch(e){return r.status+' '+r.statusText}}
// a message on the page itself (no dialog): under the page's heading
function showMessage(text){let p=document.getElementById('page-message');
  if(!p){p=document.createElement('p');p.id='page-message';p.className='error';p.setAttribute('role','alert');
    const h=document.querySelector('h1');if(h)h.after(p);else document.body.prepend(p)}p.textContent=text}
async function apiPost(url,method){const r=await fetch(url,{method:method||'POST'});
  if(!r.ok){showMessage(await apiError(r));return null}return r.json()}
