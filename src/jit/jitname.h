/*
 * jitname: turns the name V8 gives a piece of code in a code event into
 * the frame name kflame shows. Pure; any thread.
 *
 *   "JS:~foo /app/a.js:3:10"   -> tier '~', "foo /app/a.js:3:10"
 *   "JS:* /app/a.js:9:1"       -> tier '*', "(anonymous) /app/a.js:9:1"
 *   "JS:*'foo /app/a.js:3:10"  -> tier '*', "foo /app/a.js:3:10" (V8 12+:
 *                                 ' marks context-specialized code)
 *   "Eval:~ [eval]:1:1"        -> tier '~', "(anonymous) [eval]:1:1"
 *   "Builtin:ArrayMap"         -> no tier,  "Builtin:ArrayMap"
 *   "Builtin:InterpreterEntryTrampoline"
 *                              -> no tier,  "(interpreted)": the shared
 *      trampoline of functions compiled before --interpreted-frames-native-
 *      stack was on; which function it runs is not known, so no name.
 *   "RegExp:ab+c"              -> no tier,  "RegExp:/ab+c/"
 *   "RegExp:Regular expression code"
 *                              -> no tier,  KF_JITNAME_REGEXP_EXISTING: V8's
 *      name for RegExp code it reports as existing when a hook is armed
 *      (compiled before the first start()), whose source it does not give.
 *
 * Tier markers are V8's: '~' interpreted (Ignition), '^' baseline
 * (Sparkplug), '+' Maglev, '*' TurboFan. Names come out sanitised for the
 * folded format and the perf map: ';' becomes ':', control characters
 * (newline, NUL, ...) become spaces.
 */
#ifndef KF_JITNAME_H
#define KF_JITNAME_H

#include <stddef.h>

#include "jit/codemap.h"

#define KF_JITNAME_REGEXP_EXISTING "RegExp:(compiled before start)"

/* Writes the frame name of the V8 code name `v8name` (not NUL-terminated,
 * `len` bytes) into out (NUL-terminated, truncated to cap - 1 bytes) and
 * sets *tier to the tier marker or '\0'. Returns the length written. */
size_t kf_jitname(const char *v8name, size_t len, char *out, size_t cap,
                  char *tier);

/* The frame name of RegExp code for the regular expression of `source`
 * (len bytes of UTF-8) and `flags` ("" where V8 leaves them out of its
 * name: before V8 13), as kf_jitname writes V8's own name of it:
 * "RegExp:/<source>/<flags>". For RegExp code V8 reported without its
 * source (jitframes.c names it from the expression its frame runs).
 * Returns the length written. */
size_t kf_jitname_regexp(const char *source, size_t len, const char *flags,
                         char *out, size_t cap);

/* What kind of code (for reading stacks) the code V8 named `v8name` is:
 * JS functions (by V8's tag), the shared interpreter entry builtins and the
 * bytecode handlers are told apart by name; the rest is KF_CODE_OTHER. Bytecode is told by
 * the event's code type, not its name. */
enum kf_code_kind kf_jitname_kind(const char *v8name, size_t len);

#endif
