/* textbuf.h: a growable byte buffer for building corpora and generated text in memory. */
#ifndef MIXPAR_DATA_TEXTBUF_H
#define MIXPAR_DATA_TEXTBUF_H

#include <stddef.h>

/* Always NUL-terminated (data[len] == 0) once anything was appended, so it can be printed. */
typedef struct {
    char *data;
    size_t len;
    size_t cap;
} textbuf;

void textbuf_append(textbuf *b, const void *bytes, size_t n);
void textbuf_putc(textbuf *b, char c);
void textbuf_puts(textbuf *b, const char *s);
void textbuf_printf(textbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void textbuf_free(textbuf *b);

#endif
