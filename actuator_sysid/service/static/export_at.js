for(const p of document.querySelectorAll('p.export-at')){
  const fmt=p.querySelector('select.export-format'),at=p.querySelector('select.export-point'),a=p.querySelector('a.export-at-link');
  const update=()=>{a.href='/api/v1/fits/'+a.dataset.fit+'/export/'+fmt.value+'?at='+encodeURIComponent(at.value);
    a.textContent='download '+fmt.value+' at '+at.value};
  fmt.addEventListener('change',update);at.addEventListener('change',update);update()}
