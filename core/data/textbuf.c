/* textbuf.c: a growable byte buffer (doubling), for text that is built a line at a time. */
#include "data/textbuf.h"

#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void reserve(textbuf *b, size_t extra) {
    size_t need = b->len + extra + 1; /* + 1 for the terminating NUL */
    if (need <= b->cap) return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < need) cap *= 2;
    char *p = realloc(b->data, cap);
    MP_ASSERT(p != NULL, "out of memory growing a text buffer to %zu bytes", cap);
    b->data = p;
    b->cap = cap;
}

void textbuf_append(textbuf *b, const void *bytes, size_t n) {
    reserve(b, n);
    if (n) memcpy(b->data + b->len, bytes, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void textbuf_putc(textbuf *b, char c) { textbuf_append(b, &c, 1); }

void textbuf_puts(textbuf *b, const char *s) { textbuf_append(b, s, strlen(s)); }

void textbuf_printf(textbuf *b, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    MP_ASSERT(n >= 0, "bad format '%s'", fmt);
    reserve(b, (size_t)n);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    b->len += (size_t)n;
}

void textbuf_free(textbuf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
