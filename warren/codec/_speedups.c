/*
 * warren.codec._speedups: the compiled halves of the codec's fast paths: basic.publish and
 * basic.deliver frames, runs of basic.ack, the property-list check, and the hand-over batches
 * between worker processes (take_handover, encode_handover: warren/codec/handover.py). The
 * other layers' compiled twins sit beside their Python ones: the store's record framing
 * (warren/store/_records.c), the broker's message runs (warren/broker/_messages.c); what they
 * share is _cshared.h.
 *
 * Why: with a publish's three frames in the receive buffer (nearly always), finding them,
 * checking them and slicing out the arguments, properties and body was about half of the
 * broker's CPU per published message in pure Python (bench/pipeline.py pubonly; see
 * docs/performance.md). This does exactly what ServerConnection._publish's pure-Python fast
 * path does, in one call; the Python code stays the fallback when this module is not built,
 * and tests run both and compare them (tests/protocol/test_speedups.py).
 *
 * take_publish(buf, pos, frame_max, max_body, last_args, last_props)
 *     buf: the receive buffer (any object with the buffer protocol), pos: where the next
 *     frame starts. Returns None unless buf[pos:] starts with a complete basic.publish method
 *     frame, its content header frame and (for a non-empty body) one body frame holding the
 *     whole body, all on the same channel, all well formed and within frame_max (0 = no
 *     limit), the header's class 60 and body size <= max_body. Otherwise returns
 *     (channel, args, props, body, next_pos): args are the method's argument octets (after
 *     the class and method ids) and props the header's property flags and list; each is the
 *     very object last_args / last_props when equal to it (callers reuse what they decoded),
 *     else new bytes. Anything unusual returns None and is left to the general path, which
 *     reports errors: this never raises for what is in the buffer. A property list that is not
 *     last_props is checked (props_error, below) and a malformed one is unusual too: the
 *     Python path refuses it (501 or 502, from warren/codec/refusals.py's table; RabbitMQ
 *     crashes with 541), so nothing malformed is ever stored.
 *
 * take_publishes(buf, pos, frame_max, max_body, last_args, last_props, limit)
 *     The same for a run of publishes on one channel with the same method arguments (a
 *     publisher streaming into one exchange and routing key): up to limit at once, as lists,
 *     so the broker handles the run with one event (ServerConnection.next_event, Publishes).
 *
 * properties_error(buf, start, end) -> None | str
 *     The compiled twin of warren.codec.properties.properties_error: None when buf[start:end]
 *     is a well-formed basic property list (every property inside the list, nothing after the
 *     last, a headers table of the types RabbitMQ accepts, at most MAX_TABLE_DEPTH deep), else
 *     a reason. Tests check that both give the same verdict on any octets.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_cshared.h"

#define FRAME_METHOD 1
#define FRAME_HEADER 2
#define FRAME_BODY 3
#define FRAME_END 0xCE

/* One whole frame at off: its type, channel and payload span; 0 if absent, cut short, over
 * frame_max or without its frame-end octet. */
static int frame_at(const unsigned char *b, Py_ssize_t len, Py_ssize_t off, unsigned long long frame_max,
                    int *type, unsigned int *channel, Py_ssize_t *start, Py_ssize_t *end)
{
    if (off < 0 || len - off < 8)
        return 0;
    unsigned long long size = be32(b + off + 3);
    if (frame_max && size + 8 > frame_max)
        return 0;
    if ((unsigned long long)(len - off - 8) < size)
        return 0;
    Py_ssize_t e = off + 7 + (Py_ssize_t)size;
    if (b[e] != FRAME_END)
        return 0;
    *type = b[off];
    *channel = be16(b + off + 1);
    *start = off + 7;
    *end = e;
    return 1;
}

/* The limits of warren/spec/fields.py: MAX_TABLE_DEPTH and TIMESTAMP_MAX (year 9999). */
#define MAX_TABLE_DEPTH 100
#define TIMESTAMP_MAX 253402300799ULL

/* Why the entries b[off:end] of a headers table (or, for an array, its values) are malformed,
 * or NULL. end is within the buffer; every read is checked against it. */
static const char *table_error(const unsigned char *b, Py_ssize_t off, Py_ssize_t end, int depth, int array)
{
    if (depth > MAX_TABLE_DEPTH)
        return "field tables nested more than 100 deep";
    while (off < end) {
        if (!array) {
            off += 1 + (Py_ssize_t)b[off]; /* the name */
            if (off >= end)
                return "a table entry runs past the end of its table";
        }
        unsigned char tag = b[off++];
        Py_ssize_t size;
        switch (tag) {
        case 't': case 'b': case 'B':
            size = 1;
            break;
        case 's': case 'u':
            size = 2;
            break;
        case 'I': case 'i': case 'f':
            size = 4;
            break;
        case 'l': case 'L': case 'd':
            size = 8;
            break;
        case 'D':
            size = 5;
            break;
        case 'V':
            size = 0;
            break;
        case 'T':
            if (end - off < 8)
                return "a 'T' value runs past the end of its table";
            if (be64(b + off) > TIMESTAMP_MAX)
                return "a timestamp past the year 9999";
            size = 8;
            break;
        case 'S': case 'x': case 'F': case 'A': {
            if (end - off < 4)
                return "a length runs past the end of its table";
            unsigned long long n = be32(b + off);
            off += 4;
            if ((unsigned long long)(end - off) < n)
                return "a value runs past the end of its table";
            if (tag == 'F' || tag == 'A') {
                const char *why = table_error(b, off, off + (Py_ssize_t)n, depth + 1, tag == 'A');
                if (why)
                    return why;
            }
            size = (Py_ssize_t)n;
            break;
        }
        default:
            return "unknown field type in the headers table";
        }
        if (end - off < size)
            return "a value runs past the end of its table";
        off += size;
    }
    return NULL;
}

/* Why b[start:end] is not a well-formed basic property list, or NULL (properties.py's rules). */
static const char *props_error(const unsigned char *b, Py_ssize_t start, Py_ssize_t end)
{
    if (end - start < 2)
        return "the property flags are cut short";
    unsigned int flags = be16(b + start);
    if (flags & 1)
        return "a second property flag word (no basic property needs one)";
    Py_ssize_t off = start + 2;
    for (unsigned int flag = 0x8000; flag >= 0x0004; flag >>= 1) {
        if (!(flags & flag))
            continue;
        if (flag == 0x2000) { /* headers */
            if (end - off < 4)
                return "the headers table length runs past the end of the property list";
            unsigned long long n = be32(b + off);
            off += 4;
            if ((unsigned long long)(end - off) < n)
                return "the headers table runs past the end of the property list";
            const char *why = table_error(b, off, off + (Py_ssize_t)n, 1, 0);
            if (why)
                return why;
            off += (Py_ssize_t)n;
        }
        else if (flag == 0x1000 || flag == 0x0800) { /* delivery-mode, priority: octets */
            if (end - off < 1)
                return "an octet property runs past the end of the property list";
            off += 1;
        }
        else if (flag == 0x0040) { /* timestamp */
            if (end - off < 8)
                return "timestamp runs past the end of the property list";
            off += 8;
        }
        else { /* the shortstrs */
            if (end - off < 1 || end - off - 1 < (Py_ssize_t)b[off])
                return "a shortstr property runs past the end of the property list";
            off += 1 + (Py_ssize_t)b[off];
        }
    }
    if (off != end)
        return "octets after the last property";
    return NULL;
}

static PyObject *properties_error(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "properties_error expects (buf, start, end)");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (start < 0 || end > view.len || start > end) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "start and end must lie within the buffer");
        return NULL;
    }
    const char *why = props_error((const unsigned char *)view.buf, start, end);
    PyBuffer_Release(&view);
    if (why == NULL)
        Py_RETURN_NONE;
    return PyUnicode_FromString(why);
}

/* last if its octets equal b[start:end], else new bytes (NULL on memory error). */
static PyObject *same_or_new(PyObject *last, const unsigned char *b, Py_ssize_t start, Py_ssize_t end)
{
    Py_ssize_t n = end - start;
    if (PyBytes_CheckExact(last) && PyBytes_GET_SIZE(last) == n && memcmp(PyBytes_AS_STRING(last), b + start, n) == 0) {
        Py_INCREF(last);
        return last;
    }
    return PyBytes_FromStringAndSize((const char *)b + start, n);
}

/* Where the spans of a whole basic.publish content at pos lie (method arguments, property list,
 * body), as take_publish's doc says; 0 when there is none or anything is unusual. A property
 * list equal to the octets at known_props (of known_len octets; NULL: none) was checked
 * before and is not scanned again; any other is. */
typedef struct {
    unsigned int channel;
    Py_ssize_t args, args_end, props, props_end, body, body_end, next;
} publish_spans;

static int publish_at(const unsigned char *b, Py_ssize_t len, Py_ssize_t pos, unsigned long long frame_max,
                      unsigned long long max_body, const char *known_props, Py_ssize_t known_len,
                      publish_spans *s, int *same_props)
{
    int type;
    unsigned int ch;
    Py_ssize_t ms, me, hs, he, bs, be;
    /* the method frame: basic.publish (60.40) */
    if (!frame_at(b, len, pos, frame_max, &type, &s->channel, &ms, &me) || type != FRAME_METHOD || me - ms < 4 ||
        be16(b + ms) != 60 || be16(b + ms + 2) != 40)
        return 0;
    /* the content header: class 60, weight, body size, then the property flags and list */
    if (!frame_at(b, len, me + 1, frame_max, &type, &ch, &hs, &he) || type != FRAME_HEADER || ch != s->channel ||
        he - hs < 14 || be16(b + hs) != 60)
        return 0;
    unsigned long long body_size = be64(b + hs + 4);
    if (body_size > max_body)
        return 0;
    s->next = he + 1;
    if (body_size) {
        if (!frame_at(b, len, he + 1, frame_max, &type, &ch, &bs, &be) || type != FRAME_BODY || ch != s->channel ||
            (unsigned long long)(be - bs) != body_size)
            return 0;
        s->next = be + 1;
    }
    else {
        bs = be = 0;
    }
    Py_ssize_t props_len = he - hs - 12;
    *same_props = known_props != NULL && known_len == props_len && memcmp(known_props, b + hs + 12, props_len) == 0;
    if (!*same_props && props_error(b, hs + 12, he) != NULL)
        return 0;
    s->args = ms + 4;
    s->args_end = me;
    s->props = hs + 12;
    s->props_end = he;
    s->body = bs;
    s->body_end = be;
    return 1;
}

/* A new 5-tuple, taking the references it is given (NULL if any is NULL, all released). */
static PyObject *tuple5(PyObject *a, PyObject *b, PyObject *c, PyObject *d, PyObject *e)
{
    PyObject *t = (a && b && c && d && e) ? PyTuple_New(5) : NULL;
    if (t == NULL) {
        Py_XDECREF(a);
        Py_XDECREF(b);
        Py_XDECREF(c);
        Py_XDECREF(d);
        Py_XDECREF(e);
        return NULL;
    }
    PyTuple_SET_ITEM(t, 0, a);
    PyTuple_SET_ITEM(t, 1, b);
    PyTuple_SET_ITEM(t, 2, c);
    PyTuple_SET_ITEM(t, 3, d);
    PyTuple_SET_ITEM(t, 4, e);
    return t;
}

/* The arguments the frame takers (take_publish, take_publishes, take_acks) share: exactly
 * `want` of them, the buffer first, then pos and frame_max, and where the taker has them (an
 * index, or -1) max_body and limit. 0 with the buffer's view held (the caller releases it), or
 * -1 with an exception set and nothing held. */
typedef struct {
    Py_buffer view;
    Py_ssize_t pos, limit;
    unsigned long long frame_max, max_body;
} taker_args;

static int parse_taker_args(const char *name, PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want,
                            int max_body_at, int limit_at, taker_args *a)
{
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s expects %zd arguments", name, want);
        return -1;
    }
    a->pos = PyLong_AsSsize_t(args[1]);
    a->frame_max = PyLong_AsUnsignedLongLong(args[2]);
    a->max_body = max_body_at >= 0 ? PyLong_AsUnsignedLongLong(args[max_body_at]) : 0;
    a->limit = limit_at >= 0 ? PyLong_AsSsize_t(args[limit_at]) : 0;
    if (PyErr_Occurred())
        return -1;
    return PyObject_GetBuffer(args[0], &a->view, PyBUF_SIMPLE) < 0 ? -1 : 0;
}

static PyObject *take_publish(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    taker_args a;
    if (parse_taker_args("take_publish", args, nargs, 6, 3, -1, &a) < 0)
        return NULL;
    Py_buffer *view = &a.view;
    Py_ssize_t pos = a.pos;
    unsigned long long frame_max = a.frame_max, max_body = a.max_body;
    const unsigned char *b = (const unsigned char *)view->buf;
    PyObject *last_props = args[5];
    int known = PyBytes_CheckExact(last_props);
    publish_spans s;
    int same_props;
    PyObject *result = Py_None;
    if (publish_at(b, view->len, pos, frame_max, max_body, known ? PyBytes_AS_STRING(last_props) : NULL,
                   known ? PyBytes_GET_SIZE(last_props) : 0, &s, &same_props)) {
        PyObject *props;
        if (same_props) {
            Py_INCREF(last_props);
            props = last_props;
        }
        else
            props = PyBytes_FromStringAndSize((const char *)b + s.props, s.props_end - s.props);
        result = tuple5(PyLong_FromUnsignedLong(s.channel), same_or_new(args[4], b, s.args, s.args_end), props,
                        PyBytes_FromStringAndSize((const char *)b + s.body, s.body_end - s.body),
                        PyLong_FromSsize_t(s.next));
    }
    else
        Py_INCREF(result);
    PyBuffer_Release(view);
    return result;
}

/*
 * take_publishes(buf, pos, frame_max, max_body, last_args, last_props, limit)
 *     A run of basic.publish contents at pos: what take_publish takes, then as many more
 *     (up to limit in all) as follow it at once on the same channel with the same method
 *     argument octets (exchange, routing key, flags), each as take_publish would take it.
 *     None when take_publish would return None; a run of one is what take_publish returns;
 *     else (channel, args, props, bodies, next_pos) with props and bodies lists of the same
 *     length (two or more), in order. A property list equal to the
 *     one before it (last_props for the first) is that very object. The run stops before
 *     anything take_publish would not take, which the next call (or the general path) gets.
 */
static PyObject *take_publishes(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    taker_args a;
    if (parse_taker_args("take_publishes", args, nargs, 7, 3, 6, &a) < 0)
        return NULL;
    Py_buffer *view = &a.view;
    Py_ssize_t pos = a.pos, limit = a.limit;
    unsigned long long frame_max = a.frame_max, max_body = a.max_body;
    const unsigned char *b = (const unsigned char *)view->buf;
    Py_ssize_t len = view->len;
    PyObject *props = args[5];  /* the previous message's property list (borrowed) */
    publish_spans first, s;
    int same_props;
    int known = PyBytes_CheckExact(props);
    if (!publish_at(b, len, pos, frame_max, max_body, known ? PyBytes_AS_STRING(props) : NULL,
                    known ? PyBytes_GET_SIZE(props) : 0, &first, &same_props)) {
        PyBuffer_Release(view);
        Py_RETURN_NONE;
    }
    /* the first publish as take_publish takes it; lists only once a second one follows */
    PyObject *props_list = NULL, *bodies = NULL;
    PyObject *margs = same_or_new(args[4], b, first.args, first.args_end);
    PyObject *p = NULL, *body = NULL;
    if (margs == NULL)
        goto fail;
    if (same_props) {
        Py_INCREF(props);
        p = props;
    }
    else if ((p = PyBytes_FromStringAndSize((const char *)b + first.props, first.props_end - first.props)) == NULL)
        goto fail;
    if ((body = PyBytes_FromStringAndSize((const char *)b + first.body, first.body_end - first.body)) == NULL)
        goto fail;
    pos = first.next;
    Py_ssize_t args_len = first.args_end - first.args;
    for (Py_ssize_t n = 1; n < limit; n++) {
        if (!publish_at(b, len, pos, frame_max, max_body, PyBytes_AS_STRING(p), PyBytes_GET_SIZE(p), &s,
                        &same_props) || s.channel != first.channel || s.args_end - s.args != args_len ||
            memcmp(b + s.args, b + first.args, args_len) != 0)
            break;
        if (props_list == NULL) { /* a run: the first one goes into the lists too */
            if ((props_list = PyList_New(0)) == NULL || (bodies = PyList_New(0)) == NULL ||
                PyList_Append(props_list, p) < 0 || PyList_Append(bodies, body) < 0)
                goto fail;
            Py_DECREF(body);
            body = NULL;
        }
        Py_DECREF(p);  /* the list holds it: borrowed until replaced here */
        if (same_props)
            Py_INCREF(p);
        else if ((p = PyBytes_FromStringAndSize((const char *)b + s.props, s.props_end - s.props)) == NULL)
            goto fail;
        if (PyList_Append(props_list, p) < 0)
            goto fail;
        PyObject *next_body = PyBytes_FromStringAndSize((const char *)b + s.body, s.body_end - s.body);
        if (next_body == NULL)
            goto fail;
        int failed = PyList_Append(bodies, next_body);
        Py_DECREF(next_body);
        if (failed)
            goto fail;
        pos = s.next;
    }
    PyBuffer_Release(view);
    if (props_list == NULL) /* a run of one: take_publish's answer, no lists */
        return tuple5(PyLong_FromUnsignedLong(first.channel), margs, p, body, PyLong_FromSsize_t(pos));
    Py_DECREF(p);
    return tuple5(PyLong_FromUnsignedLong(first.channel), margs, props_list, bodies, PyLong_FromSsize_t(pos));
fail:
    Py_XDECREF(p);
    Py_XDECREF(body);
    Py_XDECREF(props_list);
    Py_XDECREF(bodies);
    Py_XDECREF(margs);
    PyBuffer_Release(view);
    return NULL;
}

/*
 * deliver_frames(channel, consumer_tag, delivery_tag, redelivered, exchange, routing_key,
 *                properties, body) -> bytes
 *     basic.deliver's method frame, content header frame and one body frame as one bytes
 *     object: what ServerConnection.send_deliver builds with packs and a join for a body that
 *     fits one frame (the caller checks that). consumer_tag, exchange and routing_key come
 *     shortstr-encoded (length octet included); properties are the encoded flags and list.
 */
static PyObject *deliver_frames(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "deliver_frames expects 8 arguments");
        return NULL;
    }
    unsigned long channel = PyLong_AsUnsignedLong(args[0]);
    unsigned long long tag = PyLong_AsUnsignedLongLong(args[2]);
    int redelivered = PyObject_IsTrue(args[3]);
    if (PyErr_Occurred() || redelivered < 0)
        return NULL;
    if (channel > 0xFFFF) {
        PyErr_SetString(PyExc_OverflowError, "channel above 65535");
        return NULL;
    }
    Py_buffer v[5];  /* consumer_tag, exchange, routing_key, properties, body */
    PyObject *const src[5] = {args[1], args[4], args[5], args[6], args[7]};
    int got = 0;
    PyObject *out = NULL;
    for (; got < 5; got++)
        if (PyObject_GetBuffer(src[got], &v[got], PyBUF_SIMPLE) < 0)
            goto done;
    Py_ssize_t method_size = 4 + v[0].len + 9 + v[1].len + v[2].len;
    Py_ssize_t total = 7 + method_size + 1 + 7 + 12 + v[3].len + 1 + 7 + v[4].len + 1;
    out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        goto done;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    *p++ = FRAME_METHOD;
    p = put16(p, (unsigned int)channel);
    p = put32(p, (unsigned long long)method_size);
    p = put16(p, 60);
    p = put16(p, 60);
    p = put(p, &v[0]);
    p = put64(p, tag);
    *p++ = redelivered ? 1 : 0;
    p = put(p, &v[1]);
    p = put(p, &v[2]);
    *p++ = FRAME_END;
    *p++ = FRAME_HEADER;
    p = put16(p, (unsigned int)channel);
    p = put32(p, (unsigned long long)(12 + v[3].len));
    p = put16(p, 60);
    p = put16(p, 0);
    p = put64(p, (unsigned long long)v[4].len);
    p = put(p, &v[3]);
    *p++ = FRAME_END;
    *p++ = FRAME_BODY;
    p = put16(p, (unsigned int)channel);
    p = put32(p, (unsigned long long)v[4].len);
    p = put(p, &v[4]);
    *p++ = FRAME_END;
done:
    while (got-- > 0)
        PyBuffer_Release(&v[got]);
    return out;
}

/* ---- hand-over batches between worker processes (warren/codec/handover.py) ----------------
 *
 * take_handover(buf, pos, cls, defaults, resolve_name, resolve_destination, untrack)
 *     The compiled twin of handover.take_batch_py, the same answers and errors: None while the
 *     batch at pos is incomplete, ValueError for a complete one that is malformed (every read
 *     is checked against the batch's own end), else (items, destinations, flags, first_ticket,
 *     next_pos). Items of cls are made by cls's tp_new without __init__, and their slots
 *     (MESSAGE_SLOTS, then defaults) stored straight into the object where the class attribute
 *     is a plain object slot (a member descriptor), else set with setattr: building a Message
 *     this way costs a fraction of calling Message(...) (bench/worker_transfer.py).
 *
 * encode_handover(first_ticket, messages, destinations, mandatory)
 *     The compiled twin of handover.encode_batch_py: the same octets from the same arguments.
 */
#define HANDOVER_VERSION 1
#define HANDOVER_PERSISTENT 0x01
#define HANDOVER_MANDATORY 0x02
#define HANDOVER_TTL 0x04
#define HANDOVER_HEAD 20        /* version .. first ticket, after the u32 size */
#define HANDOVER_MESSAGE_MIN 13 /* flags, four indexes, body length */
#define HANDOVER_TABLE_MAX 0xFFFF
#define HANDOVER_SLOTS 8

/* Message's slot names, in handover.MESSAGE_SLOTS's order (interned once) */
static const char *const handover_slot_names[HANDOVER_SLOTS] = {
    "exchange", "exchange_ss", "routing_key", "routing_key_ss", "properties", "body", "persistent", "ttl"};
static PyObject *handover_slots[HANDOVER_SLOTS];

static int handover_names_ready(void)
{
    if (handover_slots[0] != NULL)
        return 0;
    for (int i = 0; i < HANDOVER_SLOTS; i++)
        if ((handover_slots[i] = PyUnicode_InternFromString(handover_slot_names[i])) == NULL)
            return -1;
    return 0;
}

static PyObject *handover_error(const char *why)
{
    PyErr_Format(PyExc_ValueError, "handover batch: %s", why);
    return NULL;
}

/* Where one attribute of tp's instances is stored: the offset of a writable object slot, or -1
 * (then it is set through setattr: a property, or a class without that slot). */
typedef struct {
    PyObject *name; /* borrowed */
    Py_ssize_t offset;
} slot_target;

static int set_slot(PyObject *obj, const slot_target *t, PyObject *value)
{
    if (t->offset < 0)
        return PyObject_SetAttr(obj, t->name, value);
    PyObject **p = (PyObject **)((char *)obj + t->offset);
    PyObject *old = *p;
    Py_INCREF(value);
    *p = value;
    Py_XDECREF(old);
    return 0;
}

/* resolve_name's answer for one shortstr, checked: a new reference to a (str, shortstr) tuple */
static PyObject *resolve_one_name(PyObject *resolve, const unsigned char *p)
{
    PyObject *ss = PyBytes_FromStringAndSize((const char *)p, 1 + (Py_ssize_t)p[0]);
    if (ss == NULL)
        return NULL;
    PyObject *pair;
    if (resolve == Py_None) {
        PyObject *s = PyUnicode_DecodeUTF8((const char *)p + 1, p[0], "surrogateescape");
        pair = s != NULL ? PyTuple_Pack(2, s, ss) : NULL;
        Py_XDECREF(s);
    }
    else
        pair = PyObject_CallOneArg(resolve, ss);
    Py_DECREF(ss);
    if (pair != NULL && (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2 ||
                         !PyUnicode_CheckExact(PyTuple_GET_ITEM(pair, 0)))) {
        Py_DECREF(pair);
        PyErr_SetString(PyExc_TypeError, "resolve_name must return a (str, shortstr) tuple");
        return NULL;
    }
    return pair;
}

/* A message's TTL in seconds from its milliseconds, as Python's ms / 1000 gives it */
static PyObject *ttl_seconds(unsigned long long ms)
{
    if (ms < (1ULL << 53))
        return PyFloat_FromDouble((double)ms / 1000.0);
    PyObject *n = PyLong_FromUnsignedLongLong(ms), *k = PyLong_FromLong(1000);
    PyObject *r = (n && k) ? PyNumber_TrueDivide(n, k) : NULL;
    Py_XDECREF(n);
    Py_XDECREF(k);
    return r;
}

static PyObject *take_handover(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "take_handover expects 7 arguments");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    PyObject *cls = args[2], *defaults = args[3], *resolve_name = args[4], *resolve_dest = args[5];
    int untrack_items = PyObject_IsTrue(args[6]);
    if (untrack_items < 0 || handover_names_ready() < 0)
        return NULL;
    if (cls != Py_None && !PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "cls must be a class or None");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *b = (const unsigned char *)view.buf;
    PyObject *result = NULL, *items = NULL, *item_dests = NULL, *flags = NULL, *fast_defaults = NULL;
    PyObject *empty = NULL;
    PyObject **names = NULL, **props = NULL, **dests = NULL;
    slot_target *targets = NULL;
    Py_ssize_t n_names = 0, n_props = 0, n_dests = 0, n_defaults = 0;
    if (pos < 0 || view.len - pos < 4) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    unsigned long long size = be32(b + pos);
    if ((unsigned long long)(view.len - pos - 4) < size) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    Py_ssize_t off = pos + 4, end = pos + 4 + (Py_ssize_t)size;
    if (end - off < HANDOVER_HEAD) {
        handover_error("a table or message runs past the end of its batch");
        goto done;
    }
    if (b[off] != HANDOVER_VERSION || b[off + 1] != 0) {
        PyErr_Format(PyExc_ValueError, "handover batch: version %d (reserved %d), this worker reads version %d",
                     b[off], b[off + 1], HANDOVER_VERSION);
        goto done;
    }
    Py_ssize_t want_names = be16(b + off + 2), want_props = be16(b + off + 4), want_dests = be16(b + off + 6);
    unsigned long long n_messages = be32(b + off + 8), first_ticket = be64(b + off + 12);
    off += HANDOVER_HEAD;
    /* the tables: what the messages refer to, made once per batch */
    if ((names = PyMem_Calloc(want_names + 1, sizeof(PyObject *))) == NULL ||
        (props = PyMem_Calloc(want_props + 1, sizeof(PyObject *))) == NULL ||
        (dests = PyMem_Calloc(want_dests + 1, sizeof(PyObject *))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; n_names < want_names; n_names++) {
        if (end - off < 1 || end - off - 1 < (Py_ssize_t)b[off]) {
            handover_error("a table or message runs past the end of its batch");
            goto done;
        }
        if ((names[n_names] = resolve_one_name(resolve_name, b + off)) == NULL)
            goto done;
        off += 1 + (Py_ssize_t)b[off];
    }
    for (; n_props < want_props; n_props++) {
        if (end - off < 4 || (unsigned long long)(end - off - 4) < be32(b + off)) {
            handover_error("a table or message runs past the end of its batch");
            goto done;
        }
        Py_ssize_t n = (Py_ssize_t)be32(b + off);
        if ((props[n_props] = PyBytes_FromStringAndSize((const char *)b + off + 4, n)) == NULL)
            goto done;
        off += 4 + n;
    }
    for (; n_dests < want_dests; n_dests++) {
        if (end - off < 4) {
            handover_error("a table or message runs past the end of its batch");
            goto done;
        }
        Py_ssize_t vhost = be16(b + off), count = be16(b + off + 2);
        off += 4;
        if (count == 0) {
            handover_error("a destination names no queue");
            goto done;
        }
        if (end - off < 2 * count) {
            handover_error("a table or message runs past the end of its batch");
            goto done;
        }
        int past = vhost >= n_names;
        for (Py_ssize_t q = 0; q < count; q++)
            past |= (Py_ssize_t)be16(b + off + 2 * q) >= n_names;
        if (past) {
            handover_error("a destination refers past the name table");
            goto done;
        }
        PyObject *queues = PyTuple_New(count);
        if (queues == NULL)
            goto done;
        for (Py_ssize_t q = 0; q < count; q++) {
            PyObject *name = PyTuple_GET_ITEM(names[be16(b + off + 2 * q)], 0);
            Py_INCREF(name);
            PyTuple_SET_ITEM(queues, q, name);
        }
        off += 2 * count;
        PyObject *vhost_name = PyTuple_GET_ITEM(names[vhost], 0);
        if (resolve_dest == Py_None)
            dests[n_dests] = PyTuple_Pack(2, vhost_name, queues);
        else {
            PyObject *call_args[2] = {vhost_name, queues};
            dests[n_dests] = PyObject_Vectorcall(resolve_dest, call_args, 2, NULL);
        }
        Py_DECREF(queues);
        if (dests[n_dests] == NULL)
            goto done;
    }
    /* the messages */
    if (n_messages > (unsigned long long)(end - off) / HANDOVER_MESSAGE_MIN) {
        handover_error("a table or message runs past the end of its batch");
        goto done;
    }
    PyTypeObject *tp = cls != Py_None ? (PyTypeObject *)cls : NULL;
    if (tp != NULL) {
        if ((fast_defaults = PySequence_Fast(defaults, "defaults must be a sequence of (slot, value) pairs")) == NULL)
            goto done;
        n_defaults = PySequence_Fast_GET_SIZE(fast_defaults);
        if ((targets = PyMem_Calloc(HANDOVER_SLOTS + n_defaults, sizeof(slot_target))) == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (int i = 0; i < HANDOVER_SLOTS; i++) {
            targets[i].name = handover_slots[i];
            targets[i].offset = slot_offset(tp, handover_slots[i]);
        }
        for (Py_ssize_t i = 0; i < n_defaults; i++) {
            PyObject *pair = PySequence_Fast_GET_ITEM(fast_defaults, i);
            if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(pair, 0))) {
                PyErr_SetString(PyExc_TypeError, "defaults must be a sequence of (slot, value) pairs");
                goto done;
            }
            targets[HANDOVER_SLOTS + i].name = PyTuple_GET_ITEM(pair, 0);
            targets[HANDOVER_SLOTS + i].offset = slot_offset(tp, PyTuple_GET_ITEM(pair, 0));
        }
        if ((empty = PyTuple_New(0)) == NULL)
            goto done;
    }
    if ((items = PyList_New((Py_ssize_t)n_messages)) == NULL ||
        (item_dests = PyList_New((Py_ssize_t)n_messages)) == NULL ||
        (flags = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n_messages)) == NULL)
        goto done;
    unsigned char *flag_out = (unsigned char *)PyBytes_AS_STRING(flags);
    for (Py_ssize_t i = 0; i < (Py_ssize_t)n_messages; i++) {
        if (end - off < HANDOVER_MESSAGE_MIN - 4) {
            handover_error("a table or message runs past the end of its batch");
            goto done;
        }
        unsigned int f = b[off];
        Py_ssize_t ex = be16(b + off + 1), rk = be16(b + off + 3), p = be16(b + off + 5), d = be16(b + off + 7);
        off += 9;
        if (f & ~(HANDOVER_PERSISTENT | HANDOVER_MANDATORY | HANDOVER_TTL)) {
            PyErr_Format(PyExc_ValueError, "handover batch: unknown message flags 0x%02x", f);
            goto done;
        }
        if (ex >= n_names || rk >= n_names || p >= n_props || d >= n_dests) {
            handover_error("a message refers past its batch's tables");
            goto done;
        }
        unsigned long long ttl_ms = 0;
        if (f & HANDOVER_TTL) {
            if (end - off < 8) {
                handover_error("a table or message runs past the end of its batch");
                goto done;
            }
            ttl_ms = be64(b + off);
            off += 8;
        }
        if (end - off < 4 || (unsigned long long)(end - off - 4) < be32(b + off)) {
            handover_error("a table or message runs past the end of its batch");
            goto done;
        }
        Py_ssize_t body_len = (Py_ssize_t)be32(b + off);
        PyObject *body = PyBytes_FromStringAndSize((const char *)b + off + 4, body_len);
        if (body == NULL)
            goto done;
        off += 4 + body_len;
        PyObject *ttl = Py_None;
        if (f & HANDOVER_TTL) {
            if ((ttl = ttl_seconds(ttl_ms)) == NULL) {
                Py_DECREF(body);
                goto done;
            }
        }
        else
            Py_INCREF(ttl);
        PyObject *item;
        if (tp == NULL)
            item = PyTuple_Pack(5, PyTuple_GET_ITEM(names[ex], 0), PyTuple_GET_ITEM(names[rk], 0), props[p], body,
                                ttl);
        else if ((item = tp->tp_new(tp, empty, NULL)) != NULL) {
            if (!PyObject_TypeCheck(item, tp)) {
                PyErr_SetString(PyExc_TypeError, "cls's __new__ made an object of another class");
                Py_CLEAR(item);
            }
            else {
                PyObject *values[HANDOVER_SLOTS] = {
                    PyTuple_GET_ITEM(names[ex], 0), PyTuple_GET_ITEM(names[ex], 1), PyTuple_GET_ITEM(names[rk], 0),
                    PyTuple_GET_ITEM(names[rk], 1), props[p], body, (f & HANDOVER_PERSISTENT) ? Py_True : Py_False,
                    ttl};
                for (Py_ssize_t k = 0; item != NULL && k < HANDOVER_SLOTS + n_defaults; k++) {
                    PyObject *v = k < HANDOVER_SLOTS ? values[k]
                                                     : PyTuple_GET_ITEM(
                                                           PySequence_Fast_GET_ITEM(fast_defaults, k - HANDOVER_SLOTS), 1);
                    if (set_slot(item, &targets[k], v) < 0)
                        Py_CLEAR(item);
                }
                if (item != NULL && untrack_items && PyObject_GC_IsTracked(item))
                    PyObject_GC_UnTrack(item);
            }
        }
        Py_DECREF(body);
        Py_DECREF(ttl);
        if (item == NULL)
            goto done;
        PyList_SET_ITEM(items, i, item);
        Py_INCREF(dests[d]);
        PyList_SET_ITEM(item_dests, i, dests[d]);
        flag_out[i] = (unsigned char)f;
    }
    if (off != end) {
        PyErr_Format(PyExc_ValueError, "handover batch: %zd octets after the last message", end - off);
        goto done;
    }
    result = Py_BuildValue("(OOOKn)", items, item_dests, flags, first_ticket, end);
done:
    for (Py_ssize_t i = 0; i < n_names; i++)
        Py_XDECREF(names[i]);
    for (Py_ssize_t i = 0; i < n_props; i++)
        Py_XDECREF(props[i]);
    for (Py_ssize_t i = 0; i < n_dests; i++)
        Py_XDECREF(dests[i]);
    PyMem_Free(names);
    PyMem_Free(props);
    PyMem_Free(dests);
    PyMem_Free(targets);
    Py_XDECREF(empty);
    Py_XDECREF(fast_defaults);
    Py_XDECREF(items);
    Py_XDECREF(item_dests);
    Py_XDECREF(flags);
    PyBuffer_Release(&view);
    return result;
}

/* encode_handover's tables: a dict from key to index and the entries' octets in index order */
typedef struct {
    PyObject *index; /* key -> int */
    PyObject *last_key; /* the key looked up last (most messages repeat their neighbour's); held, so
                         * that no other object can take its address while it is compared with */
    Py_ssize_t last, count, octets;
} handover_table;

/* key's index in t; a new entry (of `octets` octets in the batch) when it is not there yet;
 * -1 with an exception on error, -2 when the entry is new (the caller then writes it down and
 * its index is count - 1). */
static Py_ssize_t table_index(handover_table *t, PyObject *key, Py_ssize_t octets)
{
    if (key == t->last_key)
        return t->last;
    PyObject *got = PyDict_GetItemWithError(t->index, key);
    if (got != NULL) {
        Py_INCREF(key);
        Py_XSETREF(t->last_key, key);
        return t->last = PyLong_AsSsize_t(got);
    }
    if (PyErr_Occurred())
        return -1;
    if (t->count >= HANDOVER_TABLE_MAX) {
        PyErr_SetString(PyExc_ValueError,
                        "more than 65535 distinct names, property lists or destinations in one batch");
        return -1;
    }
    PyObject *i = PyLong_FromSsize_t(t->count);
    if (i == NULL || PyDict_SetItem(t->index, key, i) < 0) {
        Py_XDECREF(i);
        return -1;
    }
    Py_DECREF(i);
    Py_INCREF(key);
    Py_XSETREF(t->last_key, key);
    t->last = t->count++;
    t->octets += octets;
    return -2;
}

/* the index of a name given as shortstr octets (bytes), appended to `order` when new */
static Py_ssize_t name_index(handover_table *t, PyObject *order, PyObject *ss)
{
    if (!PyBytes_Check(ss) || PyBytes_GET_SIZE(ss) < 1 ||
        PyBytes_GET_SIZE(ss) != 1 + (Py_ssize_t)(unsigned char)PyBytes_AS_STRING(ss)[0]) {
        PyErr_SetString(PyExc_ValueError, "a name must be a shortstr (its length octet first)");
        return -1;
    }
    Py_ssize_t i = table_index(t, ss, PyBytes_GET_SIZE(ss));
    if (i == -2) {
        if (PyList_Append(order, ss) < 0)
            return -1;
        i = t->count - 1;
    }
    return i;
}

/* a str name's shortstr octets (new bytes) */
static PyObject *shortstr_of(PyObject *name)
{
    PyObject *u = PyUnicode_Check(name) ? PyUnicode_AsEncodedString(name, "utf-8", "surrogateescape") : NULL;
    if (u == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "vhost and queue names must be str");
        return NULL;
    }
    Py_ssize_t n = PyBytes_GET_SIZE(u);
    if (n > 255) {
        Py_DECREF(u);
        PyErr_SetString(PyExc_ValueError, "name longer than 255 octets");
        return NULL;
    }
    PyObject *ss = PyBytes_FromStringAndSize(NULL, 1 + n);
    if (ss != NULL) {
        PyBytes_AS_STRING(ss)[0] = (char)n;
        memcpy(PyBytes_AS_STRING(ss) + 1, PyBytes_AS_STRING(u), n);
    }
    Py_DECREF(u);
    return ss;
}

/* Reads a message's attribute straight from its slot when the message is of the class the
 * offsets were found for and the slot is a plain object slot (a Message), else with getattr:
 * six getattrs were most of encode_handover's cost per message. */
typedef struct {
    PyTypeObject *type; /* held */
    Py_ssize_t offset[HANDOVER_SLOTS];
} slot_reader;

static PyObject *read_slot(slot_reader *r, PyObject *obj, int i)
{
    if (Py_TYPE(obj) != r->type) {
        Py_INCREF(Py_TYPE(obj));
        Py_XSETREF(r->type, Py_TYPE(obj));
        for (int k = 0; k < HANDOVER_SLOTS; k++)
            r->offset[k] = slot_offset(r->type, handover_slots[k]);
    }
    if (r->offset[i] >= 0) {
        PyObject *v = *(PyObject **)((char *)obj + r->offset[i]);
        if (v != NULL) {
            Py_INCREF(v);
            return v;
        }
    }
    return PyObject_GetAttr(obj, handover_slots[i]); /* also raises AttributeError for an empty slot */
}

/* what encode_handover keeps of each message between its two passes */
typedef struct {
    unsigned char flags;
    unsigned int exchange, routing_key, props, dest;
    unsigned long long ttl_ms;
    PyObject *body; /* owned */
    Py_ssize_t body_len;
} handover_entry;

/* a Message's ttl (seconds) as milliseconds, as round(ttl * 1000) gives it */
static int ttl_millis(PyObject *ttl, unsigned long long *ms)
{
    double v = PyFloat_AsDouble(ttl);
    if (v == -1.0 && PyErr_Occurred())
        return -1;
    double r = nearbyint(v * 1000.0); /* round half to even, as round() */
    if (!(r >= 0.0 && r < 18446744073709551616.0)) {
        PyErr_SetString(PyExc_ValueError, "ttl out of range");
        return -1;
    }
    *ms = (unsigned long long)r;
    return 0;
}

static PyObject *encode_handover(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "encode_handover expects 4 arguments");
        return NULL;
    }
    unsigned long long first_ticket = PyLong_AsUnsignedLongLong(args[0]);
    if (PyErr_Occurred() || handover_names_ready() < 0)
        return NULL;
    PyObject *out = NULL, *msgs = NULL, *dsts = NULL, *mand = NULL;
    handover_table names = {0}, props = {0}, dests = {0};
    PyObject *name_order = NULL, *prop_order = NULL, *dest_parts = NULL;
    handover_entry *entries = NULL;
    slot_reader reader = {NULL};
    Py_ssize_t n = 0, filled = 0;
    if ((msgs = PySequence_Fast(args[1], "messages must be a sequence")) == NULL ||
        (dsts = PySequence_Fast(args[2], "destinations must be a sequence")) == NULL ||
        (args[3] != Py_None && (mand = PySequence_Fast(args[3], "mandatory must be a sequence")) == NULL))
        goto done;
    n = PySequence_Fast_GET_SIZE(msgs);
    if (PySequence_Fast_GET_SIZE(dsts) != n || (mand != NULL && PySequence_Fast_GET_SIZE(mand) != n)) {
        PyErr_SetString(PyExc_ValueError, "messages, destinations and mandatory must have the same length");
        goto done;
    }
    if ((names.index = PyDict_New()) == NULL || (props.index = PyDict_New()) == NULL ||
        (dests.index = PyDict_New()) == NULL || (name_order = PyList_New(0)) == NULL ||
        (prop_order = PyList_New(0)) == NULL || (dest_parts = PyList_New(0)) == NULL)
        goto done;
    if ((entries = PyMem_Calloc(n + 1, sizeof(handover_entry))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    unsigned long long total = 4 + HANDOVER_HEAD;
    /* pass 1: the tables (in the order the Python twin makes them) and each message's indexes */
    for (; filled < n; filled++) {
        PyObject *msg = PySequence_Fast_GET_ITEM(msgs, filled), *dest = PySequence_Fast_GET_ITEM(dsts, filled);
        handover_entry *e = &entries[filled];
        Py_ssize_t d = table_index(&dests, dest, 0);
        if (d == -1)
            goto done;
        if (d == -2) { /* a new destination: (vhost, (queue, ...)) */
            PyObject *vhost, *queues, *fast_queues = NULL;
            if (!PyTuple_Check(dest) || PyTuple_GET_SIZE(dest) != 2) {
                PyErr_SetString(PyExc_TypeError, "a destination is (vhost, (queue name, ...))");
                goto done;
            }
            vhost = PyTuple_GET_ITEM(dest, 0);
            queues = PyTuple_GET_ITEM(dest, 1);
            if ((fast_queues = PySequence_Fast(queues, "a destination's queues must be a sequence")) == NULL)
                goto done;
            Py_ssize_t count = PySequence_Fast_GET_SIZE(fast_queues);
            PyObject *part = NULL;
            if (count < 1 || count > HANDOVER_TABLE_MAX)
                PyErr_SetString(PyExc_ValueError, "a destination names 1 to 65535 queues");
            else if ((part = PyBytes_FromStringAndSize(NULL, 4 + 2 * count)) != NULL) {
                unsigned char *w = (unsigned char *)PyBytes_AS_STRING(part);
                for (Py_ssize_t q = -1; q < count; q++) { /* the vhost first, then the queues */
                    PyObject *ss = shortstr_of(q < 0 ? vhost : PySequence_Fast_GET_ITEM(fast_queues, q));
                    Py_ssize_t i = ss != NULL ? name_index(&names, name_order, ss) : -1;
                    Py_XDECREF(ss);
                    if (i < 0) {
                        Py_CLEAR(part);
                        break;
                    }
                    put16(q < 0 ? w : w + 4 + 2 * q, (unsigned int)i);
                }
                if (part != NULL)
                    put16(w + 2, (unsigned int)count);
            }
            Py_DECREF(fast_queues);
            if (part == NULL)
                goto done;
            int failed = PyList_Append(dest_parts, part);
            dests.octets += PyBytes_GET_SIZE(part);
            Py_DECREF(part);
            if (failed)
                goto done;
            d = dests.count - 1;
        }
        e->dest = (unsigned int)d;
        PyObject *p = read_slot(&reader, msg, 4);
        if (p == NULL)
            goto done;
        if (!PyBytes_Check(p)) {
            Py_DECREF(p);
            PyErr_SetString(PyExc_TypeError, "a message's properties must be bytes");
            goto done;
        }
        Py_ssize_t pi = table_index(&props, p, 4 + PyBytes_GET_SIZE(p));
        if (pi == -2) {
            pi = PyList_Append(prop_order, p) < 0 ? -1 : props.count - 1;
        }
        Py_DECREF(p);
        if (pi < 0)
            goto done;
        e->props = (unsigned int)pi;
        PyObject *v = read_slot(&reader, msg, 6);
        int persistent = v != NULL ? PyObject_IsTrue(v) : -1;
        Py_XDECREF(v);
        if (persistent < 0)
            goto done;
        e->flags = persistent ? HANDOVER_PERSISTENT : 0;
        if (mand != NULL) {
            int m = PyObject_IsTrue(PySequence_Fast_GET_ITEM(mand, filled));
            if (m < 0)
                goto done;
            if (m)
                e->flags |= HANDOVER_MANDATORY;
        }
        if ((v = read_slot(&reader, msg, 7)) == NULL)
            goto done;
        if (v != Py_None) {
            e->flags |= HANDOVER_TTL;
            if (ttl_millis(v, &e->ttl_ms) < 0) {
                Py_DECREF(v);
                goto done;
            }
            total += 8;
        }
        Py_DECREF(v);
        for (int k = 0; k < 2; k++) { /* exchange_ss, routing_key_ss */
            if ((v = read_slot(&reader, msg, k ? 3 : 1)) == NULL)
                goto done;
            Py_ssize_t i = name_index(&names, name_order, v);
            Py_DECREF(v);
            if (i < 0)
                goto done;
            if (k)
                e->routing_key = (unsigned int)i;
            else
                e->exchange = (unsigned int)i;
        }
        if ((e->body = read_slot(&reader, msg, 5)) == NULL)
            goto done;
        Py_buffer body;
        if (PyObject_GetBuffer(e->body, &body, PyBUF_SIMPLE) < 0)
            goto done;
        e->body_len = body.len;
        PyBuffer_Release(&body);
        total += HANDOVER_MESSAGE_MIN + (unsigned long long)e->body_len;
    }
    total += names.octets + props.octets + dests.octets;
    if (total - 4 > 0xFFFFFFFFULL) {
        PyErr_SetString(PyExc_ValueError, "a batch over 4 GiB");
        goto done;
    }
    /* pass 2: the octets */
    if ((out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total)) == NULL)
        goto done;
    unsigned char *w = (unsigned char *)PyBytes_AS_STRING(out);
    w = put32(w, total - 4);
    *w++ = HANDOVER_VERSION;
    *w++ = 0;
    w = put16(w, (unsigned int)names.count);
    w = put16(w, (unsigned int)props.count);
    w = put16(w, (unsigned int)dests.count);
    w = put32(w, (unsigned long long)n);
    w = put64(w, first_ticket);
    for (Py_ssize_t i = 0; i < names.count; i++) {
        PyObject *ss = PyList_GET_ITEM(name_order, i);
        memcpy(w, PyBytes_AS_STRING(ss), PyBytes_GET_SIZE(ss));
        w += PyBytes_GET_SIZE(ss);
    }
    for (Py_ssize_t i = 0; i < props.count; i++) {
        PyObject *p = PyList_GET_ITEM(prop_order, i);
        w = put32(w, (unsigned long long)PyBytes_GET_SIZE(p));
        memcpy(w, PyBytes_AS_STRING(p), PyBytes_GET_SIZE(p));
        w += PyBytes_GET_SIZE(p);
    }
    for (Py_ssize_t i = 0; i < dests.count; i++) {
        PyObject *part = PyList_GET_ITEM(dest_parts, i);
        memcpy(w, PyBytes_AS_STRING(part), PyBytes_GET_SIZE(part));
        w += PyBytes_GET_SIZE(part);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        handover_entry *e = &entries[i];
        Py_buffer body;
        if (PyObject_GetBuffer(e->body, &body, PyBUF_SIMPLE) < 0) {
            Py_CLEAR(out);
            goto done;
        }
        if (body.len != e->body_len) { /* a bytearray body changed by an attribute read since pass 1 */
            PyBuffer_Release(&body);
            Py_CLEAR(out);
            PyErr_SetString(PyExc_ValueError, "a message body changed while the batch was encoded");
            goto done;
        }
        *w++ = e->flags;
        w = put16(w, e->exchange);
        w = put16(w, e->routing_key);
        w = put16(w, e->props);
        w = put16(w, e->dest);
        if (e->flags & HANDOVER_TTL)
            w = put64(w, e->ttl_ms);
        w = put32(w, (unsigned long long)body.len);
        memcpy(w, body.buf, body.len);
        w += body.len;
        PyBuffer_Release(&body);
    }
done:
    if (entries != NULL)
        for (Py_ssize_t i = 0; i <= filled && i < n; i++)
            Py_XDECREF(entries[i].body);
    PyMem_Free(entries);
    Py_XDECREF(names.index);
    Py_XDECREF(props.index);
    Py_XDECREF(dests.index);
    Py_XDECREF(reader.type);
    Py_XDECREF(names.last_key);
    Py_XDECREF(props.last_key);
    Py_XDECREF(dests.last_key);
    Py_XDECREF(name_order);
    Py_XDECREF(prop_order);
    Py_XDECREF(dest_parts);
    Py_XDECREF(msgs);
    Py_XDECREF(dsts);
    Py_XDECREF(mand);
    return out;
}

static PyObject *take_acks(PyObject *self, PyObject *const *args, Py_ssize_t nargs); /* at the end */

static PyMethodDef methods[] = {
    {"deliver_frames", (PyCFunction)(void (*)(void))deliver_frames, METH_FASTCALL,
     "deliver_frames(channel, consumer_tag, delivery_tag, redelivered, exchange, routing_key, properties, body) "
     "-> bytes: basic.deliver with its header and one body frame."},
    {"properties_error", (PyCFunction)(void (*)(void))properties_error, METH_FASTCALL,
     "properties_error(buf, start, end) -> None | str: why buf[start:end] is not a well-formed basic property list."},
    {"take_publish", (PyCFunction)(void (*)(void))take_publish, METH_FASTCALL,
     "take_publish(buf, pos, frame_max, max_body, last_args, last_props) -> None | "
     "(channel, args, props, body, next_pos): a whole basic.publish content at pos."},
    {"take_acks", (PyCFunction)(void (*)(void))take_acks, METH_FASTCALL,
     "take_acks(buf, pos, frame_max, limit) -> None | (channel, tag | [tag, ...], multiple, next_pos): "
     "basic.ack frames at pos."},
    {"take_handover", (PyCFunction)(void (*)(void))take_handover, METH_FASTCALL,
     "take_handover(buf, pos, cls, defaults, resolve_name, resolve_destination, untrack) -> None | "
     "(items, destinations, flags, first_ticket, next_pos): a hand-over batch (warren/codec/handover.py)."},
    {"encode_handover", (PyCFunction)(void (*)(void))encode_handover, METH_FASTCALL,
     "encode_handover(first_ticket, messages, destinations, mandatory) -> bytes: a hand-over batch."},
    {"take_publishes", (PyCFunction)(void (*)(void))take_publishes, METH_FASTCALL,
     "take_publishes(buf, pos, frame_max, max_body, last_args, last_props, limit) -> None | "
     "(channel, args, props_list, bodies, next_pos): a run of basic.publish contents at pos."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "warren.codec._speedups", "Compiled fast paths of the codec (optional).", -1, methods,
};

PyMODINIT_FUNC PyInit__speedups(void)
{
    return PyModule_Create(&module);
}

/*
 * take_acks(buf, pos, frame_max, limit)
 *     basic.ack method frames at pos, as a consumer that acks one message at a time sends them
 *     (warren/codec/acks.py has the Python twin, the same answers). None unless the frame at pos
 *     is a whole basic.ack with a payload of exactly 13 octets (class 60, method 80, uint64
 *     delivery tag, the bits octet) within frame_max: anything else is the general path's. For
 *     one: (channel, tag, multiple, next_pos). When more acks without multiple follow it at once
 *     on the same channel: (channel, [tag, ...], False, next_pos), up to limit tags. An ack with
 *     multiple set is always taken alone (a run stops before it).
 */
static int ack_at(const unsigned char *b, Py_ssize_t len, Py_ssize_t pos, unsigned long long frame_max,
                  unsigned int *channel, unsigned long long *tag, int *multiple, Py_ssize_t *next)
{
    int type;
    Py_ssize_t start, end;
    if (!frame_at(b, len, pos, frame_max, &type, channel, &start, &end))
        return 0;
    if (type != FRAME_METHOD || end - start != 13 || be32(b + start) != ((60ULL << 16) | 80ULL))
        return 0;
    *tag = be64(b + start + 4);
    *multiple = b[start + 12] & 1;
    *next = end + 1;
    return 1;
}

static PyObject *take_acks(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    taker_args a;
    if (parse_taker_args("take_acks", args, nargs, 4, -1, 3, &a) < 0)
        return NULL;
    Py_buffer *view = &a.view;
    Py_ssize_t pos = a.pos, limit = a.limit;
    unsigned long long frame_max = a.frame_max;
    const unsigned char *b = (const unsigned char *)view->buf;
    unsigned int channel, ch2;
    unsigned long long tag, tag2;
    int multiple, multiple2;
    Py_ssize_t next, next2;
    PyObject *result = NULL, *tags = NULL, *first = NULL;
    if (!ack_at(b, view->len, pos, frame_max, &channel, &tag, &multiple, &next)) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    if ((first = PyLong_FromUnsignedLongLong(tag)) == NULL)
        goto done;
    while (!multiple && ack_at(b, view->len, next, frame_max, &ch2, &tag2, &multiple2, &next2) && ch2 == channel &&
           !multiple2) {
        if (tags == NULL) {
            if (limit < 2)
                break;
            if ((tags = PyList_New(1)) == NULL)
                goto done;
            Py_INCREF(first);
            PyList_SET_ITEM(tags, 0, first);
        }
        else if (PyList_GET_SIZE(tags) >= limit)
            break;
        PyObject *t = PyLong_FromUnsignedLongLong(tag2);
        if (t == NULL || PyList_Append(tags, t) < 0) {
            Py_XDECREF(t);
            goto done;
        }
        Py_DECREF(t);
        next = next2;
    }
    PyObject *ch = PyLong_FromUnsignedLong(channel), *nx = PyLong_FromSsize_t(next);
    if (ch == NULL || nx == NULL || (result = PyTuple_New(4)) == NULL) {
        Py_XDECREF(ch);
        Py_XDECREF(nx);
        goto done;
    }
    PyObject *what = tags != NULL ? tags : first, *flag = multiple ? Py_True : Py_False;
    Py_INCREF(what);
    Py_INCREF(flag);
    PyTuple_SET_ITEM(result, 0, ch);
    PyTuple_SET_ITEM(result, 1, what);
    PyTuple_SET_ITEM(result, 2, flag);
    PyTuple_SET_ITEM(result, 3, nx);
done:
    Py_XDECREF(first);
    Py_XDECREF(tags);
    PyBuffer_Release(view);
    return result;
}

