'use strict'

// Chrome DevTools' .cpuprofile (the Profiler.Profile of the DevTools
// protocol), which DevTools, speedscope and VS Code open:
//   { nodes: [{ id, callFrame, hitCount, children }], startTime, endTime,
//     samples: [leaf node id per sample], timeDeltas: [µs since the previous] }
// One call tree for the whole process: each thread's root frame is a child of
// (root), so threads stay apart in the tree. The format has one timeline, so
// samples of different threads interleave on it in time order.

const { frameParser, compareStrings, checkModel, lineCounts, forEachSample } = require('./frames')

function treeNode (frame, parent) {
  return { frame, parent, children: new Map(), hitCount: 0, id: 0 }
}

// The call tree of the stacks that have samples; leafOf[line] is the node a
// sample of that stack lands on.
function buildTree (model) {
  const root = treeNode('(root)', null)
  const counts = lineCounts(model)
  const leafOf = new Array(model.stacks.length).fill(null)
  model.stacks.forEach((s, line) => {
    if (counts[line] === 0) return
    let node = root
    for (const frame of s.frames) {
      let child = node.children.get(frame)
      if (!child) {
        child = treeNode(frame, node)
        node.children.set(frame, child)
      }
      node = child
    }
    leafOf[line] = node
  })
  return { root, leafOf }
}

// Ids in depth-first order, children by name: the same tree always gets the
// same ids. Iterative, stacks can be deep.
function numberNodes (root) {
  const order = []
  const todo = [root]
  while (todo.length) {
    const node = todo.pop()
    node.id = order.length + 1
    order.push(node)
    const kids = [...node.children.values()].sort((a, b) => compareStrings(a.frame, b.frame))
    for (let i = kids.length - 1; i >= 0; i--) todo.push(kids[i])
  }
  return order
}

// Script ids are strings; '0' means no script. One per URL of a JS frame.
function scriptIds (nodes, parse) {
  const urls = new Set()
  for (const node of nodes) {
    if (node.parent === null) continue
    const f = parse(node.frame, node.parent.parent === null)
    if (f.kind === 'js' && f.url !== '') urls.add(f.url)
  }
  const ids = new Map()
  for (const url of [...urls].sort(compareStrings)) ids.set(url, String(ids.size + 1))
  return ids
}

function callFrame (node, parse, scripts) {
  if (node.parent === null) {
    return { functionName: '(root)', scriptId: '0', url: '', lineNumber: -1, columnNumber: -1 }
  }
  const f = parse(node.frame, node.parent.parent === null)
  return {
    // V8 leaves anonymous functions nameless; DevTools shows "(anonymous)".
    functionName: f.functionName === '(anonymous)' && f.kind === 'js' ? '' : f.functionName,
    scriptId: (f.kind === 'js' && scripts.get(f.url)) || '0',
    url: f.url,
    lineNumber: f.lineNumber - 1, // 0-based; -1 when unknown
    columnNumber: f.columnNumber - 1
  }
}

/**
 * toCpuprofile(model) -> the .cpuprofile object (JSON.stringify it to save).
 * Times are whole µs as V8 writes them: startTime <= first sample, the
 * timeDeltas add up to the last sample's time minus startTime.
 */
function toCpuprofile (model) {
  checkModel(model)
  const parse = frameParser()
  const { root, leafOf } = buildTree(model)

  const leaves = []
  const times = []
  forEachSample(model, (line, time) => {
    leaves.push(leafOf[line])
    times.push(Math.round(time))
  })
  const startTime = Math.min(Math.round(model.startTime), times.length ? times[0] : Infinity)
  const endTime = Math.max(Math.round(model.endTime), times.length ? times[times.length - 1] : -Infinity, startTime)

  const samples = new Array(leaves.length)
  const timeDeltas = new Array(leaves.length)
  let previous = startTime
  for (let i = 0; i < leaves.length; i++) {
    leaves[i].hitCount++
    timeDeltas[i] = times[i] - previous
    previous = times[i]
  }
  const order = numberNodes(root)
  for (let i = 0; i < leaves.length; i++) samples[i] = leaves[i].id
  const scripts = scriptIds(order, parse)

  const nodes = order.map((node) => ({
    id: node.id,
    callFrame: callFrame(node, parse, scripts),
    hitCount: node.hitCount,
    children: [...node.children.values()].map((c) => c.id).sort((a, b) => a - b)
  }))
  return { nodes, startTime, endTime, samples, timeDeltas }
}

module.exports = { toCpuprofile }
