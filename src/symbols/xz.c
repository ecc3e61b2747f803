#include "symbols/xz.h"

#include <errno.h>
#include <lzma.h>
#include <stdint.h>
#include <stdlib.h>

/* liblzma's own memory (the dictionary) for one stream: MiniDebugInfo is
 * written with small dictionaries; a stream asking for more is refused. */
#define MAX_DECODER_MEMORY (64u << 20)

int kf_xz_decode(const void *in, size_t in_len, size_t max_out, void **out,
                 size_t *out_len) {
  *out = NULL;
  *out_len = 0;
  lzma_stream strm = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&strm, MAX_DECODER_MEMORY, 0) != LZMA_OK) return -ENOMEM;
  size_t cap = in_len * 4 < 4096 ? 4096 : in_len * 4;
  if (cap > max_out) cap = max_out;
  unsigned char *buf = malloc(cap ? cap : 1);
  int rc = buf ? 0 : -ENOMEM;
  strm.next_in = in;
  strm.avail_in = in_len;
  while (rc == 0) {
    if (strm.total_out == cap) {
      if (cap == max_out) {
        rc = -EFBIG;
        break;
      }
      size_t bigger = cap * 2 > max_out ? max_out : cap * 2;
      unsigned char *grown = realloc(buf, bigger);
      if (!grown) {
        rc = -ENOMEM;
        break;
      }
      buf = grown;
      cap = bigger;
    }
    strm.next_out = buf + strm.total_out;
    strm.avail_out = cap - strm.total_out;
    lzma_ret r = lzma_code(&strm, LZMA_FINISH);
    if (r == LZMA_STREAM_END) break;
    if (r == LZMA_MEM_ERROR || r == LZMA_MEMLIMIT_ERROR) rc = -ENOMEM;
    else if (r != LZMA_OK && r != LZMA_BUF_ERROR) rc = -EBADMSG;
    /* LZMA_BUF_ERROR with input left means the output filled: grow. With
     * none left, the stream ended early. */
    else if (r == LZMA_BUF_ERROR && strm.avail_in == 0 && strm.avail_out != 0) rc = -EBADMSG;
  }
  size_t len = (size_t)strm.total_out;
  lzma_end(&strm);
  if (rc != 0) {
    free(buf);
    return rc;
  }
  *out = buf;
  *out_len = len;
  return 0;
}
