/* msgbuf.h: a message built piece by piece in a fixed buffer; what does not fit is cut, never overflowed. */
#ifndef MIXPAR_BASE_MSGBUF_H
#define MIXPAR_BASE_MSGBUF_H

#include <stddef.h>

/* msgbuf m = {buf, sizeof buf, 0}; msgbuf_printf(&m, "step %d: ", step); ... buf is always NUL-terminated
 * once anything was written (buf must hold at least one byte). */
typedef struct {
    char *buf;
    size_t len, used;
} msgbuf;

void msgbuf_printf(msgbuf *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
