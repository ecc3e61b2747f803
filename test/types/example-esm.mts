// kflame from an ES module: the default import is module.exports, named
// imports are its properties (Node's CommonJS interop), both typed.

import kflame from 'kflame'
import { start, stop, fromFolded, type LiveProfile } from 'kflame'
import { mochaHooks } from 'kflame/register'

start({ hz: 99 })
const profile: LiveProfile = stop()
const svg: string = kflame.fromFolded(profile.folded).svg()
const threads: number = fromFolded('main;a 1\n').stats.threads
if (mochaHooks) mochaHooks.beforeEach.call({})
// @ts-expect-error stop() takes no arguments
kflame.stop(1)
