#include "jit/jitname.h"

#include <string.h>

#include "util/framename.h"

/* V8's tags for code that runs a JS function (log tags of CodeEventLogger;
 * older V8 says LazyCompile/Function where newer says JS). */
static const char *const js_tags[] = {"JS", "Eval", "Script", "LazyCompile",
                                      "Function", "InterpretedFunction"};

typedef struct out {
  char *buf;
  size_t cap, len;
} out_t;

/* Appends s[0..n), as much as fits, sanitised as every frame name is. */
static void put(out_t *o, const char *s, size_t n) {
  if (o->cap == 0) return;
  size_t room = o->cap - 1 - o->len;
  o->len += kf_fold_sanitize(o->buf + o->len, s, n < room ? n : room);
  o->buf[o->len] = '\0';
}

static void puts_(out_t *o, const char *s) { put(o, s, strlen(s)); }

static int is_js_tag(const char *s, size_t n) {
  for (size_t i = 0; i < sizeof js_tags / sizeof js_tags[0]; i++)
    if (strlen(js_tags[i]) == n && memcmp(js_tags[i], s, n) == 0) return 1;
  return 0;
}

static int is_tier(char c) { return c == '~' || c == '^' || c == '+' || c == '*'; }

/* "RegExp:/<source>/<flags>" */
static void regexp_name(out_t *o, const char *source, size_t source_len,
                        const char *flags, size_t flags_len) {
  puts_(o, "RegExp:/");
  put(o, source, source_len);
  puts_(o, "/");
  put(o, flags, flags_len);
}

size_t kf_jitname_regexp(const char *source, size_t len, const char *flags,
                         char *buf, size_t cap) {
  out_t o = {buf, cap, 0};
  if (cap) buf[0] = '\0';
  regexp_name(&o, source, len, flags, strlen(flags));
  return o.len;
}

/* V8 13's name of RegExp code, "RegExp.> src: '<source>' flags: '<flags>'"
 * (V8 11 and 12 say "RegExp:<source>"), as "RegExp:/<source>/<flags>".
 * The source is V8's text as written, quotes included: the flags' part is
 * the last one. 0 when the name is not one. */
static int regexp13(out_t *o, const char *v8name, size_t len) {
  static const char head[] = "RegExp.> src: '", mid[] = "' flags: '";
  const size_t hn = sizeof head - 1, mn = sizeof mid - 1;
  if (len < hn + mn + 1 || memcmp(v8name, head, hn) != 0 || v8name[len - 1] != '\'') return 0;
  size_t flags = len - 1; /* where the flags end */
  size_t at = flags;
  while (at > hn && v8name[at - 1] >= 'a' && v8name[at - 1] <= 'z') at--;
  if (at < hn + mn || memcmp(v8name + at - mn, mid, mn) != 0) return 0;
  regexp_name(o, v8name + hn, at - mn - hn, v8name + at, flags - at);
  return 1;
}

size_t kf_jitname(const char *v8name, size_t len, char *buf, size_t cap,
                  char *tier) {
  out_t o = {buf, cap, 0};
  if (cap) buf[0] = '\0';
  *tier = '\0';
  const char *colon = memchr(v8name, ':', len);
  size_t tag_len = colon ? (size_t)(colon - v8name) : 0;
  const char *rest = colon ? colon + 1 : v8name;
  size_t rest_len = colon ? len - tag_len - 1 : len;

  if (colon && is_js_tag(v8name, tag_len)) {
    if (rest_len && is_tier(rest[0])) {
      *tier = rest[0];
      rest++, rest_len--;
      /* V8 12+ marks context-specialized optimized code "*'" and "+'" */
      if (rest_len && rest[0] == '\'' && (*tier == '*' || *tier == '+'))
        rest++, rest_len--;
    }
    /* "name file:line:col"; an anonymous function has an empty name. */
    if (rest_len == 0 || rest[0] == ' ') puts_(&o, "(anonymous)");
    put(&o, rest, rest_len);
    return o.len;
  }
  if (colon && tag_len == 6 && memcmp(v8name, "RegExp", 6) == 0) {
    /* What V8 calls RegExp code it reports as existing when a hook is
     * armed (compiled before the first start()): it does not say whose. */
    static const char existing[] = "Regular expression code";
    if (rest_len == sizeof existing - 1 && memcmp(rest, existing, rest_len) == 0) {
      puts_(&o, KF_JITNAME_REGEXP_EXISTING);
      return o.len;
    }
    regexp_name(&o, rest, rest_len, "", 0);
    return o.len;
  }
  if (regexp13(&o, v8name, len)) return o.len;
  static const char trampoline[] = "Builtin:InterpreterEntryTrampoline";
  if (len == sizeof trampoline - 1 && memcmp(v8name, trampoline, len) == 0) {
    puts_(&o, "(interpreted)");
    return o.len;
  }
  put(&o, v8name, len);
  return o.len;
}

static int has_prefix(const char *s, size_t len, const char *prefix) {
  size_t n = strlen(prefix);
  return len >= n && memcmp(s, prefix, n) == 0;
}

static int is(const char *s, size_t len, const char *what) {
  return len == strlen(what) && memcmp(s, what, len) == 0;
}

enum kf_code_kind kf_jitname_kind(const char *v8name, size_t len) {
  /* InterpreterEnterBytecodeAdvance/Dispatch: their names before V8 9.4 */
  if (is(v8name, len, "Builtin:InterpreterEntryTrampoline") ||
      has_prefix(v8name, len, "Builtin:InterpreterEnterAt") ||
      has_prefix(v8name, len, "Builtin:InterpreterEnterBytecode"))
    return KF_CODE_INTERPRETER_ENTRY;
  if (has_prefix(v8name, len, "BytecodeHandler:"))
    return KF_CODE_BYTECODE_HANDLER;
  const char *colon = memchr(v8name, ':', len);
  if (colon && is_js_tag(v8name, (size_t)(colon - v8name))) return KF_CODE_JS;
  return KF_CODE_OTHER;
}
