'use strict'

// The one way kflame's JS writes a file (profiles from kflame/register and
// the CLI), with the rules of src/util/safefile.c, so that no other user can
// steer a write even when kflame runs as root in a shared directory (/tmp,
// a world-writable KFLAME_OUT):
//
//  - the bytes go to ".kflame-<16 random hex>.tmp" in the target's
//    directory (crypto.randomBytes: nobody can plant a link there in
//    advance), created with O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW (libuv adds
//    O_CLOEXEC): a new file of ours, or the open fails;
//  - written fully, fsynced, closed; then the target is looked at with
//    lstat: nothing or a regular file -> renamed over; a symbolic link,
//    device, FIFO, socket or directory -> KFLAME_ERR_UNSAFE_PATH, the
//    temporary file removed, the target left as it was. A link swapped in
//    between the lstat and the rename is replaced by rename(2), which never
//    follows what is at the target;
//  - the directory is created if missing (as before), and must then be a
//    directory, or a symbolic link owned by this user or root (as the
//    kernel's fs.protected_symlinks would allow): a link that another user
//    planted where the directory should be (/tmp/profiles -> /etc) is
//    refused.
//
// Also: checkPath, the one check of every public path argument.

const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')
const { kflameError, invalid } = require('./errors')

const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants
const NAME_TRIES = 16 // a taken random name is chance once, not sixteen times

// A path argument: a non-empty string without NUL (which C, and the
// kernel, would take as its end: 'a\0b' would write 'a'). `what` names it
// for the message, e.g. 'writePerfMap(path): path'. -> p, or a TypeError
// KFLAME_ERR_INVALID_ARG.
function checkPath (p, what) {
  if (typeof p !== 'string' || p === '') {
    throw invalid(`${what} must be a non-empty string`)
  }
  if (p.includes('\0')) {
    throw invalid(`${what} contains a NUL character (${JSON.stringify(p)}): a file name cannot hold one; remove it`)
  }
  return p
}

function kindOf (st) {
  if (st.isSymbolicLink()) return 'a symbolic link'
  if (st.isDirectory()) return 'a directory'
  if (st.isFIFO()) return 'a FIFO'
  if (st.isSocket()) return 'a socket'
  if (st.isCharacterDevice()) return 'a character device'
  if (st.isBlockDevice()) return 'a block device'
  return 'not a regular file'
}

function unsafePath (file, st) {
  return kflameError(Error, 'KFLAME_ERR_UNSAFE_PATH',
    `cannot write ${file}: it is ${kindOf(st)}, not a regular file, and kflame never writes through ` +
    'or replaces one (another user may have planted it): remove it, or choose another path')
}

// An fs error (it has a syscall) as one that names the file asked for,
// not only the temporary one; code, errno and syscall stay.
const NAMED = new WeakSet()
function named (file, err) {
  if (!err || !err.syscall || NAMED.has(err)) return err
  const e = new Error(`cannot write ${file}: ${err.message}`, { cause: err })
  Object.assign(e, { code: err.code, errno: err.errno, syscall: err.syscall, path: file })
  NAMED.add(e)
  return e
}

// Creates `dir` if missing; then it must be a directory, or a symbolic
// link to one that this user (or root) owns.
function ensureDir (dir) {
  try {
    fs.mkdirSync(dir, { recursive: true })
    const st = fs.lstatSync(dir)
    if (st.isDirectory()) return
    if (st.isSymbolicLink()) {
      const uid = process.geteuid()
      if ((st.uid === uid || st.uid === 0) && fs.statSync(dir).isDirectory()) return
      throw kflameError(Error, 'KFLAME_ERR_UNSAFE_PATH',
        `cannot write into ${dir}: it is a symbolic link owned by another user (uid ${st.uid}), ` +
        'who could point it anywhere: remove it, or choose another directory')
    }
    throw unsafePath(dir, st)
  } catch (err) {
    throw named(dir, err)
  }
}

function * chunksOf (data) {
  if (typeof data === 'string' || data instanceof Uint8Array) {
    yield data
  } else if (data != null && typeof data[Symbol.iterator] === 'function') {
    for (const chunk of data) {
      if (typeof chunk !== 'string' && !(chunk instanceof Uint8Array)) {
        throw invalid('writeFileSafe(file, data): each chunk must be a string or a Buffer')
      }
      yield chunk
    }
  } else {
    throw invalid('writeFileSafe(file, data): data must be a string, a Buffer or an iterable of them')
  }
}

function writeAll (fd, chunk) {
  const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
  for (let off = 0; off < buf.length;) off += fs.writeSync(fd, buf, off, buf.length - off)
}

// Writes `data` (a string, a Buffer, or an iterable of them, for text too
// large for one string) to `file` as described above. `mode` as open(2)'s
// (the umask applies): 0644 by default, profiles are for others to read.
function writeFileSafe (file, data, { mode = 0o644 } = {}) {
  checkPath(file, 'writeFileSafe(file)')
  // 'dir/' and 'dir/.' name directories (path.basename would drop the /).
  if (/\/\.{0,2}$/.test(file) || file === '.' || file === '..') {
    const err = kflameError(Error, 'EISDIR', `cannot write ${file}: it names a directory; give a file name`)
    err.path = file
    throw err
  }
  const dir = path.dirname(file)
  ensureDir(dir)
  let fd = -1
  let tmp
  for (let i = 0; fd < 0; i++) {
    tmp = path.join(dir, `.kflame-${crypto.randomBytes(8).toString('hex')}.tmp`)
    try {
      fd = fs.openSync(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode)
    } catch (err) {
      if (err.code !== 'EEXIST' || i + 1 === NAME_TRIES) throw named(file, err)
    }
  }
  try {
    for (const chunk of chunksOf(data)) writeAll(fd, chunk)
    // Durable before visible: a crash after the rename must not leave an
    // empty file under the target's name.
    fs.fsyncSync(fd)
    fs.closeSync(fd)
    fd = -1
    let st = null
    try {
      st = fs.lstatSync(file)
    } catch (err) {
      if (err.code !== 'ENOENT') throw err
    }
    if (st && !st.isFile()) throw unsafePath(file, st)
    fs.renameSync(tmp, file)
  } catch (err) {
    if (fd >= 0) try { fs.closeSync(fd) } catch {}
    try { fs.unlinkSync(tmp) } catch {}
    throw named(file, err)
  }
}

// "cannot write FILE: why", without saying FILE twice when the error
// already names it (writeFileSafe's do).
function writeFailure (file, err) {
  return err.message.includes(file) ? err.message : `cannot write ${file}: ${err.message}`
}

module.exports = { writeFileSafe, checkPath, ensureDir, writeFailure }
