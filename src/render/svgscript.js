// The short label of a frame (src/render/framelabel.h has the rule, and says why).
function kfLabel (name, cwd) {
  var s = /_\[[kjiw]\]$/.test(name) ? name.slice(0, -4) : name
  var sp = s.lastIndexOf(' ')
  if (sp < 0) return s
  var m = /:\d+(:\d+)?$/.exec(s.slice(sp + 1))
  if (!m) return s
  var loc = s.slice(sp + 1, m[1] ? s.length - m[1].length : s.length)
  if (loc.slice(0, 7) === 'file://') loc = loc.slice(7)
  var nm = loc.lastIndexOf('node_modules/')
  if (nm >= 0) loc = loc.slice(nm + 13)
  else if (cwd && cwd !== '/' && loc.length > cwd.length + 1 && loc.slice(0, cwd.length + 1) === cwd + '/') loc = loc.slice(cwd.length + 1)
  return s.slice(0, sp + 1) + loc
}
window.addEventListener('load', function () {
  'use strict'
  var svg = document.documentElement, NS = 'http://www.w3.org/2000/svg'
  var W = +svg.getAttribute('width'), H = +svg.getAttribute('height'), PAD = 10, CHAR = 12 * 0.59, EPS = 0.001
  var inverted = svg.getAttribute('data-inverted') === '1', cwd = svg.getAttribute('data-cwd') || ''
  var group = document.getElementById('frames')
  var header = document.getElementById('header'), footer = document.getElementById('footer')
  var details = document.getElementById('details')
  var matched = document.getElementById('matched')
  var unzoomButton = document.getElementById('unzoom')
  var searchButton = document.getElementById('search')
  var zoomed = null, term = '', all = null
  // A frame's numbers are read from its elements when first needed: on
  // load nothing walks the frames, so opening costs what drawing costs.
  function info (g) {
    if (g.kf) return g.kf
    var title = g.firstChild.textContent, r = g.firstChild.nextSibling
    g.kf = { g: g, title: title, name: title.replace(/ \([^()]*\)$/, ''), rect: r, text: r.nextSibling, label: null,
      x0: +r.getAttribute('x'), w0: +r.getAttribute('width'), y0: +r.getAttribute('y') }
    return g.kf
  }
  function frames () {
    if (!all) all = [].map.call(group.children, info)
    return all
  }
  function frameOf (el) {
    while (el && el.parentNode !== group) el = el.parentNode
    return el
  }
  // One listener per kind of event for all frames, not three per frame.
  group.addEventListener('mouseover', function (e) {
    var g = frameOf(e.target)
    if (g) details.textContent = info(g).title
  })
  group.addEventListener('mouseout', function () { details.textContent = ' ' })
  group.addEventListener('click', function (e) {
    var g = frameOf(e.target)
    if (g) { zoom(info(g)); save() }
  })
  function place (f, x, w) {
    var n = Math.floor((w - 3) / CHAR)
    if (f.label === null) f.label = kfLabel(f.name, cwd)
    var text = n < 3 ? '' : f.label.length <= n ? f.label : f.label.slice(0, n - 2) + '..'
    f.rect.setAttribute('x', x); f.rect.setAttribute('width', w)
    if (!f.text && text) {
      f.text = document.createElementNS(NS, 'text')
      f.text.setAttribute('y', f.y0 + 10.5)
      f.g.appendChild(f.text)
    }
    if (f.text) { f.text.setAttribute('x', x + 3); f.text.textContent = text }
  }
  function inside (f, z) {
    return f.x0 >= z.x0 - EPS && f.x0 + f.w0 <= z.x0 + z.w0 + EPS && (inverted ? f.y0 >= z.y0 : f.y0 <= z.y0)
  }
  function above (f, z) {
    return f.x0 <= z.x0 + EPS && f.x0 + f.w0 >= z.x0 + z.w0 - EPS && (inverted ? f.y0 < z.y0 : f.y0 > z.y0)
  }
  function zoom (z) {
    var scale = (W - 2 * PAD) / z.w0
    zoomed = z
    unzoomButton.classList.remove('hide')
    frames().forEach(function (f) {
      f.g.classList.remove('hide', 'parent')
      if (inside(f, z)) place(f, PAD + (f.x0 - z.x0) * scale, f.w0 * scale)
      else if (above(f, z)) { f.g.classList.add('parent'); place(f, PAD, W - 2 * PAD) }
      else f.g.classList.add('hide')
    })
  }
  function unzoom () {
    zoomed = null
    unzoomButton.classList.add('hide')
    frames().forEach(function (f) { f.g.classList.remove('hide', 'parent'); place(f, f.x0, f.w0) })
    save()
  }
  function search (t) {
    var re = null
    try { re = t ? new RegExp(t) : null } catch (e) { re = null }
    term = re ? t : ''
    var spans = []
    frames().forEach(function (f) {
      var hit = re && re.test(f.name)
      if (hit && !f.fill0) { f.fill0 = f.rect.getAttribute('fill'); f.rect.setAttribute('fill', 'rgb(230,0,230)') }
      if (!hit && f.fill0) { f.rect.setAttribute('fill', f.fill0); f.fill0 = null }
      if (hit) spans.push([f.x0, f.x0 + f.w0])
    })
    spans.sort(function (a, b) { return a[0] - b[0] })
    var covered = 0, end = -Infinity
    spans.forEach(function (s) {
      if (s[1] <= end) return
      covered += s[1] - Math.max(s[0], end); end = s[1]
    })
    matched.textContent = re ? 'Matched: ' + (100 * covered / (W - 2 * PAD)).toFixed(1) + '%' : ' '
    searchButton.textContent = re ? 'Reset Search' : 'Search'
    save()
  }
  function save () {
    var parts = []
    if (zoomed) parts.push('x=' + zoomed.x0, 'y=' + zoomed.y0)
    if (term) parts.push('s=' + encodeURIComponent(term))
    try { history.replaceState(null, '', '#' + parts.join('&')) } catch (e) {}
  }
  function load () {
    var state = {}
    location.hash.slice(1).split('&').forEach(function (kv) {
      var i = kv.indexOf('=')
      if (i > 0) try { state[kv.slice(0, i)] = decodeURIComponent(kv.slice(i + 1)) } catch (e) {}
    })
    if (state.x !== undefined) {
      frames().some(function (f) {
        if (f.x0 === +state.x && f.y0 === +state.y) { zoom(f); return true }
        return false
      })
    }
    if (state.s) search(state.s)
  }
  // A graph taller than the window opens on its roots (the bottom of a
  // flame graph; an icicle's top is its roots already), and the title bar
  // and the details line follow the scroll so they stay in view.
  function follow () {
    var y = window.scrollY || 0
    header.setAttribute('transform', 'translate(0,' + y + ')')
    footer.setAttribute('transform', 'translate(0,' + Math.min(0, y + window.innerHeight - H) + ')')
  }
  if (H > window.innerHeight) {
    window.addEventListener('scroll', follow)
    window.addEventListener('resize', follow)
    if (!inverted) window.scrollTo(0, H)
    follow()
  }
  unzoomButton.addEventListener('click', unzoom)
  searchButton.addEventListener('click', function () {
    if (term) return search('')
    var t = prompt('Search frames (regular expression):', '')
    if (t) search(t)
  })
  load()
})
