for(const b of document.querySelectorAll('button[data-action]')){b.addEventListener('click',async()=>{
  const id=document.body.dataset.fit,a=b.dataset.action;
  if(a==='delete'){if(!confirm('Delete this fit and its files? This cannot be undone.'))return;
    if(await apiPost('/api/v1/fits/'+id,'DELETE'))location.href='/';return}
  if(a==='cancel'&&!confirm('Cancel this fit?'))return;
  if(await apiPost('/api/v1/fits/'+id+'/'+a))location.reload()})}
