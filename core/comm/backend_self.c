/* backend_self.c: the one-rank backend: no MPI, collectives are copies, messages to oneself go through a
 * mailbox, so every program runs as a plain process without mpirun. */
#include "comm/comm_internal.h"

#include "base/error.h"

#include <stdlib.h>
#include <string.h>

/* A message sent to oneself waits in the mailbox until a receive with the same (tag, channel) takes it;
 * a receive posted first waits in the pending list, and a later send fills it directly. Both lists are
 * kept in order, so messages between the same tags arrive in the order sent, as in MPI. */
typedef struct message {
    struct message *next;
    int tag;
    comm_channel channel;
    size_t bytes;
    unsigned char data[];
} message;

typedef struct self_request {
    struct self_request *next; /* in the pending-receive list */
    bool done;
    bool is_recv;
    void *buf;
    size_t bytes;    /* the receive buffer's size */
    size_t received;
    int tag;
    comm_channel channel;
} self_request;

typedef struct {
    message *mail_head, *mail_tail;
    self_request *pending_head, *pending_tail;
} self_state;

static void self_init_world(comm_t *c, int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    c->rank = 0;
    c->size = 1;
    c->impl = calloc(1, sizeof(self_state));
    MP_ASSERT(c->impl, "out of memory");
}

static void self_free(comm_t *c) {
    self_state *s = c->impl;
    if (!s) return;
    for (message *m = s->mail_head, *next; m; m = next) {
        next = m->next;
        free(m);
    }
    free(s);
    c->impl = NULL;
}

static void self_finalize(comm_t *world) { self_free(world); }

static bool self_split(comm_t *parent, comm_t *child, int color, int key) {
    (void)parent;
    (void)key;
    if (color == COMM_UNDEFINED) return false;
    self_init_world(child, NULL, NULL);
    return true;
}

static void deliver(comm_t *c, self_request *r, const void *data, size_t bytes) {
    if (bytes > r->bytes)
        comm_fail(c, "a message of %zu bytes to itself does not fit the %zu-byte receive buffer", bytes, r->bytes);
    if (bytes) memcpy(r->buf, data, bytes);
    r->received = bytes;
    r->done = true;
}

static self_request *new_request(bool is_recv) {
    self_request *r = calloc(1, sizeof *r);
    MP_ASSERT(r, "out of memory");
    r->is_recv = is_recv;
    return r;
}

static void *self_isend(comm_t *c, const void *buf, size_t bytes, int dst, int tag, comm_channel ch) {
    (void)dst;
    self_state *s = c->impl;
    /* A receive already waiting for this tag takes the message straight away. */
    for (self_request **pp = &s->pending_head, *prev = NULL; *pp; prev = *pp, pp = &(*pp)->next) {
        self_request *r = *pp;
        if (r->tag != tag || r->channel != ch) continue;
        *pp = r->next;
        if (s->pending_tail == r) s->pending_tail = prev;
        deliver(c, r, buf, bytes);
        return NULL;
    }
    message *m = malloc(sizeof *m + bytes);
    MP_ASSERT(m, "out of memory for a %zu-byte message to itself", bytes);
    *m = (message){NULL, tag, ch, bytes};
    if (bytes) memcpy(m->data, buf, bytes);
    if (s->mail_tail) s->mail_tail->next = m;
    else s->mail_head = m;
    s->mail_tail = m;
    return NULL; /* buffered: the send is complete */
}

static void *self_irecv(comm_t *c, void *buf, size_t bytes, int src, int tag, comm_channel ch) {
    (void)src;
    self_state *s = c->impl;
    self_request *r = new_request(true);
    r->buf = buf;
    r->bytes = bytes;
    r->tag = tag;
    r->channel = ch;
    for (message **pp = &s->mail_head, *prev = NULL; *pp; prev = *pp, pp = &(*pp)->next) {
        message *m = *pp;
        if (m->tag != tag || m->channel != ch) continue;
        *pp = m->next;
        if (s->mail_tail == m) s->mail_tail = prev;
        deliver(c, r, m->data, m->bytes);
        free(m);
        return r;
    }
    if (s->pending_tail) s->pending_tail->next = r;
    else s->pending_head = r;
    s->pending_tail = r;
    return r;
}

static bool self_test(comm_t *c, void *req, size_t *received) {
    (void)c;
    self_request *r = req;
    if (!r->done) return false;
    if (received) *received = r->received;
    free(r);
    return true;
}

/* With one rank every collective is the identity (or a copy into the receive buffer). */
static void copy_if_apart(void *dst, const void *src, size_t bytes) {
    if (dst && src && dst != src && bytes) memmove(dst, src, bytes);
}

static void *self_ibroadcast(comm_t *c, void *buf, size_t count, comm_dtype dt, int root) {
    (void)c, (void)buf, (void)count, (void)dt, (void)root;
    return NULL;
}
static void *self_ireduce(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_redop op, int root) {
    (void)c, (void)op, (void)root;
    copy_if_apart(recv, send, count * comm_dtype_size(dt));
    return NULL;
}
static void *self_iallreduce(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_redop op) {
    (void)c, (void)op;
    copy_if_apart(recv, send, count * comm_dtype_size(dt));
    return NULL;
}
static void *self_iallgather(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt) {
    (void)c;
    copy_if_apart(recv, send, count * comm_dtype_size(dt));
    return NULL;
}
static void *self_ireduce_scatter(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_redop op) {
    (void)c, (void)op;
    copy_if_apart(recv, send, count * comm_dtype_size(dt));
    return NULL;
}
static void *self_iscatter(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, int root) {
    (void)c, (void)root;
    copy_if_apart(recv, send, count * comm_dtype_size(dt));
    return NULL;
}
static void *self_igather(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, int root) {
    (void)c, (void)root;
    copy_if_apart(recv, send, count * comm_dtype_size(dt));
    return NULL;
}
static void *self_ibarrier(comm_t *c) {
    (void)c;
    return NULL;
}

const comm_backend comm_backend_self = {
    .name = "self",
    .device_buffers = false,
    .init_world = self_init_world,
    .finalize = self_finalize,
    .split = self_split,
    .free = self_free,
    .isend = self_isend,
    .irecv = self_irecv,
    .test = self_test,
    .ibroadcast = self_ibroadcast,
    .ireduce = self_ireduce,
    .iallreduce = self_iallreduce,
    .iallgather = self_iallgather,
    .ireduce_scatter = self_ireduce_scatter,
    .iscatter = self_iscatter,
    .igather = self_igather,
    .ibarrier = self_ibarrier,
};
