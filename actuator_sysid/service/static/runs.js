// the runs table: sort by a column (again: the other way; empty cells last), filter by text, verdict and kind
(()=>{const table=document.getElementById('runs');if(!table)return;const body=table.tBodies[0];
const q=document.getElementById('runs-filter'),verdict=document.getElementById('runs-verdict'),
  kind=document.getElementById('runs-kind'),count=document.getElementById('runs-count'),empty=document.getElementById('runs-empty');
const heads=[...table.tHead.rows[0].cells];let by=-1,dir=1;
function key(row,i,num){const c=row.cells[i],v=c.dataset.v!==undefined?c.dataset.v:c.textContent.trim();
  if(v==='')return null;return num?parseFloat(v):v.toLowerCase()}
function sort(i){const num=heads[i].dataset.sort==='num';dir=by===i?-dir:1;by=i;
  const rows=[...body.rows];rows.sort((a,b)=>{const x=key(a,i,num),y=key(b,i,num);
    if(x===null||y===null)return (x===null)-(y===null);return (x<y?-1:x>y?1:0)*dir});
  for(const r of rows)body.appendChild(r);
  for(const h of heads)h.removeAttribute('aria-sort');heads[i].setAttribute('aria-sort',dir>0?'ascending':'descending')}
heads.forEach((h,i)=>{if(!h.dataset.sort)return;h.classList.add('sortable');h.tabIndex=0;h.title=h.title||'sort by '+h.textContent;
  h.addEventListener('click',()=>sort(i));h.addEventListener('keydown',e=>{if(e.key==='Enter')sort(i)})});
function filter(){const text=q.value.trim().toLowerCase(),v=verdict.value,k=kind.value;let shown=0;
  for(const r of body.rows){const ok=(!text||r.textContent.toLowerCase().includes(text)||r.id.includes(text))
    &&(!v||r.dataset.verdict===v)&&(!k||r.dataset.kind===k);r.hidden=!ok;shown+=ok}
  count.textContent=shown===body.rows.length?body.rows.length+' runs':shown+' of '+body.rows.length+' runs';
  empty.hidden=shown>0}
for(const el of [q,verdict,kind])el.addEventListener('input',filter);filter()})();
