/* msgbuf.c: appending formatted text to a fixed buffer, cutting what does not fit. */
#include "base/msgbuf.h"

#include <stdarg.h>
#include <stdio.h>

void msgbuf_printf(msgbuf *m, const char *fmt, ...) {
    if (m->used >= m->len) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(m->buf + m->used, m->len - m->used, fmt, ap);
    va_end(ap);
    if (n > 0) m->used += (size_t)n < m->len - m->used ? (size_t)n : m->len - m->used;
}
